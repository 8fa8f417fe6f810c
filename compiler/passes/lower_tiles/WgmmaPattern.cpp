// bob-lower-tiles, Hopper tensor cores: bob.mma with both operands in shared memory and whole
// warpgroups of accumulator rows (WgmmaRules.h) -> wgmma.mma_async m64nNk16, one per 16-wide
// slice of the inner dimension, issued by every warpgroup for its own 64 rows (and its column
// group's columns), then committed as its own group, which placeProductWaits waits for where
// its result is first read. Otherwise MmaPattern's mma.sync applies (this pattern has the
// higher benefit).
//
// Operands are read through 64-bit matrix descriptors (PTX ISA, "matrix descriptor"): start
// address, leading and stride byte offsets (LBO, SBO), swizzle mode. With the swizzled layout of
// SharedLayout.h (column blocks W bytes wide, 8-row atoms of 8W bytes):
//   K-major operand (the inner dimension runs along a tile row: A = tile, B = tile^T):
//     start = block of k0 + 2*(k0 within the block) + first row * W;  SBO = 8W (next 8 rows);
//     LBO unused (a k16 slice never leaves its block).
//   MN-major operand (the inner dimension runs down the tile: A = tile^T, B = tile):
//     start = k0 * W + block of the first M/N column;  SBO = 8W (next 8 rows of k);
//     LBO = bytes of one column block (next W/2 columns of M/N).
#include "compiler/passes/WgmmaRules.h"
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

int64_t swizzleMode(int64_t swizzleBytes) {
  switch (swizzleBytes) {
  case 128: return 1;
  case 64: return 2;
  default: return 3; // 32
  }
}

// The constant fields of a descriptor, and its start address (bytes) added at run time.
struct Descriptor {
  Value base; // i64: descriptor with start address 0 ... plus the tile's address
  Value at(Emitter &e, Value byteOffset) const {
    // The start address field is address >> 4; offsets stay inside the 256 KiB window.
    Value units = arith::ShRUIOp::create(e.b, byteOffset, constant(e, 4));
    return arith::AddIOp::create(e.b, base, units);
  }
  static Value constant(Emitter &e, int64_t v) {
    return arith::ConstantIntOp::create(e.b, v, 64);
  }
};

Descriptor describe(Emitter &e, Value tile, const shared::Layout &l, bool kMajor) {
  const int64_t lbo = kMajor ? 16 : l.blockBytes(), sbo = 8 * l.swizzleBytes;
  const uint64_t fields = (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
                          (uint64_t(swizzleMode(l.swizzleBytes)) << 62);
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(e.b, tile);
  // The tile's address is a constant (or a select between double buffers): re-formed here,
  // a product's descriptors are not hoisted out of the loop (8 slices x 2 registers per
  // operand at d = 128; bob_q d = 128 spilled 332 bytes with them, 80 without).
  address = e.keepHere(arith::IndexCastOp::create(e.b, e.b.getI64Type(), address));
  Value start = arith::ShRUIOp::create(e.b, address, Descriptor::constant(e, 4));
  start = arith::AndIOp::create(e.b, start, Descriptor::constant(e, 0x3FFF));
  Value fieldsValue = arith::ConstantIntOp::create(e.b, static_cast<int64_t>(fields), 64);
  return {arith::OrIOp::create(e.b, start, fieldsValue)};
}

// Byte offset of the k16 slice starting at k0 (and of M/N position mn0, a multiple of 64).
Value sliceOffset(Emitter &e, const shared::Layout &l, bool kMajor, int64_t k0, Value mn0) {
  Value i64mn0 = arith::IndexCastOp::create(e.b, e.b.getI64Type(), mn0);
  auto c = [&](int64_t v) { return Descriptor::constant(e, v); };
  if (kMajor) // rows are M/N: k0 picks the block and the bytes inside it; mn0 the row
    return arith::AddIOp::create(
        e.b, c((k0 / l.blockCols()) * l.blockBytes() + (k0 % l.blockCols()) * l.elemBytes),
        arith::MulIOp::create(e.b, i64mn0, c(l.swizzleBytes)));
  // rows are k: k0 picks the row; mn0 the column block
  return arith::AddIOp::create(
      e.b, c(k0 * l.swizzleBytes),
      arith::MulIOp::create(e.b, arith::DivUIOp::create(e.b, i64mn0, c(l.blockCols())),
                            c(l.blockBytes())));
}

// Whether `op` accumulates into a splat of zeros.
bool startsFromZero(MmaOp op) {
  auto splat = op.getAcc().getDefiningOp<SplatOp>();
  return splat && splat.getValue().isZero();
}

struct WgmmaLowering : TilePattern<MmaOp> {
  WgmmaLowering(TypeConverter &conv, MLIRContext *ctx) : TilePattern(conv, ctx, /*benefit=*/2) {}

  LogicalResult lower(MmaOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    if (!wgmma::applies(op, getEnclosingSpec(op)))
      return rw.notifyMatchFailure(op, "not a wgmma product (see WgmmaRules.h)");
    auto aType = cast<SharedTileType>(op.getA().getType());
    SharedTileType bType = op.getB().getType();
    RegTileType accType = op.getAcc().getType();
    shared::Layout la = conv->layout(aType), lb = conv->layout(bType);
    const bool aKMajor = !op.getTransposeA(), bKMajor = op.getTransposeB();
    layout::TileShape s = conv->shape(accType);
    const int64_t n = s.colsPerWarp(); // this column group's columns
    const int64_t inner = bKMajor ? bType.getCols() : bType.getRows();
    MLIRContext *ctx = rw.getContext();
    ThreadCoords c = e.coords(conv);
    Value firstRow = e.mul(arith::DivUIOp::create(e.b, c.rowWarp, e.index(4)), e.index(64));
    Descriptor da = describe(e, a.getA(), la, aKMajor), db = describe(e, a.getB(), lb, bKMajor);

    // The accumulator: this thread's N/2 values, in wgmma's register order (= accIndex order).
    // A product into zeros (a fresh score tile) does not move zeros into its registers: its
    // first slice ignores them (scale-d = 0). Zeroing them after wgmma.fence, with earlier
    // products in flight, made ptxas inject warpgroup.arrive and warpgroup.wait (C7517/C7519),
    // which serialised the products meant to overlap.
    auto f32 = rw.getF32Type();
    auto structType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(n / 2, f32));
    const bool fromZero = startsFromZero(op);
    Value acc = LLVM::UndefOp::create(e.b, structType);
    if (!fromZero)
      for (int64_t i = 0; i < n / 2; ++i)
        acc = LLVM::InsertValueOp::create(e.b, acc, e.extract(a.getAcc(), i), ArrayRef<int64_t>{i});

    auto type = bType.getElementType().isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
    // tnspA = (layoutA == col), tnspB = (layoutB == row): MN-major operands.
    auto layoutA = aKMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col;
    auto layoutB = bKMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row;
    NVVM::WgmmaFenceAlignedOp::create(e.b);
    for (int64_t k0 = 0; k0 < inner; k0 += 16) {
      Value descA = da.at(e, sliceOffset(e, la, aKMajor, k0, firstRow));
      Value descB = db.at(e, sliceOffset(e, lb, bKMajor, k0, e.groupColBase(c, s)));
      acc = NVVM::WgmmaMmaAsyncOp::create(
          e.b, structType, acc, descA, descB, NVVM::MMAShapeAttr::get(ctx, 64, n, 16), type, type,
          NVVM::WGMMATypes::f32,
          fromZero && k0 == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
          NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, layoutA, layoutB,
          NVVM::MMAIntOverflowAttr());
    }
    // Its own group, waited for by the wgmma.wait_group that placeProductWaits put before
    // the first reader of the result.
    NVVM::WgmmaGroupSyncAlignedOp::create(e.b);

    Value result = a.getAcc();
    for (int64_t i = 0; i < n / 2; ++i)
      result = e.insert(LLVM::ExtractValueOp::create(e.b, acc, ArrayRef<int64_t>{i}), result, i);
    rw.replaceOp(op, result);
    return success();
  }
};

} // namespace

