// Shared pieces of bob-lower-tiles: the type mapping, the per-thread coordinates and small
// emission helpers used by the pattern files (memory, math, mma).
#pragma once

#include "compiler/dialect/BobDialect.h"
#include "compiler/passes/FragmentLayout.h"
#include "compiler/passes/SharedLayout.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

namespace flashbob::bob::lowering {

// Register tiles/vectors -> per-thread vectors; shared tiles -> workgroup memrefs in their
// layout for the target (padded, or swizzled on sm_90a: SharedLayout.h); local tiles -> a
// pointer to the thread's stack slot (LocalPatterns.cpp).
class TileTypeConverter : public mlir::TypeConverter {
public:
  TileTypeConverter(mlir::MLIRContext *ctx, int64_t warps, int64_t warpCols, bool hopper);
  int64_t warps() const { return warps_; }
  int64_t warpCols() const { return warpCols_; }
  bool hopper() const { return hopper_; }
  shared::Layout layout(SharedTileType t) const { return shared::layoutFor(t, hopper_); }

  layout::TileShape shape(RegTileType t) const {
    return {t.getRows(), t.getCols(), warps_, warpCols_};
  }
  layout::TileShape shape(RowVecType t) const { return {t.getSize(), 8 * warpCols_, warps_, warpCols_}; }
  layout::TileShape shape(ColVecType t) const {
    return {16 * (warps_ / warpCols_), t.getSize(), warps_, warpCols_};
  }

private:
  int64_t warps_, warpCols_;
  bool hopper_;
};

// Where the calling thread sits: warp index, and g = lane / 4, t = lane % 4 of the mma layout;
// with column groups (FragmentLayout.h) also the warp's row warp and column group (else
// rowWarp = warp and colGroup = null).
struct ThreadCoords {
  mlir::Value tid, warp, lane, g, t;
  mlir::Value rowWarp, colGroup;
};

// Thin helpers over ImplicitLocOpBuilder so the patterns read like the math they implement.
class Emitter {
public:
  Emitter(mlir::Location loc, mlir::OpBuilder &builder) : b(loc, builder) {}

  mlir::ImplicitLocOpBuilder b;

