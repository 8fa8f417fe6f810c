// bob-lower-tiles, warp roles (sm_90a, `producer` specs): bob.warp_specialize becomes
//   if (thread >= 32 * warps) {          // the producer warpgroup
//     setmaxnreg.dec 24                  // (8 consumer warps: registers go to the consumers)
//     if (thread == 32 * warps) { producer region }
//   } else {
//     setmaxnreg.inc 240
//     consumer region
//   }
// and, once the whole kernel is converted, every barrier of the consumer branch becomes the
// named barrier 1 for the 32 * warps consumer threads: bar.sync 0 would wait for the producer,
// which never arrives.
//
// Registers: ptxas compiles the kernel for 32 * (warps + 4) threads (65536 / 384 = 168 per
// thread with 8 warps); setmaxnreg moves them between warpgroups at run time: 128 * 24 +
// 256 * 240 = 64512 = 384 * 168. With 4 consumer warps every thread already gets 255.
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

// Marks the role branch so that useConsumerBarriers finds its consumer side.
constexpr llvm::StringLiteral kRolesAttrName = "bob.warp_roles";

constexpr int32_t kProducerRegisters = 24;
constexpr int32_t kConsumerRegisters = 240;
// Named barrier of the consumers (0 is bar.sync's, the whole block's).
constexpr int32_t kConsumerBarrier = 1;

struct WarpSpecializeLowering : OpConversionPattern<WarpSpecializeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(WarpSpecializeOp op, OpAdaptor, ConversionPatternRewriter &rw) const override {
    auto conv = static_cast<const TileTypeConverter *>(getTypeConverter());
    const int64_t consumers = 32 * conv->warps();
    const bool moveRegisters = conv->warps() > 4;
    Emitter e(op.getLoc(), rw);
    Value tid = gpu::ThreadIdOp::create(e.b, gpu::Dimension::x);
    Value isProducer =
        arith::CmpIOp::create(e.b, arith::CmpIPredicate::uge, tid, e.index(consumers));
    auto roles = scf::IfOp::create(e.b, isProducer, /*withElseRegion=*/true);
    roles->setAttr(kRolesAttrName, rw.getUnitAttr());

    e.b.setInsertionPoint(roles.thenBlock()->getTerminator());
    if (moveRegisters)
      NVVM::SetMaxRegisterOp::create(e.b, kProducerRegisters, NVVM::SetMaxRegisterAction::decrease);
    Value issuer = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, tid, e.index(consumers));
    auto single = scf::IfOp::create(e.b, issuer, /*withElseRegion=*/false);
    rw.inlineBlockBefore(&op.getProducer().front(), single.thenBlock()->getTerminator());

    e.b.setInsertionPoint(roles.elseBlock()->getTerminator());
    if (moveRegisters)
      NVVM::SetMaxRegisterOp::create(e.b, kConsumerRegisters, NVVM::SetMaxRegisterAction::increase);
    rw.inlineBlockBefore(&op.getConsumer().front(), roles.elseBlock()->getTerminator());
    rw.eraseOp(op);
    return success();
  }
};

} // namespace

void populateWarpSpecializationPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WarpSpecializeLowering>(converter, patterns.getContext());
}

void useConsumerBarriers(gpu::GPUFuncOp func) {
  auto spec = func->getAttrOfType<SpecAttr>(kSpecAttrName);
  func.walk([&](scf::IfOp roles) {
    if (!roles->hasAttr(kRolesAttrName))
      return;
    roles->removeAttr(kRolesAttrName);
    roles.getElseRegion().walk([&](gpu::BarrierOp barrier) {
      OpBuilder b(barrier);
      Location loc = barrier.getLoc();
      Value id = arith::ConstantIntOp::create(b, loc, kConsumerBarrier, 32);
      Value threads = arith::ConstantIntOp::create(b, loc, 32 * spec.getWarps(), 32);
      NVVM::BarrierOp::create(b, loc, TypeRange{}, id, threads, NVVM::BarrierReductionAttr(),
                              Value());
      barrier.erase();
    });
  });
}

} // namespace flashbob::bob::lowering
