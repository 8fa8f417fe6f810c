// What each SM target can do and its limits: the one table every layer asks (the verifier, the
// passes, the tile table, the launcher, the tests). Figures are NVIDIA's per compute capability
// (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
#pragma once

#include "compiler/dialect/BobDialect.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>

namespace flashbob::bob {

struct TargetInfo {
  Arch arch;
  int computeCapability;  // major * 10 + minor of the GPUs that run it
  // wgmma, TMA (bulk tensor copies on mbarriers) and setmaxnreg: the arch-specific sm_90a only.
  bool hopperFeatures;
  int64_t sharedPerBlock; // opt-in shared memory per block, static + dynamic, bytes
  int64_t sharedPerSm;    // shared memory per SM, bytes
};

// The driver keeps this much of an SM's shared memory per resident block.
inline constexpr int64_t kSharedReservePerBlock = 1024;
inline constexpr int64_t kRegistersPerSm = 65536;
inline constexpr int64_t kRegistersPerThread = 255;
// A TMA box (sm_90a) spans at most this many elements in each dimension.
inline constexpr int64_t kTmaMaxBoxDim = 256;

// The head dims the kernels are built for, on every target: multiples of kHeadDimMultiple up to
// kMaxHeadDim (the verifier, the API's checks, the CLI's flags and, through the C API's
// flashbob_limit, the front ends ask here).
inline constexpr int64_t kHeadDimMultiple = 16;
inline constexpr int64_t kMaxHeadDim = 256;
inline bool isSupportedHeadDim(int64_t d) {
  return d > 0 && d % kHeadDimMultiple == 0 && d <= kMaxHeadDim;
}

const TargetInfo &targetInfo(Arch arch);
llvm::ArrayRef<TargetInfo> allTargets();

// The target a GPU of compute capability major.minor gets by default: its own, with the
// arch-specific features where it has them (Hopper: sm_90a); none below sm_80.
std::optional<Arch> defaultArchFor(int major, int minor);

inline bool hasHopperFeatures(Arch arch) { return targetInfo(arch).hopperFeatures; }
// Null specs (ops outside a kernel) have none.
inline bool hasHopperFeatures(SpecAttr spec) { return spec && hasHopperFeatures(spec.getArch()); }

} // namespace flashbob::bob
