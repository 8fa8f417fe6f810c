// bob-lower-tiles, arithmetic side: element-wise math on per-thread vectors, broadcasting of
// row/column vectors (one vector.shuffle each), masks, quad-shuffle row reductions (combined
// across column groups through shared memory).
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

struct SplatLowering : TilePattern<SplatOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(SplatOp op, OpAdaptor, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto type = cast<VectorType>(converter()->convertType(op.getType()));
    rw.replaceOp(op, e.splat(type, op.getValue().convertToDouble()));
    return success();
  }
};

struct ConvertLowering : TilePattern<ConvertOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(ConvertOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    // The accumulator order is already the A-operand order (FragmentLayout.h): round, then view
    // each pair of 16-bit values as one 32-bit register.
    auto src = cast<VectorType>(a.getSource().getType());
    auto dst = cast<VectorType>(converter()->convertType(op.getType()));
    Value narrow = arith::TruncFOp::create(
        e.b, VectorType::get(src.getShape(), op.getType().getElementType()), a.getSource());
    rw.replaceOp(op, vector::BitCastOp::create(e.b, dst, narrow));
    return success();
  }
};

// rhs of a binary op, as a vector shaped like lhs.
Value broadcastOperand(Emitter &e, const TileTypeConverter &conv, Type lhsType, Type rhsType,
                       Value lhs, Value rhs) {
  auto lhsVec = cast<VectorType>(lhs.getType());
  if (rhsType.isF32())
    return vector::BroadcastOp::create(e.b, lhsVec, rhs);
  if (lhsType == rhsType)
    return rhs;
  layout::TileShape s = conv.shape(cast<RegTileType>(lhsType));
  SmallVector<int64_t> indices;
  bool rows = isa<RowVecType>(rhsType);
  for (int64_t mi = 0; mi < s.mFrags(); ++mi)
    for (int64_t ni = 0; ni < s.nFrags(); ++ni)
      for (int64_t k = 0; k < 4; ++k)
        indices.push_back(rows ? layout::TileShape::rowVecIndex(mi, k / 2)
                               : layout::TileShape::colVecIndex(ni, k % 2));
  return e.gather(rhs, indices);
}

template <typename BobOp, typename ArithOp>
struct BinaryLowering : TilePattern<BobOp> {
  using TilePattern<BobOp>::TilePattern;
  using OpAdaptor = typename BobOp::Adaptor;
  LogicalResult lower(BobOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = this->converter();
    Value rhs = broadcastOperand(e, *conv, op.getLhs().getType(), op.getRhs().getType(),
                                 a.getLhs(), a.getRhs());
    rw.replaceOp(op, ArithOp::create(e.b, a.getLhs(), rhs).getResult());
    return success();
  }
};

// exp2 / log2 through the PTX approximations, element by element (these intrinsics are scalar).
// ex2.approx.ftz.f32 (max 2 ulp) is one MUFU.EX2; without .ftz ptxas wraps it in a range test
// and two multiplies to produce subnormal results. Here every exp2 is a probability
// (exp2(s - max), exp2(s - L)) or the forward's rescale of its running sums (exp2(old max - new
// max)), and each enters sums that also hold the row's largest term, exp2(0) = 1 or at least
// 1/M of the row: a result below 2^-126 is far below float32's resolution of any such sum, so
// flushing it to zero changes no output (docs/numerics.md). lg2.approx.f32's LLVM intrinsic is
// named .f.
template <typename BobOp>
struct IntrinsicLowering : TilePattern<BobOp> {
  IntrinsicLowering(TypeConverter &tc, MLIRContext *ctx, StringRef intrinsic)
      : TilePattern<BobOp>(tc, ctx), intrinsic(intrinsic.str()) {}
  std::string intrinsic;
  using OpAdaptor = typename BobOp::Adaptor;
  LogicalResult lower(BobOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    Value vec = a.getSource();
    int64_t n = cast<VectorType>(vec.getType()).getNumElements();
    Value result = vec;
    auto name = rw.getStringAttr(intrinsic);
    for (int64_t i = 0; i < n; ++i) {
      Value x = e.extract(vec, i);
      Value y = LLVM::CallIntrinsicOp::create(e.b, rw.getF32Type(), name, ValueRange{x}).getResult(0);
      result = e.insert(y, result, i);
    }
    rw.replaceOp(op, result);
    return success();
  }
};