  mlir::Value index(int64_t v);
  mlir::Value i32(int64_t v);
  mlir::Value f32(double v);
  mlir::Value splat(mlir::VectorType type, double v);
  mlir::Value extract(mlir::Value vec, int64_t i);
  mlir::Value insert(mlir::Value scalar, mlir::Value vec, int64_t i);
  // vec[indices[0]], vec[indices[1]], ... as a new vector (one vector.shuffle).
  mlir::Value gather(mlir::Value vec, llvm::ArrayRef<int64_t> indices);
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value addConst(mlir::Value a, int64_t c) { return c == 0 ? a : add(a, index(c)); }
  mlir::Value less(mlir::Value a, mlir::Value c); // unsigned index compare
  // An i64 `value` through an empty asm statement with side effects, its result tied to its
  // operand: no instruction is emitted, but LLVM can neither see the value nor hoist the
  // statement, so what is computed from the result is computed here, next to its use. LLVM's
  // loop-invariant code motion does not weigh register pressure; in kernels near the
  // 255-register limit the wgmma descriptors it hoisted out of the key/query loop spilled.
  // coords() passes the thread index through it in and after loops (an earlier form that passed
  // it through an i32 statement everywhere gave wrong results on the H200, cause not found:
  // commit ec2f83d, docs/performance.md).
  mlir::Value keepHere(mlir::Value value);
  // One statement of inline PTX with side effects (llvm.inline_asm) on typed operands: for
  // instructions upstream has no op or intrinsic for (register-A wgmma, bulk reductions,
  // release reductions). `resultType` null: no results.
  mlir::LLVM::InlineAsmOp inlinePtx(mlir::Type resultType, mlir::ValueRange operands,
                                    llvm::StringRef ptx, llvm::StringRef constraints);
  // With column groups in `conv`, also the row warp and column group of the calling warp. In and
  // after a loop the thread index is kept here (keepHere), so that nothing derived from it is
  // hoisted out of the loop or shared across it.
  ThreadCoords coords(const TileTypeConverter *conv = nullptr);
  // `if (cond) { then(); }` as an scf.if; the builder is back after it afterwards.
  void ifThen(mlir::Value cond, llvm::function_ref<void()> then);
  // `cond ? then() : otherwise()` as an scf.if yielding `type`; each branch's ops are built in
  // its own block.
  mlir::Value ifElse(mlir::Type type, mlir::Value cond, llvm::function_ref<mlir::Value()> then,
                     llvm::function_ref<mlir::Value()> otherwise);
  // First row of the tile owned by the calling thread's warp, plus g: the row of element e=0.
  mlir::Value threadRowBase(const ThreadCoords &c, const layout::TileShape &s);
  // Column of element (ni = 0, e = 0): the column group's first column, plus 2t.
  mlir::Value threadColBase(const ThreadCoords &c, const layout::TileShape &s);
  // First column of the calling warp's column group (0 without groups).
  mlir::Value groupColBase(const ThreadCoords &c, const layout::TileShape &s);
  // Memref indices of element (row, col) of a shared tile in layout `l`. Any 16-byte aligned run
  // of 16 bytes in a row stays contiguous, so ldmatrix rows and cp.async chunks use it as is.
  llvm::SmallVector<mlir::Value> sharedIndices(const shared::Layout &l, mlir::Value row,
                                               mlir::Value col);
};

// The base of every bob-lower-tiles pattern: the conversion hands `lower` the op, its converted
// operands, an Emitter at the op and the rewriter, and converter() is the tile type converter,
// so that each pattern is only its lowering.
template <typename Op>
class TilePattern : public mlir::OpConversionPattern<Op> {
public:
  using OpAdaptor = typename Op::Adaptor;
  TilePattern(const mlir::TypeConverter &converter, mlir::MLIRContext *ctx,
              mlir::PatternBenefit benefit = 1)
      : mlir::OpConversionPattern<Op>(converter, ctx, benefit) {}

