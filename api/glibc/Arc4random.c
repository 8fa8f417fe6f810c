/* arc4random (glibc 2.36; libstdc++'s std::random_device and LLVM's
 * sys::Process::GetRandomNumber call it where it exists): the
 * kernel's random bytes through getrandom(2) (glibc 2.25), or /dev/urandom on kernels before
 * 3.17, which have no getrandom. Like glibc's, it never fails: with neither source it aborts. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

static int from_getrandom(void *buf, size_t size) {
  for (;;) {
    /* Requests of up to 256 bytes are never cut short once the pool is ready (getrandom(2)). */
    ssize_t n = getrandom(buf, size, 0);
    if (n == (ssize_t)size) return 1;
    if (n < 0 && errno != EINTR) return 0;
  }
}

static int from_urandom(void *buf, size_t size) {
  int fd;
  do fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, (char *)buf + done, size - done);
    if (n > 0) done += (size_t)n;
    else if (n == 0 || errno != EINTR) break;
  }
  close(fd);
  return done == size;
}

uint32_t arc4random(void) {
  int saved = errno; /* arc4random does not report through errno; callers' errno is kept */
  uint32_t v;
  if (!from_getrandom(&v, sizeof v) && !from_urandom(&v, sizeof v)) abort();
  errno = saved;
  return v;
}