struct ReplaceLowering : TilePattern<ReplaceOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(ReplaceOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto type = cast<VectorType>(a.getSource().getType());
    Value from = e.splat(type, op.getFrom().convertToDouble());
    Value to = e.splat(type, op.getTo().convertToDouble());
    Value hit = arith::CmpFOp::create(e.b, arith::CmpFPredicate::OEQ, a.getSource(), from);
    rw.replaceOp(op, arith::SelectOp::create(e.b, hit, to, a.getSource()).getResult());
    return success();
  }
};

// The query's own key is query + (M - N) (bottom-right aligned diagonal); the mask lets it see
// `right` keys past it (0 when causal) and `left` before it, each side only when given. For
// bob.mask and bob.multi_key_rows alike.
template <typename MaskLikeOp>
std::optional<int64_t> rightSide(MaskLikeOp op) {
  if (op.getCausal())
    return 0;
  if (IntegerAttr attr = op.getWindowRightAttr())
    return attr.getInt();
  return std::nullopt;
}
template <typename MaskLikeOp>
std::optional<int64_t> leftSide(MaskLikeOp op) {
  if (IntegerAttr attr = op.getWindowLeftAttr())
    return attr.getInt();
  return std::nullopt;
}
Value toI32(Emitter &e, Value v) {
  return arith::IndexCastOp::create(e.b, e.b.getI32Type(), v).getResult();
}
Value constantI32(Emitter &e, int64_t v) {
  return arith::ConstantOp::create(e.b, e.b.getI32IntegerAttr(static_cast<int32_t>(v))).getResult();
}

struct MaskLowering : TilePattern<MaskOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(MaskOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto vecType = cast<VectorType>(a.getSource().getType());
    // With tile_test (always for windows) the whole tile is tested first: one that the mask
    // hides nothing of (every query < N, key < M, every key inside every query's window) passes
    // through, and only the tiles along the sequence ends, the diagonal and the window's edges
    // run the element tests, which for a window are twice the plain ones. The kernels ask for
    // it where their registers afford the branch (kernels/common/AttentionTiles.cpp).
    if (!op.getTileTest() && !op.getWindowLeftAttr() && !op.getWindowRightAttr()) {
      rw.replaceOp(op, elementTests(op, a, e, rw));
      return success();
    }
    rw.replaceOp(op, e.ifElse(vecType, tileIsClear(op, a, e, rw), [&] { return a.getSource(); },
                              [&] { return elementTests(op, a, e, rw); }));
    return success();
  }

