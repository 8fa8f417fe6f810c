// bob-differentiate-score-mod: a bob.score_mod gets its partial derivatives, by forward-mode
// differentiation of its body (docs/bob-math.md, "Score modifications"; the tags and the groups
// a partial yields: BobOps.td). A softcap c tanh(T / c):
//
//   %f = bob.score_mod captures(%cap : f32) {       %f = bob.score_mod captures(%cap : f32) {
//   ^bb0(%score, %b, %h, %q_idx, %kv_idx, %c):        ^bb0(...):          (the body, unchanged)
//     %a = arith.divf %score, %c                    } d(score) {          F1 = c ((1 - t t) (1 / c))
//     %t = math.tanh %a                       ->    } d(score, score) {   F2
//     %r = arith.mulf %c, %t                        } d(capture 0) {      df/dc = t + c ((1 - t t) (-a / c))
//     bob.yield %r                                  } d(score, capture 0) {         d(F1)/dc
//   }                                               } d(capture 0, capture 0) { ... d2f/dc2
//
// Each partial is its own region: a copy of the region it differentiates (the body, or the
// partial of one order less), followed op by op by the tangent of every f32 value that
// depends on the seed (the score's block argument, an f32 capture's, or the result of one load
// of a memref capture, one seed at a time), and a yield of the tangents of what that region
// yielded. Integer values (indices, buckets, comparisons) have no tangent: their ops are
// locally constant in the seed, and so are fptosi and sitofp. A tangent that is structurally
// zero is never formed, and products by 1 are not either, so f = T + terms independent of T
// has F1 = 1 and F2 = 0 as constants (what the kernels test for), and a term such as a bias
// load is gone from every partial that does not need it. Second partials differentiate the
// first ones, so F2 reuses F1's values (CSE merges what the two sweeps recompute).
//
// Partials by memref captures: a region's value is a sum over the loads of the capture, so it
// yields one group per load that contributes, the coefficient followed by the load's indices
// (after those of the region it differentiates): T5's table gives (1, h, bucket), a bias
// (1, b, h, q_idx, kv_idx) (its broadcast dimensions are constant 0 indices in the body, so
// the gradient lands summed over them, as the oracle's does).
#include "compiler/passes/Passes.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"

#include "llvm/ADT/TypeSwitch.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBDIFFERENTIATESCOREMOD
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

using Key = SmallVector<int64_t, 2>;

// A value the partial differentiates by, and the indices that say which element it is.
struct Site {
  Value value;
  SmallVector<Value> indices;
};

// The sites of `item` in a region of the op: the score's or a scalar capture's block
// argument, or every load of a memref capture.
SmallVector<Site> sitesOf(Block &block, int64_t item) {
  if (item == ScoreModOp::kScore)
    return {{block.getArgument(0), {}}};
  BlockArgument arg = block.getArgument(ScoreModOp::kLeadingArgs + item);
  if (!isa<MemRefType>(arg.getType()))
    return {{arg, {}}};
  SmallVector<Site> sites;
  for (auto load : block.getOps<memref::LoadOp>())
    if (load.getMemRef() == arg)
      sites.push_back({load.getResult(), llvm::to_vector(load.getIndices())});
  return sites;
}

// One forward-mode sweep: the tangents of the block's f32 values along one seed. A null
// tangent is a structural zero: no op is made for it or for products with it.
class Sweep {
public:
  Sweep(Block &block, Value seed) : block_(block), b_(block.getParentOp()->getContext()) {
    tangents_[seed] = constant(1.0);
  }

  Value of(Value v) const { return tangents_.lookup(v); }

