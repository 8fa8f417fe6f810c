/* _dl_find_object (glibc 2.35): the unwinder of GCC 12's libgcc (linked in statically, it
 * unwinds every C++ exception thrown in this library) asks it for the .eh_frame_hdr of the object
 * holding a code address, and has no other path when glibc's headers declare it. This does what
 * libgcc did before glibc had it: walks the loaded objects with dl_iterate_phdr (glibc 2.2.5)
 * for the one whose PT_LOAD segments hold the address and reports its PT_GNU_EH_FRAME. Slower
 * than glibc's (a lock and a walk per frame), which matters only for exceptions, and rare here.
 *
 * Only this library's copy of libgcc calls it (exports.map keeps it local), and that reads
 * dlfo_eh_frame alone (dlfo_eh_dbase does not exist on x86-64), so dlfo_link_map is left null
 * rather than found with another loader call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

struct search {
  uintptr_t pc;
  struct dl_find_object *result;
};

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct search *s = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  const ElfW(Phdr) *eh_frame = NULL;
  int holds_pc = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type == PT_LOAD) {
      uintptr_t start = info->dlpi_addr + p->p_vaddr, end = start + p->p_memsz;
      if (start < lo) lo = start;
      if (end > hi) hi = end;
      if (s->pc >= start && s->pc < end) holds_pc = 1;
    } else if (p->p_type == PT_GNU_EH_FRAME) {
      eh_frame = p;
    }
  }
  if (!holds_pc) return 0;
  memset(s->result, 0, sizeof *s->result);
  s->result->dlfo_map_start = (void *)lo;
  s->result->dlfo_map_end = (void *)hi;
  s->result->dlfo_eh_frame = eh_frame ? (void *)(info->dlpi_addr + eh_frame->p_vaddr) : NULL;
  return 1;
}

int _dl_find_object(void *pc, struct dl_find_object *result) {
  struct search s = {(uintptr_t)pc, result};
  return dl_iterate_phdr(visit, &s) ? 0 : -1;
}
