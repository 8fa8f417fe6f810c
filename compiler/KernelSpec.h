// The specialization of one kernel variant, as plain C++ (what the CLI, the runtime's cache key
// and the autotuner handle). `toAttr` gives the dialect's #bob.spec; the dialect's verifier is
// the single source of truth for what is supported, so `validate` asks it.
#pragma once

#include "compiler/dialect/BobEnums.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir {
class MLIRContext;
}
namespace flashbob::bob {
class SpecAttr;
}

namespace flashbob::compiler {

// How a kernel's work is cut: the tile heuristics choose these (kernels/TileTable), the
// autotuner searches them, everything else is fixed by the problem.
struct TileConfig {
  int64_t blockM = 64;   // query rows per tile
  int64_t blockN = 64;   // key rows per tile
  int64_t warps = 4;     // consumer warps per block
  int64_t stages = 1;    // global -> shared pipeline depth (#bob.spec stages)
  int64_t warpCols = 1;  // column groups the warps form (#bob.spec warp_cols)
  bool producer = false; // a producer warpgroup issues the loop's TMA loads (#bob.spec producer)

  // "m64_n32_w4_s2" ("w8c2" for 8 warps in 2 column groups, "w4p" for 4 consumer warps and a
  // producer warpgroup): the tiles' part of KernelSpec::name, and how tuning records name them.
  std::string name() const;
  // name()'s inverse: nullopt for text that is not such a name.
  static std::optional<TileConfig> parse(llvm::StringRef text);
  bool operator==(const TileConfig &o) const {
    return blockM == o.blockM && blockN == o.blockN && warps == o.warps && stages == o.stages &&
           warpCols == o.warpCols && producer == o.producer;
  }
};

struct KernelSpec {
  bob::KernelKind kind = bob::KernelKind::fwd;
  int64_t headDim = 64; // the tiles' width (a multiple of 16)
  // The global tensors' width when narrower than the tiles (#bob.spec tensor_dim; 0: headDim):
  // a problem whose d is a multiple of 8 but not of 16 runs at tile width d + 8 on its own
  // tensors, the columns past d read as zeros and never written (jit/HeadDims.h). The default
  // scale compiled in is then 1/sqrt(tensorDim).
  int64_t tensorDim = 0;
  int64_t tensorWidth() const { return tensorDim ? tensorDim : headDim; }
  TileConfig tiles;
  bob::ElemType dtype = bob::ElemType::bf16;
  bool causal = false;
  bob::Arch arch = bob::Arch::sm_90a;
  // The softmax scale is never part of the spec: the kernels read s and s log2(e) from their
  // f32 arguments (kernels/Signature.h) when this is set, so every scale runs the same kernel.
  // Unset, they are compiled in as constants with the values of the default scale 1/sqrt(d),
  // which the launcher picks when the problem's scale rounds to the same f32 values: the
  // arguments are then not read, and the sweep keeps two fewer registers live (ptxas spills
  // less in bob_q and bob_kv; bench/results/2026-12-01-h200-default-scale.md). Like Triton's
  // specialization of arguments equal to 1: one more variant at most, never one per value.
  bool scaleArgument = false;
  // Grouped-query attention: the key/value tensors have fewer heads than the queries (a divisor
  // of them, known at launch). Query-major kernels then read key/value head h / group for query
  // head h; key-major ones sweep the query blocks of every query head of their key/value head's
  // group, so dK, dV, gK and gV are summed in the kernel (deterministic, nothing atomic). Unset,
  // the heads are equal and the kernels compute no head mapping.
  bool grouped = false;
  // Sliding window (flash-attn's window_size): query i sees key j only if
  // i + (M - N) - windowLeft <= j <= i + (M - N) + windowRight; -1 leaves a side unbounded. With
  // `causal` (the window (-1, 0)) windowRight is -1 and the causal bound applies. Compiled in
  // (a model has one window), and the loops skip the blocks outside it, so the work grows with
  // N x window, not N x M.
  int64_t windowLeft = -1;
  int64_t windowRight = -1;
  bool windowed() const { return windowLeft >= 0 || windowRight >= 0; }
  // Keys past the diagonal a query sees: 0 when causal, the window's right side, -1 for all.
  int64_t rightReach() const { return causal ? 0 : windowRight; }
  // Variable-length batch (flash-attn's varlen): the tensors pack the rows of every sequence
  // one after another, (1, heads, total rows, head_dim), and two offset arguments give each
  // sequence's first row (kernels/Signature.h). A block finds its sequence's rows there; each
  // sequence is its own problem (the mask, causal bottom-right, in its own coordinates), and
  // blocks past their sequence's end do no work.
  bool varlen = false;
  // A long sweep (kernels::kLongSweepRows rows or more; jit/Launch.cpp decides): the backward's
  // and BoB's accumulators flush into reserves every few blocks, so that the tensor cores'
  // truncation does not add up over a million rows (docs/numerics.md, "Long sequences"). Only those kernels are long; the
  // forward and its JVP never are. Shorter sweeps do not pay for the branch.
  bool longSweep = false;
  // One step of a context-parallel ring (docs/context-parallel.md): the kernel runs on one
  // (query shard, key shard) pair given the global L (and D, c, b), and writes its tensor
  // outputs in f32, partial sums to be added (or, the forward's O, merged by log-sum-exp) over
  // the ring's steps; bob_q writes its accumulators X1..X4 and row sums c, beta unfinished
  // (kernels/Signature.h). The forward's JVP (fwd_jvp, fwd_dual) and the fused backward's kinds
  // have no partial form.
  bool partial = false;
  // sm_90a: products whose A operand is a converted register tile (P, dS, ...) in wgmma's
  // accumulator layout read it from registers instead of a scratch shared tile (#bob.spec
  // register_a; FLASHBOB_REGISTER_A). The forward then carries P to the next step in registers.
  bool registerA = false;

  // Stable text naming every field, e.g. "fwd_d64_m64_n64_w4_s1_bf16_causal_sm_90a" (tiles as
  // TileConfig::name; "_t<tensorDim>", "_scalearg", "_gqa", "_varlen", "_long", "_part", "_rega",
  // "_wl<left>" and "_wr<right>" after the dtype when set): the kernel's symbol, the in-memory
  // cache's key and part of the disk cache's.
  std::string name() const;
  bob::SpecAttr toAttr(mlir::MLIRContext *ctx) const;
  bool operator==(const KernelSpec &o) const;
};

// For the kernel caches' hash maps; equal specs hash equal.
llvm::hash_code hash_value(const KernelSpec &spec);

// Checks the spec with the dialect's verifier; the error is one line naming the field.
llvm::Error validate(const KernelSpec &spec, mlir::MLIRContext *ctx);

std::optional<bob::KernelKind> parseKind(llvm::StringRef text);
std::optional<bob::ElemType> parseDtype(llvm::StringRef text); // bf16, fp16 (or f16)
std::optional<bob::Arch> parseArch(llvm::StringRef text);      // sm_80 ... sm_90a

} // namespace flashbob::compiler
