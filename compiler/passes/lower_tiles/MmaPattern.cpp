// bob-lower-tiles, tensor cores: bob.mma -> ldmatrix + mma.sync.m16n8k16 (f32 accumulation).
//
// Each warp computes its own rows of the result (and, with column groups, its group's
// columns). Per 16-wide slice kf of the inner dimension: the warp's A fragments come from registers (a converted tile) or from shared memory through
// ldmatrix x4; B fragments for every pair of 8-column fragments come through one ldmatrix x4;
// then one mma.sync per (mi, ni).
//
// ldmatrix x4: lane l gives the address of row (l % 8) of 8x8 matrix j = l / 8, and receives
// register j. With `.trans` each matrix is transposed on the way. The four cases below place the
// matrices so that registers land as mma.sync expects them (a0..a3; b0, b1 of two fragments).
#include "compiler/passes/SharedLayout.h"
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

struct MmaLowering : TilePattern<MmaOp> {
  using TilePattern::TilePattern;

  // Four registers of one ldmatrix x4 at shared tile position (row, col) per lane.
  static SmallVector<Value> ldmatrix(Emitter &e, Value tile, const shared::Layout &layout,
                                     Value row, Value col, bool trans, Type elem) {
    auto fragType = VectorType::get({4, 2}, elem);
    Value m = nvgpu::LdMatrixOp::create(e.b, fragType, tile, e.sharedIndices(layout, row, col),
                                        e.b.getBoolAttr(trans), e.b.getI32IntegerAttr(4));
    // One 32-bit register per matrix (a 2-D vector.bitcast would not lower: toolchain notes).
    SmallVector<Value> regs;
    for (int64_t j = 0; j < 4; ++j) {
      Value pair = vector::ExtractOp::create(e.b, m, j);
      regs.push_back(LLVM::BitcastOp::create(e.b, e.b.getI32Type(), pair));
    }
    return regs;
  }

