/* mallinfo2 (glibc 2.33; LLVM's sys::Process::GetMallocUsage calls it where it exists) over
 * mallinfo, which glibc 2.28 has: what LLVM itself calls where mallinfo2 is missing. mallinfo's
 * int fields wrap past 2 GiB; read as unsigned they stay right up to 4 GiB, and the one figure
 * LLVM reads (uordblks, the bytes in use) only feeds its statistics. */
#include <malloc.h>

/* mallinfo is deprecated in favour of the function defined here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

struct mallinfo2 mallinfo2(void) {
  struct mallinfo m = mallinfo();
  struct mallinfo2 r;
  r.arena = (unsigned)m.arena;
  r.ordblks = (unsigned)m.ordblks;
  r.smblks = (unsigned)m.smblks;
  r.hblks = (unsigned)m.hblks;
  r.hblkhd = (unsigned)m.hblkhd;
  r.usmblks = (unsigned)m.usmblks;
  r.fsmblks = (unsigned)m.fsmblks;
  r.uordblks = (unsigned)m.uordblks;
  r.fordblks = (unsigned)m.fordblks;
  r.keepcost = (unsigned)m.keepcost;
  return r;
}
