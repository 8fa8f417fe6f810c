// What a compiled kernel depends on, as one object: its spec, the compile options and the
// toolchain that made it. The disk cache stores and compares its text; tuning records add the
// problem's bucket and the GPU to it; the in-process cache hashes the spec alone (the rest is
// fixed for a process).
#pragma once

#include "compiler/KernelSpec.h"
#include "compiler/pipeline/Pipeline.h"

#include "llvm/ADT/Hashing.h"

#include <string>

namespace flashbob::jit {

struct KernelKey {
  compiler::KernelSpec spec;
  compiler::TargetOptions target;

  explicit KernelKey(const compiler::KernelSpec &spec);
  // Every field that can change the generated cubin, one per line: the spec's name, the compile
  // options, FlashBoB's version and compiler hash (compiler/ and kernels/ sources: the kernels'
  // calling convention is decided there, so a cubin of an older one is never looked up), LLVM's
  // version and the assembler's (compiler/pipeline/Assembler.h).
  std::string text() const;
};

// Specs as keys of the in-process caches: KernelSpec's own equality and hash.
struct SpecHash {
  size_t operator()(const compiler::KernelSpec &s) const { return hash_value(s); }
};
struct SpecEqual {
  bool operator()(const compiler::KernelSpec &a, const compiler::KernelSpec &b) const {
    return a == b;
  }
};

} // namespace flashbob::jit