  LogicalResult lower(MmaOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    RegTileType accType = op.getAcc().getType();
    layout::TileShape s = conv->shape(accType);
    SharedTileType bType = op.getB().getType();
    Type elem = bType.getElementType();
    shared::Layout bLayout = conv->layout(bType);
    const bool transA = op.getTransposeA(), transB = op.getTransposeB();
    const int64_t inner = transB ? bType.getCols() : bType.getRows();
    const int64_t kFrags = inner / 16;

    if (isa<RegTileType>(op.getA().getType()) && conv->warpCols() > 1)
      return rw.notifyMatchFailure(
          op, "register A operand split across column groups: bob-stage-operands moves it to shared");
    ThreadCoords c = e.coords(conv);
    // ldmatrix lane roles: matrix j = lane / 8, row r = lane % 8.
    Value j = arith::DivUIOp::create(e.b, c.lane, e.index(8));
    Value r = arith::RemUIOp::create(e.b, c.lane, e.index(8));
    Value jLow = arith::RemUIOp::create(e.b, j, e.index(2));  // j % 2
    Value jHigh = arith::DivUIOp::create(e.b, j, e.index(2)); // j / 2
    Value eightJLow = e.mul(jLow, e.index(8)), eightJHigh = e.mul(jHigh, e.index(8));
    Value warpRow = e.mul(c.rowWarp, e.index(s.rowsPerWarp()));
    Value groupCol = s.warpCols > 1 ? e.groupColBase(c, s) : Value(); // its B columns

    // A: registers, or shared memory (A = tile, or A = tile^T).
    auto aFragments = [&](int64_t mi, int64_t kf) -> SmallVector<Value> {
      if (isa<RegTileType>(op.getA().getType())) {
        layout::TileShape as{accType.getRows(), inner, conv->warps()};
        SmallVector<Value> regs;
        for (int64_t q = 0; q < 4; ++q)
          regs.push_back(e.extract(a.getA(), as.operandIndex(mi, kf, q)));
        return regs;
      }
      Value rowBase = e.addConst(warpRow, mi * 16), k0 = e.index(kf * 16);
      shared::Layout aLayout = conv->layout(cast<SharedTileType>(op.getA().getType()));
      if (!transA) // tile is [rows][k]: matrix j covers rows +8(j%2), k +8(j/2)
        return ldmatrix(e, a.getA(), aLayout, e.add(e.add(rowBase, r), eightJLow),
                        e.add(k0, eightJHigh), false, elem);
      // tile is [k][rows]: matrix j covers k +8(j/2), rows +8(j%2), transposed
      return ldmatrix(e, a.getA(), aLayout, e.add(e.add(k0, r), eightJHigh),
                      e.add(rowBase, eightJLow), true, elem);
    };
    // B for column fragments 2np and 2np+1: {b0, b1} of each.
    auto bFragments = [&](int64_t np, int64_t kf) -> SmallVector<Value> {
      Value n0 = groupCol ? e.addConst(groupCol, np * 16) : e.index(np * 16);
      Value k0 = e.index(kf * 16);
      if (transB) // tile is [n][k] (B = tile^T): matrix j covers n +8(j/2), k +8(j%2)
        return ldmatrix(e, a.getB(), bLayout, e.add(e.add(n0, r), eightJHigh),
                        e.add(k0, eightJLow), false, elem);
      // tile is [k][n] (B = tile): matrix j covers k +8(j%2), n +8(j/2), transposed
      return ldmatrix(e, a.getB(), bLayout, e.add(e.add(k0, r), eightJLow),
                      e.add(n0, eightJHigh), true, elem);
    };

    auto f32 = rw.getF32Type();
    auto resultType = LLVM::LLVMStructType::getLiteral(rw.getContext(), {f32, f32, f32, f32});
    NVVM::MMATypes ptxType = elem.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    // f16 operands are passed as vector<2xf16>; bf16 ones as i32 (docs/toolchain.md).
    auto operand = [&](Value reg) -> Value {
      if (elem.isBF16())
        return reg;
      return LLVM::BitcastOp::create(e.b, VectorType::get({2}, elem), reg);
    };

    Value acc = a.getAcc();
    for (int64_t kf = 0; kf < kFrags; ++kf) {
      SmallVector<SmallVector<Value>> aRegs, bRegs;
      for (int64_t mi = 0; mi < s.mFrags(); ++mi)
        aRegs.push_back(aFragments(mi, kf));
      for (int64_t np = 0; np < s.nFrags() / 2; ++np)
        bRegs.push_back(bFragments(np, kf));
      for (int64_t mi = 0; mi < s.mFrags(); ++mi)
        for (int64_t ni = 0; ni < s.nFrags(); ++ni) {
          // Registers of the pair ldmatrix: j = 0,1 -> b0,b1 of fragment 2np; j = 2,3 of 2np+1.
          const SmallVector<Value> &pair = bRegs[ni / 2];
          Value b0 = pair[(ni % 2) * 2], b1 = pair[(ni % 2) * 2 + 1];
          SmallVector<Value> accIn;
          for (int64_t q = 0; q < 4; ++q)
            accIn.push_back(e.extract(acc, s.accIndex(mi, ni, q)));
          SmallVector<Value> aIn;
          for (Value v : aRegs[mi])
            aIn.push_back(operand(v));
          Value d = NVVM::MmaOp::create(e.b, resultType, aIn, ValueRange{operand(b0), operand(b1)},
                                        accIn, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
                                        std::nullopt,
                                        std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
                                        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                                       NVVM::MMALayout::col});
          for (int64_t q = 0; q < 4; ++q)
            acc = e.insert(LLVM::ExtractValueOp::create(e.b, d, ArrayRef<int64_t>{q}), acc,
                           s.accIndex(mi, ni, q));
        }
    }
    rw.replaceOp(op, acc);
    return success();
  }
};

} // namespace

void populateMmaPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<MmaLowering>(converter, patterns.getContext());
}

} // namespace flashbob::bob::lowering
