// api/glibc/'s definitions against glibc's own newest versions, called side by side on this
// (newer) glibc: what libflashbob.so gets instead of them must give the same answers. Linked with
// the same objects and, like libflashbob.so, the static libstdc++ and libgcc, so the exception
// below unwinds through api/glibc/FindObject.c.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <set>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

// glibc's versions, named apart from the local definitions this program links.
extern "C" {
int glibc_stat(const char *, struct stat *);
int glibc_lstat(const char *, struct stat *);
int glibc_fstat(int, struct stat *);
int glibc_fstatat(int, const char *, struct stat *, int);
struct mallinfo2 glibc_mallinfo2(void);
int glibc_dl_find_object(void *, struct dl_find_object *);
double glibc_log(double);
double glibc_pow(double, double);
}
__asm__(".symver glibc_stat,stat@GLIBC_2.33");
__asm__(".symver glibc_lstat,lstat@GLIBC_2.33");
__asm__(".symver glibc_fstat,fstat@GLIBC_2.33");
__asm__(".symver glibc_fstatat,fstatat@GLIBC_2.33");
__asm__(".symver glibc_mallinfo2,mallinfo2@GLIBC_2.33");
__asm__(".symver glibc_dl_find_object,_dl_find_object@GLIBC_2.35");
__asm__(".symver glibc_log,log@GLIBC_2.29");
__asm__(".symver glibc_pow,pow@GLIBC_2.29");

static int failures = 0;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                  \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

static bool same(const struct stat &a, const struct stat &b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_mode == b.st_mode &&
         a.st_size == b.st_size && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

static void stat_family(const std::string &dir) {
  std::string file = dir + "/file", link = dir + "/link";
  int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, "flashbob", 8) == 8);
  CHECK(symlink("file", link.c_str()) == 0);
  struct stat ours, theirs;
  CHECK(stat(link.c_str(), &ours) == 0 && glibc_stat(link.c_str(), &theirs) == 0);
  CHECK(same(ours, theirs) && ours.st_size == 8);
  CHECK(lstat(link.c_str(), &ours) == 0 && glibc_lstat(link.c_str(), &theirs) == 0);
  CHECK(same(ours, theirs) && S_ISLNK(ours.st_mode));
  CHECK(fstat(fd, &ours) == 0 && glibc_fstat(fd, &theirs) == 0 && same(ours, theirs));
  CHECK(fstatat(AT_FDCWD, link.c_str(), &ours, AT_SYMLINK_NOFOLLOW) == 0 &&
        glibc_fstatat(AT_FDCWD, link.c_str(), &theirs, AT_SYMLINK_NOFOLLOW) == 0 &&
        same(ours, theirs) && S_ISLNK(ours.st_mode));
  errno = 0;
  CHECK(stat((dir + "/missing").c_str(), &ours) == -1 && errno == ENOENT);
  close(fd);
  unlink(link.c_str());
  unlink(file.c_str());
}

static void find_object() {
  // Code here, in libc, and an address no object maps.
  void *addresses[] = {reinterpret_cast<void *>(&find_object), reinterpret_cast<void *>(&printf),
                       reinterpret_cast<void *>(uintptr_t(16))};
  for (void *pc : addresses) {
    struct dl_find_object ours, theirs;
    int rc = _dl_find_object(pc, &ours);
    CHECK(rc == glibc_dl_find_object(pc, &theirs));
    if (rc == 0) {
      CHECK(ours.dlfo_eh_frame == theirs.dlfo_eh_frame && ours.dlfo_eh_frame != nullptr);
      CHECK(ours.dlfo_map_start == theirs.dlfo_map_start);
      CHECK(ours.dlfo_map_end == theirs.dlfo_map_end);
    }
  }
  // The unwinder of the static libgcc finds this program's frames through it.
  bool caught = false;
  try {
    throw std::runtime_error("unwound");
  } catch (const std::exception &e) {
    caught = std::strcmp(e.what(), "unwound") == 0;
  }
  CHECK(caught);
}

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // each FAIL shown even if a later check aborts
  char dir[] = "/tmp/flashbob-glibc-XXXXXX";
  CHECK(mkdtemp(dir) != nullptr);
  stat_family(dir);
  rmdir(dir);
  find_object();

  // Something in use for both to count (volatile: the compiler may not drop the allocation).
  void *volatile kept = malloc(1 << 20);
  struct mallinfo2 ours = mallinfo2(), theirs = glibc_mallinfo2();
  CHECK(ours.arena == theirs.arena && ours.uordblks == theirs.uordblks &&
        ours.hblkhd == theirs.hblkhd && ours.hblkhd >= (1 << 20));
  free(kept);

  std::set<uint32_t> draws;
  errno = 12345;
  for (int i = 0; i < 64; ++i) draws.insert(arc4random());
  CHECK(errno == 12345);
  CHECK(draws.size() > 60);  // 64 equal-or-colliding 32-bit draws: about 2^-20 for a good source

  volatile double x = 3.7, y = -1.25;  // volatile: computed at run time, through the forwarders
  CHECK(log(x) == glibc_log(x) && pow(x, y) == glibc_pow(x, y));
  errno = 0;
  CHECK(std::isinf(log(0.0 * x)) && errno == ERANGE);

  if (failures == 0) std::printf("ok: api/glibc/ agrees with glibc's own versions\n");
  return failures == 0 ? 0 : 1;
}
