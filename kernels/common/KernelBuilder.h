// What every kernel family's IR builder stands on: the kernel's arguments (derived from its
// signature, kernels/Signature.h), the block's coordinates, its shared tiles, the sweep over the
// other sequence's blocks, and the tile arithmetic (Tile.h) so that a kernel reads as its
// equations, one tile op per line.
#pragma once

#include "compiler/KernelSpec.h"
#include "compiler/dialect/BobDialect.h"
#include "kernels/Signature.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <array>
#include <initializer_list>
#include <optional>

namespace flashbob::kernels {

class Tile; // Tile.h

class KernelBuilder {
public:
  KernelBuilder(mlir::MLIRContext *ctx, const compiler::KernelSpec &spec);

  const compiler::KernelSpec &spec;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::ImplicitLocOpBuilder b;

  // Creates the bob.kernel (named spec.name()) with the arguments of signature(spec.kind),
  // moves the builder into its body and computes the block's coordinates below.
  void beginKernel();
  // The argument bound to `operand` (`scalar`), which the kind's signature must take.
  mlir::Value arg(Operand operand) const;
  mlir::Value arg(Scalar scalar) const;

  // The block's coordinates, after beginKernel: the sequence lengths N (queries) and M (keys),
  // (batch, ownHead) from blockIdx.y = batch * heads + ownHead, where heads are those of the
  // block's own side (query heads for query-major kinds, key/value heads for key-major ones),
  // and the first of the rows this block owns. With spec.grouped, group = query heads /
  // key/value heads, and query head h reads key/value head h / group.
  mlir::Value n, m, batch, ownHead, ownStart, group;
  // With spec.varlen, `batch` is 0 (the tensors are packed) and n and m are the lengths of the
  // block's sequence (blockIdx.y / heads), whose rows start at queryBase and keyBase in the
  // packed tensors; the block's coordinates (ownStart, the sweep's starts) and the mask stay in
  // the sequence's own rows, and the loads and stores below add the base.
  mlir::Value queryBase, keyBase;
  // The block's batch entry (blockIdx.y / heads): `batch` itself for a dense batch, the
  // sequence's index for a packed one (whose `batch` is 0); what per-sequence arrays such as
  // the fused backward's counters are indexed by.
  mlir::Value sequence;
  // The head of the swept side's tensors: the key/value head ownHead / group for query-major
  // kinds (ownHead without grouping); for key-major ones, set inside `sweep` to the query head
  // of the step.
  mlir::Value sweptHead;
  bool keyMajor() const { return bob::isKeyMajor(spec.kind); }
  int64_t ownRows() const { return keyMajor() ? spec.tiles.blockN : spec.tiles.blockM; }
  int64_t sweptRows() const { return keyMajor() ? spec.tiles.blockM : spec.tiles.blockN; }
  int64_t headDim() const { return spec.headDim; }
  // The softmax scale s and s log2(e): f32 kernel arguments, so one kernel serves every scale.
  mlir::Value scale() const { return arg(Scalar::scale); }
  mlir::Value scaleLog2e() const { return arg(Scalar::scaleLog2e); }

  // One shared tile of rows x head_dim per operand: those of the block's own rows, loaded here,
  // then those of the swept rows, loaded by every step of `sweep`.
  void stage(std::initializer_list<Operand> own, std::initializer_list<Operand> swept);
  mlir::Value shared(Operand operand) const;

  // The loop over the blocks of the other sequence that this block's rows meet: query-major
  // kinds sweep key blocks up to the causal diagonal, key-major kinds query blocks from it
  // (with spec.grouped: those of each query head of the group in turn, in one loop, so that
  // the accumulators sum over the group).
  // Each step loads the swept tiles of its block, then `body(start, carried)` (start: the
  // block's first row) returns the values carried to the next step; returns those of the last.
  using SweepBody =
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value start, mlir::ValueRange carried)>;
  llvm::SmallVector<mlir::Value> sweep(mlir::ValueRange initial, SweepBody body);
  // The same sweep rotated by one block for the operands in `lagging` (query-major only): the
  // step at block j loads the other swept tiles of block j and these of block j - 1, and the
  // loop runs one step more (blocks first .. last + 1), so that a body can issue block j's
  // products before block j - 1's (FlashAttention-3's overlap within a warpgroup, kernels/fwd).
  // The extra first step gets the lagging tiles of block `first` and the extra last step the
  // other tiles of the block past the sweep (zero past the sequence; the mask hides them): a
  // body must make both steps' contributions vanish (e.g. a zero P before the first).
  llvm::SmallVector<mlir::Value> sweepLagging(mlir::ValueRange initial,
                                              std::initializer_list<Operand> lagging,
                                              SweepBody body);

  // A shared tile of rows x cols in the input type, for a register tile the kernel stores
  // itself (storeInto) and reads as a product's operand later, e.g. in the next step.
  mlir::Value scratch(int64_t rows, int64_t cols);
  // A shared f32 tile, for sums staged (storeInto) for addIntoSweptRows.
  mlir::Value sumsTile(int64_t rows, int64_t cols);
  void storeInto(const Tile &tile, mlir::Value scratch); // rounded to the tile's element type