private:
  // Whether the mask hides nothing of the whole tile (a uniform i1).
  Value tileIsClear(MaskOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const {
    using P = arith::CmpIPredicate;
    const std::optional<int64_t> right = rightSide(op), left = leftSide(op);
    Value n = toI32(e, a.getQueries()), m = toI32(e, a.getKeys());
    Value offset = arith::SubIOp::create(e.b, m, n); // M - N
    auto tileType = cast<RegTileType>(op.getSource().getType());
    const bool keysOnRows = op.getKeysOnRows();
    Value q0 = toI32(e, keysOnRows ? a.getCol() : a.getRow());
    Value k0 = toI32(e, keysOnRows ? a.getRow() : a.getCol());
    const int64_t queryExtent = keysOnRows ? tileType.getCols() : tileType.getRows();
    const int64_t keyExtent = keysOnRows ? tileType.getRows() : tileType.getCols();
    Value qEnd = arith::AddIOp::create(e.b, q0, constantI32(e, queryExtent)); // one past the last
    Value kEnd = arith::AddIOp::create(e.b, k0, constantI32(e, keyExtent));
    Value qIn = arith::CmpIOp::create(e.b, P::sle, qEnd, n);
    Value kIn = arith::CmpIOp::create(e.b, P::sle, kEnd, m);
    Value clear = arith::AndIOp::create(e.b, qIn, kIn);
    if (right) { // last key <= first query's diagonal + right
      Value reach = arith::AddIOp::create(e.b, q0, offset);
      if (*right)
        reach = arith::AddIOp::create(e.b, reach, constantI32(e, *right));
      Value lastKey = arith::SubIOp::create(e.b, kEnd, constantI32(e, 1));
      clear = arith::AndIOp::create(e.b, clear, arith::CmpIOp::create(e.b, P::sle, lastKey, reach));
    }
    if (left) { // first key >= last query's diagonal - left
      Value lastQuery = arith::SubIOp::create(e.b, qEnd, constantI32(e, 1));
      Value start = arith::AddIOp::create(e.b, lastQuery, offset);
      if (*left)
        start = arith::SubIOp::create(e.b, start, constantI32(e, *left));
      clear = arith::AndIOp::create(e.b, clear, arith::CmpIOp::create(e.b, P::sge, k0, start));
    }
    return clear;
  }

  // The source with the fill value wherever the mask hides an element.
  Value elementTests(MaskOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getSource().getType());
    auto vecType = cast<VectorType>(a.getSource().getType());
    auto intVec = VectorType::get(vecType.getShape(), rw.getI32Type());
    ThreadCoords c = e.coords(conv);
    auto bcast = [&](Value v) { return vector::BroadcastOp::create(e.b, intVec, v).getResult(); };

    // Sequence position of every element: thread base + a constant per element.
    SmallVector<int32_t> rowOffsets, colOffsets;
    for (int64_t mi = 0; mi < s.mFrags(); ++mi)
      for (int64_t ni = 0; ni < s.nFrags(); ++ni)
        for (int64_t k = 0; k < 4; ++k) {
          rowOffsets.push_back(static_cast<int32_t>(layout::TileShape::rowOffset(mi, k)));
          colOffsets.push_back(static_cast<int32_t>(layout::TileShape::colOffset(ni, k)));
        }
    auto constVec = [&](ArrayRef<int32_t> v) {
      return arith::ConstantOp::create(e.b, DenseElementsAttr::get(intVec, v)).getResult();
    };
    Value rows = arith::AddIOp::create(
        e.b, bcast(toI32(e, e.add(a.getRow(), e.threadRowBase(c, s)))), constVec(rowOffsets));
    Value cols = arith::AddIOp::create(
        e.b, bcast(toI32(e, e.add(a.getCol(), e.threadColBase(c, s)))), constVec(colOffsets));
    Value queries = op.getKeysOnRows() ? cols : rows;
    Value keys = op.getKeysOnRows() ? rows : cols;

    Value n = toI32(e, a.getQueries()), m = toI32(e, a.getKeys());
    using P = arith::CmpIPredicate;
    Value masked = arith::OrIOp::create(e.b, arith::CmpIOp::create(e.b, P::sge, queries, bcast(n)),
                                        arith::CmpIOp::create(e.b, P::sge, keys, bcast(m)));
    const std::optional<int64_t> right = rightSide(op), left = leftSide(op);
    Value diagonal;
    if (right || left)
      diagonal = arith::AddIOp::create(e.b, queries, bcast(arith::SubIOp::create(e.b, m, n)));
    auto shifted = [&](int64_t by) {
      if (by == 0)
        return diagonal;
      SmallVector<int32_t> splat(rowOffsets.size(), static_cast<int32_t>(by));
      return arith::AddIOp::create(e.b, diagonal, constVec(splat)).getResult();
    };
    if (right) // key > query + (M - N) + right
      masked = arith::OrIOp::create(e.b, masked, arith::CmpIOp::create(e.b, P::sgt, keys, shifted(*right)));
    if (left) // key < query + (M - N) - left
      masked = arith::OrIOp::create(e.b, masked, arith::CmpIOp::create(e.b, P::slt, keys, shifted(-*left)));
    Value fill = e.splat(vecType, op.getValue().convertToDouble());
    return arith::SelectOp::create(e.b, masked, fill, a.getSource()).getResult();
  }
};

