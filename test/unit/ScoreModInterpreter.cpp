#include "test/unit/ScoreModInterpreter.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace flashbob::test {
using namespace mlir;

size_t Capture::offset(const std::vector<int64_t> &indices) const {
  if (indices.size() != shape.size())
    throw std::out_of_range("load with " + std::to_string(indices.size()) + " indices of a rank-" +
                            std::to_string(shape.size()) + " capture");
  size_t at = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (indices[d] < 0 || indices[d] >= shape[d])
      throw std::out_of_range("load index " + std::to_string(indices[d]) + " outside [0, " +
                              std::to_string(shape[d]) + ") in dimension " + std::to_string(d));
    at = at * static_cast<size_t>(shape[d]) + static_cast<size_t>(indices[d]);
  }
  return at;
}

namespace {

// One value: f32 in `f`, integers (index, iN, i1) in `i`, kept in their width.
struct Scalar {
  double f = 0.0;
  int64_t i = 0;
};

// An integer of type t, wrapped to its width: i1 as 0 or 1, iN sign-extended, index and i64 as
// they are.
int64_t wrap(Type t, int64_t v) {
  if (t.isIndex())
    return v;
  unsigned width = t.getIntOrFloatBitWidth();
  if (width == 1)
    return v & 1;
  if (width >= 64)
    return v;
  uint64_t bits = static_cast<uint64_t>(v) & ((uint64_t{1} << width) - 1);
  uint64_t sign = uint64_t{1} << (width - 1);
  return static_cast<int64_t>((bits ^ sign) - sign);
}

// The same bits read unsigned (for the u* predicates).
uint64_t unsignedOf(Type t, int64_t v) {
  unsigned width = t.isIndex() ? 64 : t.getIntOrFloatBitWidth();
  return width >= 64 ? static_cast<uint64_t>(v) : static_cast<uint64_t>(v) & ((uint64_t{1} << width) - 1);
}

bool compare(arith::CmpFPredicate p, double x, double y) {
  using P = arith::CmpFPredicate;
  const bool unordered = std::isnan(x) || std::isnan(y);
  switch (p) {
  case P::AlwaysFalse: return false;
  case P::OEQ: return !unordered && x == y;
  case P::OGT: return !unordered && x > y;
  case P::OGE: return !unordered && x >= y;
  case P::OLT: return !unordered && x < y;
  case P::OLE: return !unordered && x <= y;
  case P::ONE: return !unordered && x != y;
  case P::ORD: return !unordered;
  case P::UEQ: return unordered || x == y;
  case P::UGT: return unordered || x > y;
  case P::UGE: return unordered || x >= y;
  case P::ULT: return unordered || x < y;
  case P::ULE: return unordered || x <= y;
  case P::UNE: return unordered || x != y;
  case P::UNO: return unordered;
  case P::AlwaysTrue: return true;
  }
  return false;
}

bool compare(arith::CmpIPredicate p, Type t, int64_t x, int64_t y) {
  using P = arith::CmpIPredicate;
  const uint64_t ux = unsignedOf(t, x), uy = unsignedOf(t, y);
  switch (p) {
  case P::eq: return x == y;
  case P::ne: return x != y;
  case P::slt: return x < y;
  case P::sle: return x <= y;
  case P::sgt: return x > y;
  case P::sge: return x >= y;
  case P::ult: return ux < uy;
  case P::ule: return ux <= uy;
  case P::ugt: return ux > uy;
  case P::uge: return ux >= uy;
  }
  return false;
}

// arith.maximumf / minimumf: NaN if either is, and -0 < +0.
double maximum(double x, double y, bool max) {
  if (std::isnan(x) || std::isnan(y))
    return std::numeric_limits<double>::quiet_NaN();
  if (x == y && x == 0.0)
    return (std::signbit(x) == max) ? y : x;
  return max ? std::max(x, y) : std::min(x, y);
}

// fptosi, saturating like PTX's cvt.rzi (arith leaves out-of-range results poison).
int64_t toInteger(double x, Type t) {
  if (std::isnan(x))
    return 0;
  unsigned width = t.isIndex() ? 64 : t.getIntOrFloatBitWidth();
  const double hi = std::ldexp(1.0, static_cast<int>(width) - 1);
  if (x >= hi)
    return wrap(t, static_cast<int64_t>(hi - 1));
  if (x < -hi)
    return wrap(t, width >= 64 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(hi));
  return static_cast<int64_t>(std::trunc(x));
}

} // namespace