  // The tangent of op's result, made right after op from its operands' tangents.
  LogicalResult propagate(Operation *op) {
    if (op->getNumResults() != 1 || !op->getResult(0).getType().isF32() ||
        tangents_.count(op->getResult(0)))
      return success(); // integers and i1 (locally constant), and the seed itself
    if (llvm::none_of(op->getOperands(), [&](Value v) { return of(v); }))
      return success(); // constants, sitofp, loads that are not the seed, and the rest
    b_.setInsertionPointAfter(op);
    loc_ = op->getLoc();
    Value r = op->getResult(0);
    FailureOr<Value> d =
        llvm::TypeSwitch<Operation *, FailureOr<Value>>(op)
            .Case([&](arith::AddFOp o) { return add(of(o.getLhs()), of(o.getRhs())); })
            .Case([&](arith::SubFOp o) { return sub(of(o.getLhs()), of(o.getRhs())); })
            .Case([&](arith::MulFOp o) -> Value {
              Value x = o.getLhs(), y = o.getRhs();
              if (x == y) { // d(x x) = 2 x dx, as (x dx) + (x dx)
                Value half = mul(x, of(x));
                return add(half, half);
              }
              return add(mul(of(x), y), mul(x, of(y)));
            })
            .Case([&](arith::DivFOp o) -> Value {
              // d(x / y) = (dx - r dy) / y
              Value y = o.getRhs();
              return div(sub(of(o.getLhs()), mul(r, of(y))), y);
            })
            .Case([&](arith::NegFOp o) { return neg(of(o.getOperand())); })
            .Case([&](arith::MaximumFOp o) {
              return pick(arith::CmpFPredicate::OGE, o.getLhs(), o.getRhs());
            })
            .Case([&](arith::MinimumFOp o) {
              return pick(arith::CmpFPredicate::OLE, o.getLhs(), o.getRhs());
            })
            .Case([&](arith::SelectOp o) {
              return select(o.getCondition(), of(o.getTrueValue()), of(o.getFalseValue()));
            })
            .Case([&](math::TanhOp o) { // (1 - r^2) dx
              return mul(sub(constant(1.0), mul(r, r)), of(o.getOperand()));
            })
            .Case([&](math::ExpOp o) { return mul(r, of(o.getOperand())); })
            .Case([&](math::LogOp o) { return div(of(o.getOperand()), o.getOperand()); })
            .Case([&](math::AbsFOp o) -> Value { // -dx where x < 0, else dx
              Value x = o.getOperand();
              Value negative = cmp(arith::CmpFPredicate::OLT, x, constant(0.0));
              return select(negative, neg(of(x)), of(x));
            })
            .Default([&](Operation *) -> FailureOr<Value> {
              return op->emitOpError("has no derivative rule (bob-differentiate-score-mod)");
            });
    if (failed(d))
      return failure();
    if (*d && !matchPattern(*d, m_AnyZeroFloat())) // a folded zero is a structural one
      tangents_[r] = *d;
    return success();
  }

private:
  // Constants at the top of the block, where they dominate every use (CSE merges them).
  Value constant(double v) {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&block_);
    return arith::ConstantOp::create(b_, block_.getParentOp()->getLoc(), b_.getF32FloatAttr(v));
  }
  static bool isConstant(Value v, double c) {
    APFloat value(0.0f);
    return v && matchPattern(v, m_ConstantFloat(&value)) && value.convertToDouble() == c;
  }
  Value add(Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return b_.createOrFold<arith::AddFOp>(loc_, x, y);
  }
  Value sub(Value x, Value y) {
    if (!y)
      return x;
    if (!x)
      return neg(y);
    return b_.createOrFold<arith::SubFOp>(loc_, x, y);
  }
  Value neg(Value x) { return x ? b_.createOrFold<arith::NegFOp>(loc_, x) : Value(); }
  Value mul(Value x, Value y) {
    if (!x || !y)
      return Value();
    if (isConstant(x, 1.0))
      return y;
    if (isConstant(y, 1.0))
      return x;
    if (isConstant(x, -1.0))
      return neg(y);
    if (isConstant(y, -1.0))
      return neg(x);
    return b_.createOrFold<arith::MulFOp>(loc_, x, y);
  }
  Value div(Value x, Value y) {
    if (!x)
      return Value();
    if (isConstant(y, 1.0))
      return x;
    return b_.createOrFold<arith::DivFOp>(loc_, x, y);
  }
  Value cmp(arith::CmpFPredicate predicate, Value x, Value y) {
    return b_.createOrFold<arith::CmpFOp>(loc_, predicate, x, y);
  }
  Value select(Value condition, Value x, Value y) {
    if (x == y)
      return x; // both zero, or the same tangent
    return b_.createOrFold<arith::SelectOp>(loc_, condition, x ? x : constant(0.0),
                                            y ? y : constant(0.0));
  }
  // max and min: the tangent of the operand they pick (the left one on ties).
  Value pick(arith::CmpFPredicate predicate, Value x, Value y) {
    if (of(x) == of(y))
      return of(x);
    return select(cmp(predicate, x, y), of(x), of(y));
  }

  Block &block_;
  OpBuilder b_;
  Location loc_ = b_.getUnknownLoc();
  DenseMap<Value, Value> tangents_;
};

// Dead ops out (a partial keeps only what its value needs), then repeated ones.
void cleanUp(ScoreModOp holder) {
  Block &block = holder.getBody().front();
  auto eraseDead = [&] {
    for (Operation *op = block.getTerminator()->getPrevNode(); op;) {
      Operation *previous = op->getPrevNode();
      if (isOpTriviallyDead(op))
        op->erase();
      op = previous;
    }
  };
  eraseDead();
  IRRewriter rewriter(holder.getContext());
  DominanceInfo dominance(holder);
  eliminateCommonSubExpressions(rewriter, dominance, holder);
  eraseDead();
}

// Values per group a region of `op` with tag `key` yields: the coefficient and the load
// indices of each memref capture in the tag.
int64_t groupSize(ScoreModOp op, ArrayRef<int64_t> key) {
  int64_t size = 1;
  for (int64_t item : key)
    if (item != ScoreModOp::kScore)
      if (auto memref = dyn_cast<MemRefType>(op.getCaptures()[item].getType()))
        size += memref.getRank();
  return size;
}

// Builds the partials of one op. Each lives in the body of a scratch bob.score_mod until all
// are known (an op's region count is fixed when it is made), then moves into the result.
class Differentiator {
public:
  explicit Differentiator(ScoreModOp op) : op_(op), b_(op) {}