// Per row: the first key it sees is max(0, diagonal - left) (0 without a left side), the last
// min(M - 1, diagonal + right) (M - 1 without a right side); two or more keys when last > first.
// The element order is the row vector's (FragmentLayout.h: index mi * 2 + h holds row g + 8h of
// fragment mi).
struct MultiKeyRowsLowering : TilePattern<MultiKeyRowsOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(MultiKeyRowsOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getType());
    auto vecType = cast<VectorType>(conv->convertType(op.getType()));
    auto intVec = VectorType::get(vecType.getShape(), rw.getI32Type());
    auto bcast = [&](Value v) { return vector::BroadcastOp::create(e.b, intVec, v).getResult(); };
    auto constVec = [&](int32_t v) {
      return arith::ConstantOp::create(e.b, DenseElementsAttr::get(intVec, v)).getResult();
    };
    SmallVector<int32_t> rowOffsets;
    for (int64_t mi = 0; mi < s.mFrags(); ++mi)
      for (int64_t h = 0; h < 2; ++h)
        rowOffsets.push_back(static_cast<int32_t>(layout::TileShape::rowOffset(mi, 2 * h)));
    // One value per statement: the IR comes out in this order (argument evaluation has none).
    ThreadCoords c = e.coords(conv);
    Value base = bcast(toI32(e, e.add(a.getRow(), e.threadRowBase(c, s))));
    Value offsets =
        arith::ConstantOp::create(e.b, DenseElementsAttr::get(intVec, ArrayRef(rowOffsets)));
    Value queries = arith::AddIOp::create(e.b, base, offsets);
    Value n = toI32(e, a.getQueries());
    Value m = toI32(e, a.getKeys());
    const std::optional<int64_t> right = rightSide(op), left = leftSide(op);
    Value diagonal;
    if (right || left)
      diagonal = arith::AddIOp::create(e.b, queries, bcast(arith::SubIOp::create(e.b, m, n)));
    Value lastKey = bcast(arith::SubIOp::create(e.b, m, constantI32(e, 1)));
    if (right) {
      Value reach = diagonal;
      if (*right)
        reach = arith::AddIOp::create(e.b, diagonal, constVec(*right));
      lastKey = arith::MinSIOp::create(e.b, reach, lastKey);
    }
    Value firstKey = constVec(0);
    if (left) {
      Value back = arith::SubIOp::create(e.b, diagonal, constVec(*left));
      firstKey = arith::MaxSIOp::create(e.b, back, firstKey);
    }
    using P = arith::CmpIPredicate;
    Value inside = arith::CmpIOp::create(e.b, P::slt, queries, bcast(n));
    Value twoOrMore = arith::CmpIOp::create(e.b, P::sgt, lastKey, firstKey);
    Value several = arith::AndIOp::create(e.b, inside, twoOrMore);
    Value one = e.splat(vecType, 1.0);
    Value zero = e.splat(vecType, 0.0);
    rw.replaceOp(op, arith::SelectOp::create(e.b, several, one, zero).getResult());
    return success();
  }
};

// x + y or max(x, y).
Value combine(Emitter &e, ReduceKind kind, Value x, Value y) {
  if (kind == ReduceKind::max)
    return arith::MaxNumFOp::create(e.b, x, y);
  return arith::AddFOp::create(e.b, x, y);
}

// Each column group reduced its own columns; the groups exchange their partial rows through
// the static buffer kRowExchangeSymbol (warp_cols x rows f32) and every thread combines them
// in group order, so all groups hold the same, deterministic result. The first barrier keeps
// the previous reduction's readers ahead of these writes.
Value combineColumnGroups(Emitter &e, const TileTypeConverter &conv, const layout::TileShape &s,
                          memref::GlobalOp exchange, Value partial, ReduceKind kind) {
  Value buffer = memref::GetGlobalOp::create(e.b, exchange.getType(), kRowExchangeSymbol);
  ThreadCoords c = e.coords(&conv);
  Value base = e.threadRowBase(c, s);
  auto slot = [&](Value group, int64_t mi, int64_t h) {
    return e.add(e.mul(group, e.index(s.rows)), e.addConst(base, mi * 16 + 8 * h));
  };
  gpu::BarrierOp::create(e.b);
  Value writer = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, c.t, e.index(0));
  e.ifThen(writer, [&] {
    for (int64_t mi = 0; mi < s.mFrags(); ++mi)
      for (int64_t h = 0; h < 2; ++h)
        memref::StoreOp::create(e.b, e.extract(partial, layout::TileShape::rowVecIndex(mi, h)),
                                buffer, ValueRange{slot(c.colGroup, mi, h)});
  });
  gpu::BarrierOp::create(e.b);
  Value result = partial;
  for (int64_t mi = 0; mi < s.mFrags(); ++mi)
    for (int64_t h = 0; h < 2; ++h) {
      Value acc;
      for (int64_t g = 0; g < conv.warpCols(); ++g) {
        Value v = memref::LoadOp::create(e.b, buffer, ValueRange{slot(e.index(g), mi, h)});
        acc = acc ? combine(e, kind, acc, v) : v;
      }
      result = e.insert(acc, result, layout::TileShape::rowVecIndex(mi, h));
    }
  return result;
}

