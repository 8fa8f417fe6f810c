// bob-lower-tiles, Hopper tensor cores with A from registers (#bob.spec register_a): bob.mma
// whose A operand is a bf16/f16 register tile in the layout wgmma takes (wgmma::registerAFits)
// -> one `wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {d}, {a0, a1, a2, a3}, descB, p, 1, 1,
// tnspB;` per k16 slice, each warpgroup for its own 64 rows, after a wgmma.fence and committed
// as its own group; and bob.product_wait -> `wgmma.wait_group.sync.aligned N` with the values
// it passes through as read-write operands. FlashAttention-3 feeds P to P V this way; Triton's
// WGMMA.cpp does the same.
//
// Upstream has no op for this form: nvvm.wgmma.mma_async (MLIR 22) takes A only as a
// shared-memory descriptor and LLVM 22 has no intrinsic for it. So each slice is one
// instruction of inline PTX (llvm.inline_asm) on typed operands, as convert-nvvm-to-llvm makes
// of nvvm.wgmma.mma_async itself: accumulators "=f" tied to "0".."N/2-1" (read-write), the
// four A registers "r", B's descriptor "l" (WgmmaDescriptors.h). scale-d is a predicate set
// inside the statement: 0 for a product into zeros' first slice (its registers are not read).
//
// How an earlier product's accumulators become this product's A operand. An m64nN f32 product
// (wgmma or mma.sync, FragmentLayout.h) leaves thread (warp w, lane 4g + t) of a tile with one
// 16-row fragment per warp holding N/2 floats c[0 .. N/2): c[4j + e] is element
//   (row 16w + g + 8(e / 2), column 8j + 2t + e % 2),      j = 0 .. N/8 - 1, e = 0 .. 3,
// which is also wgmma's D fragment for m64nN (warp w % 4 of warpgroup w / 4 holds rows
// 16(w % 4) .. + 15 of the warpgroup's 64). bob.convert rounds it and packs consecutive pairs:
// register i = {c[2i], c[2i + 1]} (low half first). wgmma's A fragment for m64k16 is, per warp,
// the m16k16 one of mma.sync: a0 = (row g, k 2t..2t+1), a1 = (row g + 8, k 2t..), a2 = (row g,
// k 2t + 8..), a3 = (row g + 8, k 2t + 8..). For the k16 slice kf (columns 16kf .. 16kf + 15 of
// the converted tile, i.e. j = 2kf and 2kf + 1) these are exactly the pairs c[8kf + 0, 1],
// c[8kf + 2, 3], c[8kf + 4, 5], c[8kf + 6, 7]: registers 4kf .. 4kf + 3 of the converted tile,
// in order (FragmentLayout.h, operandIndex(0, kf, r)). No data moves: slice kf of A is the
// accumulator registers of the earlier product's columns 16kf .. 16kf + 15, rounded and paired.
// This needs one fragment row per warp over whole warpgroups and all of the tile's columns in
// every warp (no column groups): wgmma::registerAFits.
//
// The tensor cores read the A registers and write the accumulators asynchronously, until
// wgmma.wait_group. LLVM knows nothing of that: a reader of the accumulators after an untied
// wait may be scheduled above it, and an A register may be reused once its last reader, the
// wgmma statement, has issued. So placeProductWaits (WgmmaPattern.cpp) waits for these
// products with bob.product_wait, whose statement takes and returns every accumulator and A
// register: the accumulators' readers read its outputs, and the A registers stay live until it.
#include "compiler/passes/WgmmaRules.h"
#include "compiler/passes/lower_tiles/TileLowering.h"
#include "compiler/passes/lower_tiles/WgmmaDescriptors.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

// "=f,...,=f" for the outputs, then "0,1,..." tying each input to its output.
std::string tiedConstraints(ArrayRef<char> kinds) {
  std::string out;
  for (char kind : kinds)
    out += (out.empty() ? "=" : ",=") + std::string(1, kind);
  for (size_t i = 0; i < kinds.size(); ++i)
    out += "," + std::to_string(i);
  return out;
}

struct WgmmaRegisterALowering : TilePattern<MmaOp> {
  WgmmaRegisterALowering(TypeConverter &conv, MLIRContext *ctx)
      : TilePattern(conv, ctx, /*benefit=*/2) {}

