// What each SM target can do and its limits: the one table every layer asks (the verifier, the
// passes, the tile table, the launcher, the tests). Figures are NVIDIA's per compute capability
// (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
#pragma once

#include "compiler/dialect/BobEnums.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

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

// Head dims. A problem's d may be anything in [kMinHeadDim, kMaxHeadDim]: isSupportedHeadDim is
// the rule the API's checks, the CLI's flags and, through the C API's flashbob_limit, the front
// ends ask. The kernels' tiles are kTileHeadDimMultiple columns wide per fragment (the
// verifier's rule, isKernelHeadDim), so a problem runs at the tile width kernelHeadDim(d) with
// the columns past d zero: zeros add nothing to S = s Q K^T nor to any product over the head
// dim, and every output's first d columns are exact (docs/bob-math.md, "Head dims that are no
// multiple of 16"). How the zeros get there (jit/HeadDims.h): a kernel whose tensors are
// narrower than its tiles reads them as zeros and writes only the first d columns (#bob.spec
// tensor_dim; rows of whole 16-byte pieces, d a multiple of kTensorDimMultiple), else the API
// copies the tensors into zero-padded ones around the kernels. The default scale stays
// 1/sqrt(d) either way.
inline constexpr int64_t kMinHeadDim = 8;
inline constexpr int64_t kMaxHeadDim = 256;
inline constexpr int64_t kTileHeadDimMultiple = 16;
inline constexpr int64_t kTensorDimMultiple = 8; // 16 bytes of bf16/fp16
inline bool isSupportedHeadDim(int64_t d) { return d >= kMinHeadDim && d <= kMaxHeadDim; }
// Why no wider head dims: what the messages refusing one past kMaxHeadDim add. BoB's first pass
// (bob_q) keeps four f32 accumulators across head_dim for each row it owns; in its smallest
// tiles (16 rows a warp, four column groups) they are 128 floats a thread at 256 (which spills
// already, docs/performance.md) and 256 at 512, a thread's whole register file.
inline constexpr llvm::StringLiteral kWideHeadDimReason =
    "wider heads do not fit (BoB's first pass keeps four f32 accumulators across head_dim, "
    "which at 256 already fill a thread's registers)";
// What a message refusing head dim d adds after its range: the reason past the widest.
inline std::string wideHeadDimNote(int64_t d) {
  return d > kMaxHeadDim ? ": " + kWideHeadDimReason.str() : std::string();
}
// The tile width a problem of head dim d runs at.
inline int64_t kernelHeadDim(int64_t d) {
  return (d + kTileHeadDimMultiple - 1) / kTileHeadDimMultiple * kTileHeadDimMultiple;
}
// The tile widths kernels are built for (#bob.spec head_dim).
inline bool isKernelHeadDim(int64_t d) {
  return d > 0 && d % kTileHeadDimMultiple == 0 && d <= kMaxHeadDim;
}
// Whether a kernel of tile width headDim can itself read and write tensors tensorDim columns
// wide (#bob.spec tensor_dim): whole 16-byte pieces per row, and one fragment of padding at most.
inline bool isKernelTensorDim(int64_t tensorDim, int64_t headDim) {
  return tensorDim % kTensorDimMultiple == 0 && tensorDim > headDim - kTileHeadDimMultiple &&
         tensorDim <= headDim;
}

const TargetInfo &targetInfo(Arch arch);
llvm::ArrayRef<TargetInfo> allTargets();

// The target a GPU of compute capability major.minor gets by default: its own, with the
// arch-specific features where it has them (Hopper: sm_90a); none below sm_80.
std::optional<Arch> defaultArchFor(int major, int minor);

inline bool hasHopperFeatures(Arch arch) { return targetInfo(arch).hopperFeatures; }

} // namespace flashbob::bob