  mlir::LogicalResult matchAndRewrite(Op op, OpAdaptor a,
                                      mlir::ConversionPatternRewriter &rw) const final {
    Emitter e(op.getLoc(), rw);
    return lower(op, a, e, rw);
  }

protected:
  virtual mlir::LogicalResult lower(Op op, OpAdaptor a, Emitter &e,
                                    mlir::ConversionPatternRewriter &rw) const = 0;
  const TileTypeConverter *converter() const {
    return static_cast<const TileTypeConverter *>(this->getTypeConverter());
  }
};

// The mbarriers of a kernel's TMA loads (TmaPatterns.cpp), made at its entry before the
// conversion by prepareTmaBarriers; count == 0 when the kernel has no TMA loads. Loads issued
// together (a batch) complete on one barrier: that of the batch's first destination tile.
struct TmaBarriers {
  struct Batch {
    mlir::Value leaderTile; // the first load's destination: decides the barrier
    int64_t bytes = 0;      // of all the batch's tiles
    mlir::Operation *first = nullptr, *last = nullptr;
  };
  mlir::Value group;           // !nvgpu.mbarrier.group of `count` barriers
  mlir::Value phases, pending; // memref<i32> per thread: bit b = parity to wait for on barrier
                               // b next / an async load on barrier b is in flight
  llvm::DenseMap<mlir::Value, int64_t> index;         // bob.alloc_shared result -> its barrier
  llvm::DenseMap<mlir::Operation *, int64_t> batchOf; // TMA bob.load_shared -> its batch
  llvm::SmallVector<Batch> batches;
  int64_t count = 0;
  uint32_t asyncTargets = 0; // bit b: some async load completes on barrier b
  bool cpAsync = false;      // the kernel also has cp.async loads
  // A producer warpgroup issues the async loads: barriers count..2*count-1 are the "empty"
  // partners of 0..count-1 (TmaPatterns.cpp).
  bool producer = false;
};
mlir::LogicalResult prepareTmaBarriers(mlir::gpu::GPUFuncOp func, TmaBarriers &tma);
// The nvgpu descriptor of tensor-map argument `map` whose box is boxRows x one column block of
// `elem` tiles in `layout` (TmaPatterns.cpp).
mlir::Value tmaDescriptor(Emitter &e, mlir::Value map, const shared::Layout &layout,
                          int64_t boxRows, mlir::Type elem);
// A 1 x rows x block columns subview of a swizzled tile as the 1 x 1 x rows x block columns box
// a TMA copy moves.
mlir::Value asTmaBox(Emitter &e, mlir::Value block);
// Wait for the load in flight on barrier `bar` (an index) to complete.
void waitTmaBarrier(Emitter &e, const TmaBarriers &tma, mlir::Value bar);
// Wait for every async TMA load in flight (bob.wait_shared).
void waitPendingTmaLoads(Emitter &e, const TmaBarriers &tma);

// Runs of adjacent bob.store_shared ops (bob-stage-operands issues a block's staged operands
// together) share their barriers: one before the first store, one after the last. Found before
// the conversion, which replaces the ops.
struct StoreRuns {
  llvm::DenseSet<mlir::Operation *> continuing; // the op before is a store_shared
  llvm::DenseSet<mlir::Operation *> continued;  // the op after is a store_shared
};
StoreRuns findStoreRuns(mlir::gpu::GPUFuncOp func);

void populateMemoryPatterns(TileTypeConverter &converter, const TmaBarriers &tma,
                            const StoreRuns &runs, mlir::RewritePatternSet &patterns);
void populateTmaPatterns(TileTypeConverter &converter, const TmaBarriers &tma,
                         mlir::RewritePatternSet &patterns);
void populateMathPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);
// bob.warp_specialize -> the role branch (WarpSpecialization.cpp).
void populateWarpSpecializationPatterns(TileTypeConverter &converter,
                                        mlir::RewritePatternSet &patterns);
// After the conversion: the barriers of the consumer branch synchronise the consumers only.
void useConsumerBarriers(mlir::gpu::GPUFuncOp func);
void populateMmaPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);
// Reserves in local memory (LocalPatterns.cpp).
void populateLocalPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);
// Bulk reductions into global memory and the semaphores that order them (BulkPatterns.cpp).
void populateBulkPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);

// wgmma products in flight (WgmmaPattern.cpp): every product is its own commit group and is
// waited for only where it must be, found before the conversion and marked there with
// wgmma.wait_group N: before the first op that reads its result (N: the products issued after
// it, left in flight, so that e.g. the softmax of S runs under the product dP), and with N = 0
// before any op that writes memory, has regions or ends the block (a staging store may
// overwrite a tile that a product in flight reads). Tile arithmetic and reads overlap them.
// A wait that completes products reading A from registers is a bob.product_wait instead,
// which their results (and A operands) pass through.
void placeProductWaits(mlir::gpu::GPUFuncOp func);
void populateWgmmaPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);
// Products with A from registers (#bob.spec register_a) and their waits (WgmmaRegisterA.cpp).
void populateWgmmaRegisterAPatterns(TileTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns);

// Name of the external shared-memory symbol every shared tile is carved from. It is declared
// `[0 x i8]` external so PTX says `.extern .shared .align 16 .b8 flashbob_smem[];` (a zero-size
// internal global would print as a 1-byte array and be overrun).
inline constexpr llvm::StringLiteral kSharedMemorySymbol = "flashbob_smem";
// Static f32 buffer where column groups exchange partial row reductions (SharedLayout.h,
// rowExchangeBytes); declared by the driver when some kernel needs it.
inline constexpr llvm::StringLiteral kRowExchangeSymbol = "flashbob_row_exchange";

} // namespace flashbob::bob::lowering
