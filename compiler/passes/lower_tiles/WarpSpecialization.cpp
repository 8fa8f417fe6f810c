// bob-lower-tiles, warp roles (sm_90a, `producer` specs): bob.warp_specialize becomes
//   if (thread >= 32 * warps) {          // the producer warpgroup
//     setmaxnreg.dec 24                  // (when registers are short: they go to the consumers)
//     if (thread == 32 * warps) { producer region }
//   } else {
//     setmaxnreg.inc 240                 // (8 consumer warps; 232 for 4 with two blocks per SM)
//     consumer region
//   }
// and, once the whole kernel is converted, every barrier of the consumer branch becomes the
// named barrier 1 for the 32 * warps consumer threads: bar.sync 0 would wait for the producer,
// which never arrives. (Row warpgroups' staging barriers are already their own warpgroup's,
// MemoryPatterns.cpp, and stay so.)
//
// Registers (WarpRoles.h, numbers put on the function by bob-lower-kernel): ptxas compiles the
// kernel for 32 * (warps + 4) threads (65536 / 384 = 168 per thread with 8 warps); setmaxnreg
// moves them between warpgroups at run time: 128 * 24 + 256 * 240 = 64512 = 384 * 168. A 4-warp
// kernel with two blocks per SM: 128 at entry, 24 and 232.
#include "compiler/passes/WarpRoles.h"
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

struct WarpSpecializeLowering : TilePattern<WarpSpecializeOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(WarpSpecializeOp op, OpAdaptor, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    const int64_t consumers = 32 * conv->warps();
    auto func = op->getParentOfType<gpu::GPUFuncOp>();
    auto registers = [&](StringRef name) {
      auto attr = func ? func->getAttrOfType<IntegerAttr>(name) : IntegerAttr();
      return attr ? static_cast<int32_t>(attr.getInt()) : 0;
    };
    const int32_t producerRegisters = registers(kProducerRegistersAttrName);
    const int32_t consumerRegisters = registers(kConsumerRegistersAttrName);
    const bool moveRegisters = producerRegisters > 0 && consumerRegisters > 0;
    Value tid = gpu::ThreadIdOp::create(e.b, gpu::Dimension::x);
    Value isProducer =
        arith::CmpIOp::create(e.b, arith::CmpIPredicate::uge, tid, e.index(consumers));
    auto roles = scf::IfOp::create(e.b, isProducer, /*withElseRegion=*/true);
    roles->setAttr(kRolesAttrName, rw.getUnitAttr());

    e.b.setInsertionPoint(roles.thenBlock()->getTerminator());
    if (moveRegisters)
      NVVM::SetMaxRegisterOp::create(e.b, producerRegisters, NVVM::SetMaxRegisterAction::decrease);
    Value issuer = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, tid, e.index(consumers));
    auto single = scf::IfOp::create(e.b, issuer, /*withElseRegion=*/false);
    rw.inlineBlockBefore(&op.getProducer().front(), single.thenBlock()->getTerminator());

    e.b.setInsertionPoint(roles.elseBlock()->getTerminator());
    if (moveRegisters)
      NVVM::SetMaxRegisterOp::create(e.b, consumerRegisters, NVVM::SetMaxRegisterAction::increase);
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
