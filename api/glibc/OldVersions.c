/* Functions that glibc after 2.28 exports under a newer default version but still provides under
 * the old one: bound to the old one (Compat.h), which glibc 2.28 has (README.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>

#include "Compat.h"

/* glibc 2.34 moved libpthread and libdl into libc and gave their functions the version
 * GLIBC_2.34 there; the old versions remain as aliases. On glibc 2.28 they live in libpthread.so.0
 * and libdl.so.2, which libflashbob.so therefore names as needed (api/CMakeLists.txt): the loader
 * finds a versioned symbol in any loaded object that defines that version of it. */
FLASHBOB_FORWARD(int, pthread_create, "GLIBC_2.2.5",
                 (pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg),
                 (t, a, f, arg))
FLASHBOB_FORWARD(int, pthread_join, "GLIBC_2.2.5", (pthread_t t, void **r), (t, r))
FLASHBOB_FORWARD(int, pthread_detach, "GLIBC_2.2.5", (pthread_t t), (t)) /* the CLI's threads */
FLASHBOB_FORWARD(int, pthread_once, "GLIBC_2.2.5", (pthread_once_t *o, void (*f)(void)), (o, f))
FLASHBOB_FORWARD(int, pthread_attr_setstacksize, "GLIBC_2.2.5",
                 (pthread_attr_t *a, size_t s), (a, s))
FLASHBOB_FORWARD(int, pthread_setname_np, "GLIBC_2.12", (pthread_t t, const char *n), (t, n))
FLASHBOB_FORWARD(int, pthread_rwlock_rdlock, "GLIBC_2.2.5", (pthread_rwlock_t *l), (l))
FLASHBOB_FORWARD(int, pthread_rwlock_wrlock, "GLIBC_2.2.5", (pthread_rwlock_t *l), (l))
FLASHBOB_FORWARD(int, pthread_rwlock_unlock, "GLIBC_2.2.5", (pthread_rwlock_t *l), (l))
FLASHBOB_FORWARD(void *, dlopen, "GLIBC_2.2.5", (const char *f, int m), (f, m))
FLASHBOB_FORWARD(void *, dlsym, "GLIBC_2.2.5", (void *h, const char *s), (h, s))
FLASHBOB_FORWARD(char *, dlerror, "GLIBC_2.2.5", (void), ())
FLASHBOB_FORWARD(int, dlclose, "GLIBC_2.2.5", (void *h), (h))
FLASHBOB_FORWARD(int, dladdr, "GLIBC_2.2.5", (const void *a, Dl_info *i), (a, i))

/* libstdc++ and libgcc test whether threads can exist by the address of this weak reference
 * (gthr-posix.h); it is never null here, so they always take the thread-safe path. Not declared
 * by glibc's headers. */
int __pthread_key_create(pthread_key_t *k, void (*d)(void *));
FLASHBOB_FORWARD(int, __pthread_key_create, "GLIBC_2.2.5",
                 (pthread_key_t *k, void (*d)(void *)), (k, d))

/* Moved from libpthread to libc in glibc 2.32 (GLIBC_2.32 there). */
FLASHBOB_FORWARD(int, pthread_sigmask, "GLIBC_2.2.5",
                 (int how, const sigset_t *s, sigset_t *old), (how, s, old))

/* glibc 2.29 re-versioned these when it dropped the SVID error handling (matherr) from them; the
 * 2.2.5 versions wrap the same computation and report errors through errno, as C requires. */
FLASHBOB_FORWARD(double, exp, "GLIBC_2.2.5", (double x), (x))
FLASHBOB_FORWARD(double, exp2, "GLIBC_2.2.5", (double x), (x))
FLASHBOB_FORWARD(double, log, "GLIBC_2.2.5", (double x), (x))
FLASHBOB_FORWARD(double, log2, "GLIBC_2.2.5", (double x), (x))
FLASHBOB_FORWARD(double, pow, "GLIBC_2.2.5", (double x, double y), (x, y))