std::vector<double> evaluate(Region &region, const std::vector<double> &leading,
                             const std::vector<Capture> &captures, Reads *reads) {
  Block &block = region.front();
  if (block.getNumArguments() != leading.size() + captures.size())
    throw std::runtime_error("the region takes " + std::to_string(block.getNumArguments()) +
                             " arguments, given " + std::to_string(leading.size() + captures.size()));
  DenseMap<Value, Scalar> env;
  auto setArg = [&](BlockArgument arg, double v) {
    if (arg.getType().isF32())
      env[arg].f = v;
    else if (!isa<MemRefType>(arg.getType()))
      env[arg].i = wrap(arg.getType(), static_cast<int64_t>(v));
  };
  for (size_t k = 0; k < leading.size(); ++k)
    setArg(block.getArgument(static_cast<unsigned>(k)), leading[k]);
  for (size_t k = 0; k < captures.size(); ++k)
    setArg(block.getArgument(static_cast<unsigned>(leading.size() + k)), captures[k].scalar);

  auto f = [&](Value v) { return env.lookup(v).f; };
  auto i = [&](Value v) { return env.lookup(v).i; };
  for (Operation &op : block) {
    if (auto yield = dyn_cast<bob::YieldOp>(op)) {
      std::vector<double> out;
      for (Value v : yield.getValues())
        out.push_back(v.getType().isF32() ? f(v) : static_cast<double>(i(v)));
      return out;
    }
    Value r = op.getResult(0);
    Type t = r.getType();
    Scalar s;
    auto setInt = [&](int64_t v) { s.i = wrap(t, v); };
    // Wrapping integer arithmetic, as arith's (two's complement in the type's width).
    auto add = [](int64_t x, int64_t y) {
      return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
    };
    auto sub = [](int64_t x, int64_t y) {
      return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
    };
    auto mul = [](int64_t x, int64_t y) {
      return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
    };
    bool known = llvm::TypeSwitch<Operation *, bool>(&op)
        .Case([&](arith::ConstantOp o) {
          if (auto value = dyn_cast<FloatAttr>(o.getValue()))
            s.f = value.getValueAsDouble();
          else
            setInt(cast<IntegerAttr>(o.getValue()).getValue().getSExtValue());
          return true;
        })
        .Case([&](arith::AddFOp o) { s.f = f(o.getLhs()) + f(o.getRhs()); return true; })
        .Case([&](arith::SubFOp o) { s.f = f(o.getLhs()) - f(o.getRhs()); return true; })
        .Case([&](arith::MulFOp o) { s.f = f(o.getLhs()) * f(o.getRhs()); return true; })
        .Case([&](arith::DivFOp o) { s.f = f(o.getLhs()) / f(o.getRhs()); return true; })
        .Case([&](arith::NegFOp o) { s.f = -f(o.getOperand()); return true; })
        .Case([&](arith::MaximumFOp o) { s.f = maximum(f(o.getLhs()), f(o.getRhs()), true); return true; })
        .Case([&](arith::MinimumFOp o) { s.f = maximum(f(o.getLhs()), f(o.getRhs()), false); return true; })
        .Case([&](arith::CmpFOp o) {
          setInt(compare(o.getPredicate(), f(o.getLhs()), f(o.getRhs())));
          return true;
        })
        .Case([&](arith::CmpIOp o) {
          setInt(compare(o.getPredicate(), o.getLhs().getType(), i(o.getLhs()), i(o.getRhs())));
          return true;
        })
        .Case([&](arith::SelectOp o) {
          s = i(o.getCondition()) ? env.lookup(o.getTrueValue()) : env.lookup(o.getFalseValue());
          return true;
        })
        .Case([&](arith::AddIOp o) { setInt(add(i(o.getLhs()), i(o.getRhs()))); return true; })
        .Case([&](arith::SubIOp o) { setInt(sub(i(o.getLhs()), i(o.getRhs()))); return true; })
        .Case([&](arith::MulIOp o) { setInt(mul(i(o.getLhs()), i(o.getRhs()))); return true; })
        .Case([&](arith::DivSIOp o) {
          if (i(o.getRhs()) == 0)
            throw std::runtime_error("arith.divsi by zero");
          setInt(i(o.getLhs()) / i(o.getRhs()));
          return true;
        })
        .Case([&](arith::RemSIOp o) {
          if (i(o.getRhs()) == 0)
            throw std::runtime_error("arith.remsi by zero");
          setInt(i(o.getLhs()) % i(o.getRhs()));
          return true;
        })
        .Case([&](arith::MaxSIOp o) { setInt(std::max(i(o.getLhs()), i(o.getRhs()))); return true; })
        .Case([&](arith::MinSIOp o) { setInt(std::min(i(o.getLhs()), i(o.getRhs()))); return true; })
        .Case([&](arith::AndIOp o) { setInt(i(o.getLhs()) & i(o.getRhs())); return true; })
        .Case([&](arith::OrIOp o) { setInt(i(o.getLhs()) | i(o.getRhs())); return true; })
        .Case([&](arith::XOrIOp o) { setInt(i(o.getLhs()) ^ i(o.getRhs())); return true; })
        .Case([&](arith::SIToFPOp o) { s.f = static_cast<double>(i(o.getIn())); return true; })
        .Case([&](arith::FPToSIOp o) { s.i = toInteger(f(o.getIn()), t); return true; })
        .Case([&](arith::IndexCastOp o) { setInt(i(o.getIn())); return true; })
        .Case([&](math::TanhOp o) { s.f = std::tanh(f(o.getOperand())); return true; })
        .Case([&](math::ExpOp o) { s.f = std::exp(f(o.getOperand())); return true; })
        .Case([&](math::LogOp o) { s.f = std::log(f(o.getOperand())); return true; })
        .Case([&](math::AbsFOp o) { s.f = std::fabs(f(o.getOperand())); return true; })
        .Case([&](math::AbsIOp o) {
          int64_t x = i(o.getOperand());
          setInt(x < 0 ? sub(0, x) : x);
          return true;
        })
        .Case([&](memref::LoadOp o) {
          auto arg = cast<BlockArgument>(o.getMemRef());
          unsigned k = arg.getArgNumber() - static_cast<unsigned>(leading.size());
          std::vector<int64_t> indices;
          for (Value index : o.getIndices())
            indices.push_back(i(index));
          size_t at = captures.at(k).offset(indices);
          if (reads)
            (*reads)[k].push_back(at);
          double v = captures[k].data[at];
          if (t.isF32())
            s.f = v;
          else
            setInt(static_cast<int64_t>(v));
          return true;
        })
        .Default([](Operation *) { return false; });
    if (!known)
      throw std::runtime_error("cannot evaluate " + op.getName().getStringRef().str());
    env[r] = s;
  }
  throw std::runtime_error("the region does not end in bob.yield");
}

} // namespace flashbob::test