  // Sums across blocks (key-major, inside `sweep`; sm_90a), the fused backward's dQ: the staged
  // f32 tile added into the swept rows from `start` of `operand` (a `sums` operand), rows past
  // the sequence untouched (bob.bulk_reduce_add); waitForBulk until those additions are done
  // (bob.bulk_wait). waitForTurn blocks until the counter of swept block `block` (of the swept
  // head; a `counters` operand) equals `turn`, passTurn adds 1 to it (bob.semaphore_wait and
  // _signal): the blocks that add into one swept block do so in the order of their turns, so
  // the f32 sums come out the same on every run.
  void addIntoSweptRows(mlir::Value staged, Operand operand, mlir::Value start);
  void waitForBulk();
  void waitForTurn(Operand counters, mlir::Value block, mlir::Value turn);
  void passTurn(Operand counters, mlir::Value block);
  // Whether the fused backward's key blocks take their turns at each query block from the last
  // key block that sees it down (else from the first up): with a right edge to the mask
  // (causal, or a window's right side) the last one meets the query block first in its sweep,
  // so no block waits for one that is still behind. The grid then starts the last key blocks
  // first (blockStart): a block may only wait for blocks the GPU started before it.
  bool keyBlocksLastFirst() const {
    return spec.kind == bob::KernelKind::bwd_fused && spec.rightReach() >= 0;
  }

  // Long sweeps stay exact (docs/numerics.md, "Long sequences"): the tensor cores truncate
  // each sum into an accumulator, so an accumulator that takes many steps drifts toward zero in
  // proportion to their number. With spec.longSweep, one that `flush`es into a reserve every
  // kFlushBlocks steps restarts from zero there (the reserve adds it in f32, rounded to
  // nearest), and `withReserve` after the sweep gives the sum of both. The reserve lives in
  // each thread's local memory: no registers, no shared memory, touched once per kFlushBlocks
  // steps. The flush is due every kFlushBlocks steps (`bob.flush ... every`): bob-chunk-sweeps
  // runs the sweep as chunks of that many steps with the flushes between them, because a test
  // on every step (a branch in the loop) cost 1-9% a step on the H200 even where no flush ran
  // (bench/results/2026-12-02-h200-long-sweeps.md). Without spec.longSweep the three are no-ops
  // (no reserve, acc as it is). 512: the drift within 512 blocks (32K rows at 64 a block) is
  // that of a short sweep, below what bf16 shows (at N = M = 2^20 the CPU emulation gives the
  // same errors flushing every 64, 256 or 1024 blocks).
  static constexpr int64_t kFlushBlocks = 512;
  mlir::Value reserve(const Tile &like); // zero-filled, of the tile's shape
  Tile flush(const Tile &acc, mlir::Value reserve); // inside `sweep`
  Tile withReserve(const Tile &acc, mlir::Value reserve);

  // Tiles from global memory, zero past the sequence: the block's own rows of a tensor operand
  // as an f32 register tile, of a row operand as a row vector; the swept rows (inside `sweep`,
  // starting at `start`) of a row operand as a column vector.
  Tile loadOwn(Operand operand);
  Tile loadOwnRows(Operand operand);
  Tile loadSweptRows(Operand operand, mlir::Value start);
  // Stores of the block's own rows (rows past the sequence are not written). `through`: an
  // operand whose shared tile (of the block's own rows) the kernel no longer reads, which the
  // store may stage the tile in (bob.store_tile `through`; on sm_90a a TMA store).
  void storeOwn(mlir::Value tile, Operand operand, std::optional<Operand> through = {});
  void storeOwnRows(mlir::Value rows, Operand operand);

  // Types and constants.
  mlir::Type elementType();
  bob::SharedTileType smem(int64_t rows, int64_t cols);
  bob::RegTileType rtile(int64_t rows, int64_t cols);       // f32
  bob::RegTileType operandTile(int64_t rows, int64_t cols); // spec dtype
  bob::RowVecType rowvec(int64_t size);
  bob::ColVecType colvec(int64_t size);
  mlir::Value index(int64_t v);
  // An index known to be in [0, 2^31) as i32, for arithmetic a step repeats (the kernels'
  // indices are 64-bit, which costs twice the instructions), and back.
  mlir::Value narrow(mlir::Value index);
  mlir::Value widen(mlir::Value i32);
  mlir::Value f32(double v); // an f32 scalar constant
  mlir::Value dim(mlir::Value memref, int64_t axis);
  // A register tile or vector of `type` filled with `value`.
  Tile splat(mlir::Type type, double value);

private:
  mlir::Type typeOf(const Param &param);
  mlir::Value blockStart(int64_t rowsPerBlock);
  // Start and bound (sequence length) of the rows of `operand` this block owns.
  std::pair<mlir::Value, mlir::Value> ownRange(Operand operand);
  // Row `local` of the block's sequence on `side` in its tensors: `local` itself for a dense
  // batch, base + local for a packed one.
  mlir::Value rowOf(Side side, mlir::Value local);
  // The bound of a shared tile's load: the sequence's length for a dense batch, where TMA and
  // cp.async zero rows past it; for a packed one the tensor's rows, for TMA's sake (a tensor map
  // bounds a tensor, not a sequence), so a block's tile may hold the next sequence's first rows,
  // which the mask hides as it hides zeros (both sides' masks use the sequence's lengths).
  mlir::Value sharedBound(Operand operand);
  // [base, length) of sequence `sequence`'s rows from its offsets, clamped to [0, total).
  std::pair<mlir::Value, mlir::Value> sequenceRows(mlir::Value offsets, mlir::Value sequence,
                                                   mlir::Value total);
  // The head index of `operand`'s tensor: ownHead for the block's own side, else sweptHead.
  mlir::Value headOf(Operand operand) const;

  std::array<mlir::Value, kOperandCount> args_{};
  std::array<mlir::Value, kScalarCount> scalars_{};
  std::array<mlir::Value, kOperandCount> shared_{};
  llvm::SmallVector<Operand> swept_;
  bool insideSweep_ = false; // building a sweep's body (flush is only for its accumulators)
  llvm::SmallVector<mlir::Value> sweepImpl(mlir::ValueRange initial,
                                           llvm::ArrayRef<Operand> lagging, SweepBody body);
};

} // namespace flashbob::kernels
