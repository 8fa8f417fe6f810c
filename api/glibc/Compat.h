/* Shared by the files of api/glibc/ (README.md there): binding a call to an older symbol version
 * of glibc, which libflashbob.so needs to load on glibc 2.28 although it is linked against 2.36. */
#ifndef FLASHBOB_API_GLIBC_COMPAT_H
#define FLASHBOB_API_GLIBC_COMPAT_H

/* The version names below are x86-64's (GLIBC_2.2.5 is its base version; other architectures
 * start elsewhere), and so is the stat layout version in Stat.c. */
#if !defined(__x86_64__) || !defined(__GLIBC__)
#error "api/glibc/ names x86-64 glibc symbol versions; port them before building elsewhere"
#endif

/* FLASHBOB_FORWARD(ret, name, version, params, args) defines `name` in libflashbob.so as a tail
 * call to glibc's `name@version`. References to `name` from the static archives (LLVM, MLIR,
 * libstdc++) bind to this local definition at link time instead of to glibc's newest version.
 * `.symver` only renames references in this file, so the forwarder is what carries it to the
 * rest of the library. */
#define FLASHBOB_FORWARD(ret, name, version, params, args)                                        \
  ret flashbob_glibc_old_##name params;                                                          \
  __asm__(".symver flashbob_glibc_old_" #name "," #name "@" version);                           \
  ret name params { return flashbob_glibc_old_##name args; }

#endif
