/* stat, fstat, lstat and fstatat: exported by libc only since glibc 2.33 (GLIBC_2.33). Before,
 * <sys/stat.h> turned each call into one to the __xstat family with the layout version as first
 * argument, and those are still exported under their old versions: the same calls here. */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "Compat.h"

/* _STAT_VER (_STAT_VER_LINUX) on x86-64, what the 2.28 headers passed; the 2.33 headers no
 * longer define it. */
#define FLASHBOB_STAT_VER 1

int flashbob_glibc_xstat(int ver, const char *path, struct stat *st);
int flashbob_glibc_lxstat(int ver, const char *path, struct stat *st);
int flashbob_glibc_fxstat(int ver, int fd, struct stat *st);
int flashbob_glibc_fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
__asm__(".symver flashbob_glibc_xstat,__xstat@GLIBC_2.2.5");
__asm__(".symver flashbob_glibc_lxstat,__lxstat@GLIBC_2.2.5");
__asm__(".symver flashbob_glibc_fxstat,__fxstat@GLIBC_2.2.5");
__asm__(".symver flashbob_glibc_fxstatat,__fxstatat@GLIBC_2.4");

int stat(const char *path, struct stat *st) {
  return flashbob_glibc_xstat(FLASHBOB_STAT_VER, path, st);
}
int lstat(const char *path, struct stat *st) {
  return flashbob_glibc_lxstat(FLASHBOB_STAT_VER, path, st);
}
int fstat(int fd, struct stat *st) { return flashbob_glibc_fxstat(FLASHBOB_STAT_VER, fd, st); }
int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  return flashbob_glibc_fxstatat(FLASHBOB_STAT_VER, dirfd, path, st, flags);
}