void placeProductWaits(gpu::GPUFuncOp func) {
  SpecAttr spec = func->getAttrOfType<SpecAttr>(kSpecAttrName);
  auto isWgmma = [&](Operation *op) {
    auto mma = dyn_cast<MmaOp>(op);
    return mma && wgmma::applies(mma, spec);
  };
  // Ops that may run while products are in flight: the tile arithmetic (no memory effects, no
  // regions) and reads, e.g. of the swept rows' L and D. A write could be to a tile that a
  // product in flight reads (a staging store), so anything else waits for every product.
  auto mayOverlap = [](Operation *op) {
    if (op->getNumRegions() != 0 || op->hasTrait<OpTrait::IsTerminator>())
      return false;
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    return isMemoryEffectFree(op) || (effects && effects.onlyHasEffect<MemoryEffects::Read>());
  };
  llvm::SmallVector<Block *> blocks;
  func.walk([&](Block *block) { blocks.push_back(block); });
  for (Block *block : blocks) {
    llvm::SmallVector<Operation *> inFlight; // committed groups, oldest first
    auto waitBefore = [&](Operation *op, size_t left) {
      OpBuilder b(op);
      NVVM::WgmmaWaitGroupSyncOp::create(b, op->getLoc(), b.getI64IntegerAttr(left));
      inFlight.erase(inFlight.begin(), inFlight.end() - left);
    };
    for (Operation &op : llvm::make_early_inc_range(*block)) {
      if (inFlight.empty()) {
        if (isWgmma(&op))
          inFlight.push_back(&op);
        continue;
      }
      if (!isWgmma(&op) && !mayOverlap(&op)) {
        waitBefore(&op, 0);
        continue;
      }
      // The newest product in flight that `op` reads completes first, with all older ones
      // (wgmma.wait_group N waits until at most N groups are pending).
      auto newestRead = llvm::find_if(llvm::reverse(inFlight), [&](Operation *product) {
        return llvm::is_contained(op.getOperands(), product->getResult(0));
      });
      if (newestRead != llvm::reverse(inFlight).end())
        waitBefore(&op, std::distance(llvm::reverse(inFlight).begin(), newestRead));
      if (isWgmma(&op))
        inFlight.push_back(&op);
    }
  }
}

void populateWgmmaPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WgmmaLowering>(converter, patterns.getContext());
}

} // namespace flashbob::bob::lowering
