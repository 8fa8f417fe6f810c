// bob-lower-tiles, Hopper tensor cores: bob.mma with both operands in shared memory and whole
// warpgroups of accumulator rows (WgmmaRules.h) -> wgmma.mma_async m64nNk16, one per 16-wide
// slice of the inner dimension, issued by every warpgroup for its own 64 rows (and its column
// group's columns), then committed as its own group, which placeProductWaits waits for where
// its result is first read. Otherwise MmaPattern's mma.sync applies (this pattern has the
// higher benefit).
//
// The operands' descriptors: WgmmaDescriptors.h. Products whose A operand stays in registers
// (#bob.spec register_a): WgmmaRegisterA.cpp.
#include "compiler/passes/WgmmaRules.h"
#include "compiler/passes/lower_tiles/TileLowering.h"
#include "compiler/passes/lower_tiles/WgmmaDescriptors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

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
  auto registerA = [&](Operation *op) {
    auto mma = dyn_cast<MmaOp>(op);
    return mma && wgmma::registerAFits(mma, spec);
  };
  auto isWgmma = [&](Operation *op) {
    auto mma = dyn_cast<MmaOp>(op);
    return mma && (wgmma::applies(mma, spec) || wgmma::registerAFits(mma, spec));
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
      auto done = llvm::ArrayRef(inFlight).drop_back(left);
      // Register-A products complete at a wait that passes their results and A operands
      // through (bob.product_wait); their readers read its results. The others keep the
      // plain wait, as with every product of a kernel without register_a.
      llvm::SmallVector<Value> tied;
      for (Operation *product : done)
        if (registerA(product)) {
          tied.push_back(product->getResult(0));
          Value a = cast<MmaOp>(product).getA();
          if (!llvm::is_contained(tied, a))
            tied.push_back(a);
        }
      if (tied.empty()) {
        NVVM::WgmmaWaitGroupSyncOp::create(b, op->getLoc(), b.getI64IntegerAttr(left));
      } else {
        auto wait = ProductWaitOp::create(b, op->getLoc(), left, tied);
        // Only the products' results are read from the wait: nothing before it reads them
        // (it stands before their first reader), and the A operands keep their other uses.
        for (Operation *product : done)
          if (registerA(product))
            product->getResult(0).replaceAllUsesExcept(
                wait.getResult(llvm::find(tied, product->getResult(0)) - tied.begin()), wait);
      }
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