  LogicalResult lower(MmaOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    if (!wgmma::registerAFits(op, getEnclosingSpec(op)))
      return rw.notifyMatchFailure(op, "not a register-A wgmma product (see WgmmaRules.h)");
    SharedTileType bType = op.getB().getType();
    RegTileType accType = op.getAcc().getType();
    shared::Layout lb = conv->layout(bType);
    const bool bKMajor = op.getTransposeB();
    const int64_t n = accType.getCols(), half = n / 2; // this thread's accumulators
    const int64_t inner = bKMajor ? bType.getCols() : bType.getRows();
    // A's registers: one 16-row fragment per warp, all `inner` columns (registerAFits).
    layout::TileShape as{accType.getRows(), inner, conv->warps()};
    Descriptor db = describe(e, a.getB(), lb, bKMajor);

    auto f32 = rw.getF32Type();
    auto structType =
        LLVM::LLVMStructType::getLiteral(rw.getContext(), SmallVector<Type>(half, f32));
    const bool fromZero = startsFromZero(op);
    SmallVector<Value> acc;
    Value undef = fromZero ? LLVM::UndefOp::create(e.b, f32).getResult() : Value();
    for (int64_t i = 0; i < half; ++i)
      acc.push_back(fromZero ? undef : e.extract(a.getAcc(), i));

    // $0 .. $(half-1): accumulators out; $half .. $(n-1): the same in; then a0..a3, descB.
    std::string dList;
    for (int64_t i = 0; i < half; ++i)
      dList += (i ? ", $" : "$") + std::to_string(i);
    const std::string type = bType.getElementType().isBF16() ? "bf16" : "f16";
    std::string constraints = tiedConstraints(SmallVector<char>(half, 'f')) + ",r,r,r,r,l";
    auto slicePtx = [&](bool scaleD) {
      return llvm::formatv("{{\n.reg .pred p;\nsetp.ne.b32 p, {0}, 0;\n"
                           "wgmma.mma_async.sync.aligned.m64n{1}k16.f32.{2}.{2} {{{3}}, "
                           "{{${4}, ${5}, ${6}, ${7}}, ${8}, p, 1, 1, {9};\n}\n",
                           scaleD ? 1 : 0, n, type, dList, n, n + 1, n + 2, n + 3, n + 4,
                           bKMajor ? 0 : 1)
          .str();
    };

    NVVM::WgmmaFenceAlignedOp::create(e.b);
    for (int64_t k0 = 0, kf = 0; k0 < inner; k0 += 16, ++kf) {
      SmallVector<Value> operands(acc);
      for (int64_t r = 0; r < 4; ++r)
        operands.push_back(e.extract(a.getA(), as.operandIndex(0, kf, r)));
      operands.push_back(db.at(e, sliceOffset(e, lb, bKMajor, k0, e.index(0))));
      Value d = e.inlinePtx(structType, operands, slicePtx(!(fromZero && k0 == 0)), constraints)
                    .getRes();
      for (int64_t i = 0; i < half; ++i)
        acc[i] = LLVM::ExtractValueOp::create(e.b, d, ArrayRef<int64_t>{i});
    }
    // Its own group, waited for by the bob.product_wait that placeProductWaits put before
    // the first reader of the result.
    NVVM::WgmmaGroupSyncAlignedOp::create(e.b);

    Value result = a.getAcc();
    for (int64_t i = 0; i < half; ++i)
      result = e.insert(acc[i], result, i);
    rw.replaceOp(op, result);
    return success();
  }
};

// wgmma.wait_group N with every register of the tiles as a read-write operand ("=f"/"=r" tied
// to "0", "1", ...): f32 accumulators and the i32 pairs of converted tiles.
struct ProductWaitLowering : TilePattern<ProductWaitOp> {
  using TilePattern::TilePattern;

  LogicalResult lower(ProductWaitOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    SmallVector<Value> scalars;
    SmallVector<Type> types;
    SmallVector<char> kinds;
    for (Value tile : a.getTiles()) {
      auto vec = cast<VectorType>(tile.getType());
      for (int64_t i = 0; i < vec.getNumElements(); ++i) {
        scalars.push_back(e.extract(tile, i));
        types.push_back(vec.getElementType());
        kinds.push_back(vec.getElementType().isF32() ? 'f' : 'r');
      }
    }
    auto structType = LLVM::LLVMStructType::getLiteral(rw.getContext(), types);
    const std::string ptx =
        llvm::formatv("wgmma.wait_group.sync.aligned {0};", op.getPending()).str();
    Value out = e.inlinePtx(structType, scalars, ptx, tiedConstraints(kinds)).getRes();
    SmallVector<Value> results;
    int64_t at = 0;
    for (Value tile : a.getTiles()) {
      Value vec = tile;
      for (int64_t i = 0; i < cast<VectorType>(tile.getType()).getNumElements(); ++i, ++at)
        vec = e.insert(LLVM::ExtractValueOp::create(e.b, out, ArrayRef<int64_t>{at}), vec, i);
      results.push_back(vec);
    }
    rw.replaceOp(op, results);
    return success();
  }
};

} // namespace

void populateWgmmaRegisterAPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WgmmaRegisterALowering, ProductWaitLowering>(converter, patterns.getContext());
}

} // namespace flashbob::bob::lowering
