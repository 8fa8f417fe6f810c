// The launch facts a disk-cache entry records beside its cubin (its metadata.json's "metadata":
// entry, threads, shared_bytes, tensor_maps), checked against the kernel spec the entry was
// looked up for before anything is launched from them.
//
// The entry's checksums prove only that its files are the ones its metadata.json lists, not
// that the metadata is right: a stray or hostile edit (threads 256 -> 128 launches a
// warp-specialized kernel with its producer warps missing) or a bug of an older build would
// otherwise run as is. Every fact is re-derived from the spec where it can be (entry, threads)
// and range-checked against the target and the kernel's signature where it cannot (shared
// bytes and tensor maps come out of the compiler). An entry that fails is recompiled and
// replaced (jit/KernelCache), never launched.
#pragma once

#include "compiler/KernelSpec.h"
#include "support/TensorMapSpec.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace flashbob::jit {

struct CachedLaunch {
  std::string entry;
  unsigned threads = 0;
  unsigned sharedBytes = 0;
  std::vector<support::TensorMapSpec> tensorMaps;
};

// Threads per block of a kernel of this spec: 32 per consumer warp, plus a producer warpgroup's
// 128 (bob::SpecAttr::getThreads, without an MLIR context).
int64_t specThreads(const compiler::KernelSpec &spec);

// The launch facts of `metadata` if they fit `spec`, else an error naming the field, its value
// and what was expected ("metadata.json: threads = 128, but fwd_... has 256").
llvm::Expected<CachedLaunch> validateCachedMetadata(const llvm::json::Object &metadata,
                                                    const compiler::KernelSpec &spec);

} // namespace flashbob::jit