// The module's row exchange buffer (LowerTiles.cpp declares it), if it holds `floats`.
memref::GlobalOp rowExchange(Operation *op, int64_t floats) {
  auto exchange = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
      op, StringAttr::get(op->getContext(), kRowExchangeSymbol));
  if (!exchange || exchange.getType().getNumElements() < floats)
    return nullptr;
  return exchange;
}

struct ReduceLowering : TilePattern<ReduceOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(ReduceOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getSource().getType());
    auto resultType = cast<VectorType>(conv->convertType(op.getType()));
    const ReduceKind kind = op.getKind();
    Value result = e.splat(resultType, 0.0);
    for (int64_t mi = 0; mi < s.mFrags(); ++mi)
      for (int64_t h = 0; h < 2; ++h) {
        // This thread's 2 * NF values of the row, then across the 4 threads of its group, which
        // hold the other columns (lanes differing in bits 0 and 1).
        Value acc = e.extract(a.getSource(), s.accIndex(mi, 0, 2 * h));
        for (int64_t ni = 0; ni < s.nFrags(); ++ni)
          for (int64_t k = 0; k < 2; ++k)
            if (ni != 0 || k != 0)
              acc = combine(e, kind, acc, e.extract(a.getSource(), s.accIndex(mi, ni, 2 * h + k)));
        for (int32_t offset : {1, 2}) {
          Value other = gpu::ShuffleOp::create(e.b, acc, offset, 32, gpu::ShuffleMode::XOR)
                            .getShuffleResult();
          acc = combine(e, kind, acc, other);
        }
        result = e.insert(acc, result, layout::TileShape::rowVecIndex(mi, h));
      }
    if (conv->warpCols() > 1 && !op.getWithinGroup()) {
      auto exchange = rowExchange(op, conv->warpCols() * s.rows);
      if (!exchange)
        return rw.notifyMatchFailure(op, "no row exchange buffer of warp_cols x rows f32");
      result = combineColumnGroups(e, *conv, s, exchange, result, kind);
    }
    rw.replaceOp(op, result);
    return success();
  }
};

struct CombineGroupsLowering : TilePattern<CombineGroupsOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(CombineGroupsOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    if (conv->warpCols() == 1) {
      rw.replaceOp(op, a.getSource());
      return success();
    }
    layout::TileShape s = conv->shape(op.getType());
    auto exchange = rowExchange(op, conv->warpCols() * s.rows);
    if (!exchange)
      return rw.notifyMatchFailure(op, "no row exchange buffer of warp_cols x rows f32");
    rw.replaceOp(op, combineColumnGroups(e, *conv, s, exchange, a.getSource(), op.getKind()));
    return success();
  }

};

} // namespace

void populateMathPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SplatLowering, ConvertLowering, ReplaceLowering, MaskLowering,
               MultiKeyRowsLowering, ReduceLowering, CombineGroupsLowering,
               BinaryLowering<AddOp, arith::AddFOp>, BinaryLowering<SubOp, arith::SubFOp>,
               BinaryLowering<MulOp, arith::MulFOp>, BinaryLowering<DivOp, arith::DivFOp>,
               BinaryLowering<MaxOp, arith::MaxNumFOp>>(converter, ctx);
  patterns.add<IntrinsicLowering<Exp2Op>>(converter, ctx, "llvm.nvvm.ex2.approx.ftz.f32");
  patterns.add<IntrinsicLowering<Log2Op>>(converter, ctx, "llvm.nvvm.lg2.approx.f");
}

} // namespace flashbob::bob::lowering
