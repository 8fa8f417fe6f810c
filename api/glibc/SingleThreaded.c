/* __libc_single_threaded (glibc 2.32): libstdc++ (GCC 12) skips atomic operations on reference
 * counts (shared_ptr, locale, ...) while it is nonzero. Its static archive and the code its
 * headers inline into LLVM, MLIR and ours read this local variable instead. It stays 0, "maybe
 * several threads", which is always correct: the atomic path is what libstdc++ takes where glibc
 * cannot tell, as on glibc 2.28. */
char __libc_single_threaded = 0;
