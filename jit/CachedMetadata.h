// The launch facts a disk-cache entry records beside its cubin (its metadata.json's "metadata":
// entry, threads, shared_bytes, tensor_maps), checked against the ones derived from the kernel
// spec the entry was looked up for before anything is launched.
//
// The entry's checksums prove only that its files are the ones its metadata.json lists, not
// that the metadata is right: a stray or hostile edit (threads 256 -> 128 launches a
// warp-specialized kernel with its producer warps missing; shared_bytes lowered, or the K and V
// tensor maps swapped, reads past or from the wrong tensor) or a bug of an older build would
// otherwise run as is. So nothing is taken from it: the launch facts are derived from the spec
// on every lookup (jit::compileFront, milliseconds) and the recorded ones must equal them,
// every tensor map field in order. An entry that differs is recompiled and replaced
// (jit/KernelCache), never launched.
#pragma once

#include "compiler/pipeline/Pipeline.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace flashbob::jit {

// Success if `metadata` records exactly `derived` (the front stage's facts for the entry's
// spec), else an error naming the first field that differs, its value and the derived one
// ("metadata.json: shared_bytes = 1024, but fwd_... uses 90112").
llvm::Error validateCachedMetadata(const llvm::json::Object &metadata,
                                   const compiler::LaunchFacts &derived);

} // namespace flashbob::jit