  FailureOr<ScoreModOp> run() {
    if (failed(deriveAll())) {
      for (auto &partial : partials_)
        partial.second.erase();
      return failure();
    }
    return finish();
  }

private:
  LogicalResult deriveAll() {
    const Key score = {ScoreModOp::kScore};
    // F1 and F2, always; then by each f32 capture: alone, after the score, after a capture.
    if (failed(derive(op_.getBody(), {}, ScoreModOp::kScore, /*keepZero=*/true)) ||
        failed(derive(*regionOf(score), score, ScoreModOp::kScore, /*keepZero=*/true)))
      return failure();
    const int64_t captures = static_cast<int64_t>(op_.getCaptures().size());
    for (int64_t p = 0; p < captures; ++p)
      if (op_.isDifferentiable(p))
        if (failed(derive(op_.getBody(), {}, p, false)) ||
            failed(derive(*regionOf(score), score, p, false)))
          return failure();
    for (int64_t p = 0; p < captures; ++p)
      if (Region *first = regionOf({p}))
        for (int64_t q = p; q < captures; ++q)
          if (op_.isDifferentiable(q) && failed(derive(*first, {p}, q, false)))
            return failure();
    return success();
  }

  Region *regionOf(ArrayRef<int64_t> key) {
    for (auto &[k, holder] : partials_)
      if (ArrayRef<int64_t>(k) == key)
        return &holder.getBody();
    return nullptr;
  }

  // The partial of `from` (the region tagged `fromKey`) by `item`: a copy of it with the
  // tangents of its groups' coefficients along each site of `item`, yielding the groups that
  // are not zero (or, with keepZero, the constant 0 when all are).
  LogicalResult derive(Region &from, ArrayRef<int64_t> fromKey, int64_t item, bool keepZero) {
    Key key(fromKey);
    key.push_back(item); // items ascend: the score first, captures in order (run's loops)
    auto holder = ScoreModOp::create(b_, op_.getLoc(), op_.getCaptures(), /*partials=*/nullptr,
                                     /*derivativesCount=*/0);
    IRMapping map;
    from.cloneInto(&holder.getBody(), map);
    Block &block = holder.getBody().front();
    auto yield = cast<YieldOp>(block.getTerminator());
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);

    const int64_t group = groupSize(op_, fromKey);
    SmallVector<Value> values;
    for (const Site &site : sitesOf(block, item)) {
      Sweep sweep(block, site.value);
      for (Operation *op : ops)
        if (failed(sweep.propagate(op))) {
          holder.erase();
          return failure();
        }
      for (size_t first = 0; first < yield.getValues().size(); first += group) {
        ValueRange g = yield.getValues().slice(first, group);
        Value coefficient = sweep.of(g.front());
        if (!coefficient)
          continue;
        values.push_back(coefficient);
        llvm::append_range(values, g.drop_front());
        llvm::append_range(values, site.indices);
      }
    }
    if (values.empty() && !keepZero) {
      holder.erase();
      return success();
    }
    OpBuilder end(yield);
    if (values.empty())
      values.push_back(arith::ConstantOp::create(end, op_.getLoc(), end.getF32FloatAttr(0.0)));
    YieldOp::create(end, yield.getLoc(), values);
    yield.erase();
    cleanUp(holder);
    partials_.emplace_back(key, holder);
    return success();
  }

  // The op with the partials, in the order of their tags, replacing the original.
  FailureOr<ScoreModOp> finish() {
    llvm::stable_sort(partials_, [](const auto &x, const auto &y) { return x.first < y.first; });
    SmallVector<Attribute> tags;
    for (auto &[key, holder] : partials_)
      tags.push_back(b_.getDenseI64ArrayAttr(key));
    auto result = ScoreModOp::create(b_, op_.getLoc(), op_.getCaptures(),
                                     b_.getArrayAttr(tags),
                                     static_cast<unsigned>(partials_.size()));
    result->setDiscardableAttrs(op_->getDiscardableAttrDictionary());
    result.getBody().takeBody(op_.getBody());
    for (auto [region, partial] : llvm::zip_equal(result.getDerivatives(), partials_)) {
      region.takeBody(partial.second.getBody());
      partial.second.erase();
    }
    op_.replaceAllUsesWith(result.getResult());
    op_.erase();
    return result;
  }

  ScoreModOp op_;
  OpBuilder b_;
  SmallVector<std::pair<Key, ScoreModOp>> partials_;
};

struct DifferentiateScoreMod : impl::BobDifferentiateScoreModBase<DifferentiateScoreMod> {
  void runOnOperation() override {
    SmallVector<ScoreModOp> mods;
    getOperation()->walk([&](ScoreModOp op) { mods.push_back(op); });
    for (ScoreModOp op : mods)
      if (failed(differentiateScoreMod(op)))
        return signalPassFailure();
  }
};

} // namespace

FailureOr<ScoreModOp> differentiateScoreMod(ScoreModOp op) {
  if (!op.getDerivatives().empty())
    return op;
  return Differentiator(op).run();
}

} // namespace flashbob::bob
