// Tests of the score-modification regions (bob.score_mod, bob.score_mask) and of the partial
// derivatives bob-differentiate-score-mod writes, evaluated in float64 by the region
// interpreter (ScoreModInterpreter.h):
// - against the oracle's closed forms (kernels/oracle/ScoreModOps.h): the oracle's every
//   modification written as a region (scoreModText), f, F1, F2 and each parameter's partials
//   (df/dc, d(F1)/dc, d2f/dc2, the slopes', the table's and the bias's groups) pair by pair;
// - against finite differences of the region each partial differentiates, for those
//   modifications, for one using every op with a derivative rule (the kinks kept away), and
//   for random smooth compositions: every partial the pass wrote, and zero for every one it
//   left out;
// - a mask region against the oracle's visibility and two masks against their definitions;
// - F1 and F2 as constants (what the kernels test for) exactly when f is the score plus terms
//   that do not depend on it.
//
// Tolerances. Closed forms: the region and the oracle compute the same float64 expressions
// up to their order (F1 = c ((1 - t^2) (1 / c)) against 1 - t^2): 1e-12 relative. Finite
// differences: ScoreModTest.cpp's (Richardson, h = 1e-3, truncation ~1e-12 times the fifth
// derivative): 1e-7 relative for the random compositions, whose fifth derivatives reach
// O(1e3), 1e-8 for the rest. Breaking any one derivative rule of the pass fails the finite
// differences by orders of magnitude (each was tried: add as sub, sub as add, x x's 2 x dx as
// x dx, the product rule's second term, neg, max and min picking the other side, exp, log,
// abs, select's branches swapped, the quotient rule's sign, tanh's 1 - t^2 as 1 + t^2), and
// the closed forms too for those the oracle's modifications use; so does a partial by a memref
// capture without its load's indices.
#include "compiler/passes/Passes.h"
#include "kernels/oracle/ScoreModOps.h"
#include "test/unit/ScoreModInterpreter.h"
#include "test/unit/ScoreModTestUtil.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace flashbob;
using namespace flashbob::test;
using namespace flashbob::oracle;
using namespace flashbob::oracle::testing::scoremod;
using Key = std::vector<int64_t>;

namespace {

constexpr double kClosedTol = 1e-12;
constexpr double kFdTol = 1e-8;
constexpr double kFuzzFdTol = 1e-7;
constexpr int64_t kScore = bob::ScoreModOp::kScore;

bool close(double actual, double expected, double tol) {
  return std::fabs(actual - expected) <= tol * (1.0 + std::fabs(expected));
}

std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registry.insert<bob::BobDialect, mlir::arith::ArithDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::func::FuncDialect>();
  return std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
}

// A parsed function holding one bob.score_mod (or bob.score_mask), differentiated.
struct Parsed {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  bob::ScoreModOp mod;
  bob::ScoreMaskOp mask;
};

Parsed parse(mlir::MLIRContext &ctx, const std::string &text) {
  Parsed p;
  p.module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  REQUIRE(p.module);
  p.module->walk([&](bob::ScoreModOp op) { p.mod = op; });
  p.module->walk([&](bob::ScoreMaskOp op) { p.mask = op; });
  if (p.mod) {
    auto differentiated = bob::differentiateScoreMod(p.mod);
    REQUIRE(mlir::succeeded(differentiated));
    p.mod = *differentiated;
  }
  REQUIRE(mlir::succeeded(mlir::verify(*p.module)));
  return p;
}

//===-- The oracle's modifications as a region ---------------------------------------------===//

// The region of an oracle::ScoreMod's f (ScoreModOps.h, HeadMod::score), captures in this
// order where present: softcap (f32), ALiBi slopes (memref<?xf32>, by h), table
// (memref<?x?xf32>, by (h, bucket)), bias (memref<?x?x?x?xf32>, by (b, h, q_idx, kv_idx),
// constant 0 where it broadcasts), then the offset M - N (index). The terms in the oracle's
// order: cap(T) + B + table + alibi.
struct ModRegion {
  std::string text;
  std::vector<Capture> captures;
  int softcap = -1, slopes = -1, table = -1, bias = -1;
};

// T5's bucket of relative position %r (oracle::relativeBucket, in the same float64 steps),
// as ops defining %bucket.
std::string bucketText(const Bucketing &bk) {
  const Index half = bk.bidirectional ? bk.buckets / 2 : bk.buckets, exact = half / 2;
  std::ostringstream os;
  os << "    %half = arith.constant " << half << " : index\n"
     << "    %exact = arith.constant " << exact << " : index\n"
     << "    %last = arith.constant " << half - 1 << " : index\n"
     << "    %exactF = arith.constant " << exact << ".0 : f32\n"
     << "    %farF = arith.constant " << bk.maxDistance << ".0 : f32\n"
     << "    %spanF = arith.constant " << half - exact << ".0 : f32\n";
  if (bk.bidirectional) {
    // Keys right of the query (r > 0) take the upper half; n = |r|.
    os << "    %right = arith.cmpi sgt, %r, %zero : index\n"
       << "    %base = arith.select %right, %half, %zero : index\n"
       << "    %n = math.absi %r : index\n";
  } else {
    os << "    %base = arith.constant 0 : index\n"
       << "    %minusR = arith.subi %zero, %r : index\n"
       << "    %n = arith.maxsi %minusR, %zero : index\n";
  }
  // log of max(n, exact): the same value where the logarithmic bucket is taken, and no
  // log(0) where it is not.
  os << "    %small = arith.cmpi slt, %n, %exact : index\n"
     << "    %nLog = arith.maxsi %n, %exact : index\n"
     << "    %n64 = arith.index_cast %nLog : index to i64\n"
     << "    %nF = arith.sitofp %n64 : i64 to f32\n"
     << "    %ratio = arith.divf %nF, %exactF : f32\n"
     << "    %logRatio = math.log %ratio : f32\n"
     << "    %range = arith.divf %farF, %exactF : f32\n"
     << "    %logRange = math.log %range : f32\n"
     << "    %frac = arith.divf %logRatio, %logRange : f32\n"
     << "    %scaled = arith.mulf %frac, %spanF : f32\n"
     << "    %steps64 = arith.fptosi %scaled : f32 to i64\n"
     << "    %steps = arith.index_cast %steps64 : i64 to index\n"
     << "    %large = arith.addi %exact, %steps : index\n"
     << "    %capped = arith.minsi %large, %last : index\n"
     << "    %within = arith.select %small, %n, %capped : index\n"
     << "    %bucket = arith.addi %base, %within : index\n";
  return os.str();
}

ModRegion scoreModText(const ScoreMod &mod, const Problem &p, Index heads) {
  ModRegion m;
  std::vector<std::string> types, names;
  auto capture = [&](const std::string &type, const std::string &name, Capture value) {
    types.push_back(type);
    names.push_back(name);
    m.captures.push_back(std::move(value));
    return static_cast<int>(m.captures.size()) - 1;
  };
  if (mod.softcap != 0.0)
    m.softcap = capture("f32", "%c", Capture::of(mod.softcap));
  if (!mod.alibiSlopes.empty())
    m.slopes = capture("memref<?xf32>", "%slopes", Capture::tensor({heads}, mod.alibiSlopes));
  if (!mod.table.empty())
    m.table = capture("memref<?x?xf32>", "%table",
                      Capture::tensor({heads, mod.bucketing.buckets}, mod.table));
  if (!mod.bias.data.empty())
    m.bias = capture("memref<?x?x?x?xf32>", "%bias",
                     Capture::tensor({mod.bias.batch, mod.bias.heads, mod.bias.rows, mod.bias.cols},
                                     mod.bias.data));
  capture("index", "%offset", Capture::of(static_cast<double>(p.causalOffset())));

  std::ostringstream os;
  std::string args, argTypes, blockArgs;
  for (size_t k = 0; k < types.size(); ++k) {
    args += (k ? ", " : "") + std::string("%arg") + std::to_string(k);
    argTypes += (k ? ", " : "") + types[k];
    blockArgs += ", " + names[k] + ": " + types[k];
  }
  std::string funcArgs;
  for (size_t k = 0; k < types.size(); ++k)
    funcArgs += (k ? ", " : "") + std::string("%arg") + std::to_string(k) + ": " + types[k];
  os << "func.func @mod(" << funcArgs << ") -> !bob.score_fn {\n"
     << "  %f = bob.score_mod captures(" << args << " : " << argTypes << ") {\n"
     << "  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index" << blockArgs << "):\n"
     << "    %zero = arith.constant 0 : index\n"
     << "    %diag = arith.addi %q, %offset : index\n"
     << "    %r = arith.subi %kv, %diag : index\n";
  std::string value = "%s";
  if (m.softcap >= 0) {
    os << "    %a = arith.divf %s, %c : f32\n"
       << "    %t = math.tanh %a : f32\n"
       << "    %capped_score = arith.mulf %c, %t : f32\n";
    value = "%capped_score";
  }
  if (m.bias >= 0) {
    os << "    %x = memref.load %bias[" << (mod.bias.batch == 1 ? "%zero" : "%b") << ", "
       << (mod.bias.heads == 1 ? "%zero" : "%h") << ", %q, %kv] : memref<?x?x?x?xf32>\n"
       << "    %with_bias = arith.addf " << value << ", %x : f32\n";
    value = "%with_bias";
  }
  if (m.table >= 0) {
    os << bucketText(mod.bucketing)
       << "    %y = memref.load %table[%h, %bucket] : memref<?x?xf32>\n"
       << "    %with_table = arith.addf " << value << ", %y : f32\n";
    value = "%with_table";
  }
  if (m.slopes >= 0) {
    os << "    %r64 = arith.index_cast %r : index to i64\n";
    if (mod.alibiForm == AlibiForm::Symmetric)
      os << "    %dist64 = math.absi %r64 : i64\n"
         << "    %dist = arith.sitofp %dist64 : i64 to f32\n"
         << "    %partial = arith.negf %dist : f32\n";
    else
      os << "    %partial = arith.sitofp %r64 : i64 to f32\n";
    os << "    %slope = memref.load %slopes[%h] : memref<?xf32>\n"
       << "    %alibi = arith.mulf %slope, %partial : f32\n"
       << "    %with_alibi = arith.addf " << value << ", %alibi : f32\n";
    value = "%with_alibi";
  }
  os << "    bob.yield " << value << " : f32\n"
     << "  }\n"
     << "  return %f : !bob.score_fn\n"
     << "}\n";
  m.text = os.str();
  return m;
}

//===-- Groups ------------------------------------------------------------------------------===//

// A partial's yield as coefficient sums by index tuple (a value: the empty tuple).
using Groups = std::map<std::vector<int64_t>, double>;

Groups groupsOf(const std::vector<double> &values, size_t size) {
  Groups g;
  for (size_t first = 0; first + size <= values.size(); first += size) {
    std::vector<int64_t> indices;
    for (size_t k = first + 1; k < first + size; ++k)
      indices.push_back(static_cast<int64_t>(values[k]));
    g[indices] += values[first];
  }
  return g;
}

size_t groupSize(bob::ScoreModOp op, const Key &key) {
  size_t size = 1;
  for (int64_t item : key)
    if (item != kScore)
      if (auto memref = mlir::dyn_cast<mlir::MemRefType>(op.getCaptures()[item].getType()))
        size += static_cast<size_t>(memref.getRank());
  return size;
}

// The region of `key` (the body for the empty key), or null when the op leaves it out.
mlir::Region *regionOf(bob::ScoreModOp op, const Key &key) {
  return key.empty() ? &op.getBody() : op.getPartial(key);
}

// Every tag the pass may write for `op`: F1, F2 and, by each f32 capture, alone, after the
// score and after each capture up to it.
std::vector<Key> candidateKeys(bob::ScoreModOp op) {
  std::vector<Key> keys = {{kScore}, {kScore, kScore}};
  const int64_t n = static_cast<int64_t>(op.getCaptures().size());
  for (int64_t p = 0; p < n; ++p) {
    if (!op.isDifferentiable(p))
      continue;
    keys.push_back({p});
    keys.push_back({kScore, p});
    for (int64_t q = 0; q <= p; ++q)
      if (op.isDifferentiable(q))
        keys.push_back({q, p});
  }
  return keys;
}

// A pair and the plain score to evaluate at.
struct Point {
  std::vector<double> leading; // score, b, h, q_idx, kv_idx
};

Groups evaluateGroups(bob::ScoreModOp op, const Key &key, const Point &at,
                      const std::vector<Capture> &captures, Reads *reads = nullptr) {
  mlir::Region *region = regionOf(op, key);
  if (!region)
    return {};
  return groupsOf(evaluate(*region, at.leading, captures, reads), groupSize(op, key));
}

double derivative(const std::function<double(double)> &f, double h) {
  return (8.0 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12.0 * h);
}

// Every partial the op may have (written, or left out as zero) against finite differences of
// the region it differentiates, at one point: the coefficient of each group of that region,
// moved along the score, a scalar capture, or each element of a memref capture the region
// read (and one it did not).
void checkAgainstDifferences(bob::ScoreModOp op, const Point &at, std::vector<Capture> captures,
                             double tol, std::mt19937_64 &rng) {
  for (const Key &key : candidateKeys(op)) {
    const Key from(key.begin(), key.end() - 1);
    const int64_t item = key.back();
    INFO("partial by (" << [&] {
      std::string s;
      for (int64_t k : key)
        s += (s.empty() ? "" : ", ") + (k == kScore ? std::string("score") : "capture " + std::to_string(k));
      return s;
    }() << ")");
    if (!regionOf(op, from)) {
      // The partial of a zero partial is zero.
      CHECK(op.getPartial(key) == nullptr);
      continue;
    }
    Reads reads;
    const Groups base = evaluateGroups(op, from, at, captures, &reads);
    const Groups partial = evaluateGroups(op, key, at, captures);

    // Where the item moves: the score, a scalar capture, or elements of a memref capture.
    std::vector<std::pair<double *, std::vector<int64_t>>> moves;
    Point moved = at;
    if (item == kScore) {
      moves.push_back({&moved.leading[0], {}});
    } else if (captures[item].shape.empty()) {
      moves.push_back({&captures[item].scalar, {}});
    } else {
      Capture &t = captures[item];
      std::vector<size_t> offsets = reads[static_cast<unsigned>(item)];
      offsets.push_back(std::uniform_int_distribution<size_t>(0, t.data.size() - 1)(rng));
      for (size_t offset : offsets) {
        std::vector<int64_t> indices(t.shape.size());
        size_t rest = offset;
        for (size_t d = t.shape.size(); d-- > 0;) {
          indices[d] = static_cast<int64_t>(rest % static_cast<size_t>(t.shape[d]));
          rest /= static_cast<size_t>(t.shape[d]);
        }
        moves.push_back({&t.data[offset], indices});
      }
    }
    for (auto &[value, site] : moves) {
      const double original = *value;
      const double h = 1e-3 * std::max(1.0, std::fabs(original));
      for (const auto &[indices, coefficient] : base) {
        const double fd = derivative(
            [&](double dx) {
              *value = original + dx;
              Groups g = evaluateGroups(op, from, moved, captures);
              *value = original;
              return g[indices];
            },
            h);
        std::vector<int64_t> full = indices;
        full.insert(full.end(), site.begin(), site.end());
        const auto found = partial.find(full);
        const double exact = found == partial.end() ? 0.0 : found->second;
        INFO("at group (" << indices.size() << " indices), site of " << site.size()
                          << " indices: exact " << exact << ", finite difference " << fd);
        CHECK(close(exact, fd, tol));
      }
    }
  }
}

Point randomPoint(const Problem &p, Index batch, Index heads, double scoreRange,
                  std::mt19937_64 &rng) {
  auto pick = [&](Index n) {
    return static_cast<double>(std::uniform_int_distribution<Index>(0, n - 1)(rng));
  };
  const double T = std::uniform_real_distribution<double>(-scoreRange, scoreRange)(rng);
  return {{T, pick(batch), pick(heads), pick(p.N), pick(p.M)}};
}

// The oracle's modifications: each alone and all together (ScoreModTestUtil.h's, without the
// sinks, which are no part of f, and the mask, a bob.score_mask), on short problems whose
// distances reach the test bucketing's logarithmic buckets; then T5's own bucketing (32
// buckets, distance 128) on long ones.
struct ModCase {
  std::string name;
  Problem p;
  ScoreMod mod;
};

std::vector<ModCase> modCases(std::mt19937_64 &rng) {
  std::vector<ModCase> cases;
  for (const Problem &p : {makeProblem(5, 7, 16, false), makeProblem(7, 4, 16, false)})
    for (Kind kind : kKinds) {
      if (kind == Kind::Sinks || kind == Kind::Mask)
        continue;
      ScoreMod mod = makeMod(kind, p, rng);
      mod.sinks.clear();
      mod.mask = HeadTensor();
      cases.push_back({std::string(name(kind)) + ", N = " + std::to_string(p.N) +
                           ", M = " + std::to_string(p.M),
                       p, mod});
    }
  for (const Problem &p : {makeProblem(64, 256, 16, false), makeProblem(256, 64, 16, false)})
    for (bool bidirectional : {true, false}) {
      ScoreMod mod;
      mod.bucketing = {32, 128, bidirectional};
      mod.table = randomVector(static_cast<size_t>(kHeads * 32), -1.0, 1.0, rng);
      mod.softcap = 5.0;
      cases.push_back({std::string("T5 table ") + (bidirectional ? "bidirectional" : "unidirectional") +
                           " with a cap, N = " + std::to_string(p.N) + ", M = " + std::to_string(p.M),
                       p, mod});
    }
  return cases;
}

} // namespace

TEST_CASE("score-mod regions: f, F1, F2 and the parameter partials equal the oracle's closed forms") {
  auto ctx = makeContext();
  std::mt19937_64 rng(20260101);
  for (const ModCase &c : modCases(rng)) {
    INFO(c.name);
    const ModRegion m = scoreModText(c.mod, c.p, kHeads);
    Parsed parsed = parse(*ctx, m.text);
    bob::ScoreModOp op = parsed.mod;

    // The tags written: F1, F2, each parameter's first partial, and the cap's second ones.
    std::vector<Key> expected = {{kScore}, {kScore, kScore}};
    if (m.softcap >= 0) {
      expected.push_back({kScore, m.softcap});
      expected.push_back({m.softcap, m.softcap});
    }
    for (int k : {m.softcap, m.slopes, m.table, m.bias})
      if (k >= 0)
        expected.push_back({k});
    std::sort(expected.begin(), expected.end());
    std::vector<Key> keys;
    for (auto &key : op.getPartialKeys())
      keys.emplace_back(key.begin(), key.end());
    CHECK(keys == expected);

    for (int n = 0; n < 100; ++n) {
      const Point at = randomPoint(c.p, kBatch, kHeads, 3.0, rng);
      const Index b = static_cast<Index>(at.leading[1]), h = static_cast<Index>(at.leading[2]),
                  i = static_cast<Index>(at.leading[3]), j = static_cast<Index>(at.leading[4]);
      const double T = at.leading[0];
      const detail::HeadMod hm{c.p, c.mod, b, h};
      const detail::ModScore s = hm.score(i, j, T);
      const detail::Cap cap = detail::softcap(c.mod.softcap, T);
      const Index r = hm.relative(i, j);
      INFO("b " << b << ", h " << h << ", i " << i << ", j " << j << ", T " << T);
      auto value = [&](const Key &key) {
        Groups g = evaluateGroups(op, key, at, m.captures);
        REQUIRE(g.size() == 1);
        return g.begin()->second;
      };
      CHECK(close(evaluate(op.getBody(), at.leading, m.captures)[0], s.S, kClosedTol));
      CHECK(close(value({kScore}), s.F1, kClosedTol));
      CHECK(close(value({kScore, kScore}), s.F2, kClosedTol));
      if (m.softcap >= 0) {
        CHECK(close(value({m.softcap}), cap.dValueDc, kClosedTol));
        CHECK(close(value({kScore, m.softcap}), cap.dD1Dc, kClosedTol));
        CHECK(close(value({m.softcap, m.softcap}), cap.d2ValueDc2, kClosedTol));
      }
      if (m.slopes >= 0) {
        // One group: df/dslope_h at slope h.
        const Groups g = evaluateGroups(op, {m.slopes}, at, m.captures);
        CHECK(g == Groups{{{h}, hm.alibiPartial(r)}});
      }
      if (m.table >= 0) {
        // One group: 1 at (h, bucket(r)).
        const Groups g = evaluateGroups(op, {m.table}, at, m.captures);
        REQUIRE(g.size() == 1);
        const std::vector<int64_t> &at2 = g.begin()->first;
        REQUIRE(at2.size() == 2);
        CHECK(g.begin()->second == 1.0);
        CHECK(static_cast<size_t>(at2[0] * c.mod.bucketing.buckets + at2[1]) == hm.tableIndex(r));
      }
      if (m.bias >= 0) {
        // One group: 1 at the bias element the pair reads (broadcast dimensions at 0).
        const Groups g = evaluateGroups(op, {m.bias}, at, m.captures);
        REQUIRE(g.size() == 1);
        CHECK(g.begin()->second == 1.0);
        CHECK(m.captures[static_cast<size_t>(m.bias)].offset(g.begin()->first) ==
              detail::pairIndex(c.mod.bias, b, h, i, j));
      }
    }
  }
}

TEST_CASE("score-mod regions: every partial equals finite differences of the region it differentiates") {
  auto ctx = makeContext();
  std::mt19937_64 rng(20260102);

  SECTION("the oracle's modifications") {
    for (const ModCase &c : modCases(rng)) {
      INFO(c.name);
      const ModRegion m = scoreModText(c.mod, c.p, kHeads);
      Parsed parsed = parse(*ctx, m.text);
      for (int n = 0; n < 10; ++n)
        checkAgainstDifferences(parsed.mod, randomPoint(c.p, kBatch, kHeads, 3.0, rng), m.captures,
                                kFdTol, rng);
    }
  }

  SECTION("every op with a derivative rule, away from the kinks") {
    // f = select(s > 0, min(max(l, s - w), 3 w), -|s - 1| w) - a^2 / (w + |s - 1|) with
    // a = s v[h], l = log(1 + exp(a / w)); w a scalar capture, v a vector by head.
    const std::string text = R"(
func.func @mod(%w0: f32, %v0: memref<?xf32>) -> !bob.score_fn {
  %f = bob.score_mod captures(%w0, %v0 : f32, memref<?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %w: f32, %v: memref<?xf32>):
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %three = arith.constant 3.0 : f32
    %vh = memref.load %v[%h] : memref<?xf32>
    %a = arith.mulf %s, %vh : f32
    %aw = arith.divf %a, %w : f32
    %e = math.exp %aw : f32
    %e1 = arith.addf %one, %e : f32
    %l = math.log %e1 : f32
    %sw = arith.subf %s, %w : f32
    %mx = arith.maximumf %l, %sw : f32
    %w3 = arith.mulf %three, %w : f32
    %mn = arith.minimumf %mx, %w3 : f32
    %s1 = arith.subf %s, %one : f32
    %abs = math.absf %s1 : f32
    %aw2 = arith.mulf %abs, %w : f32
    %neg = arith.negf %aw2 : f32
    %positive = arith.cmpf ogt, %s, %zero : f32
    %sel = arith.select %positive, %mn, %neg : f32
    %a2 = arith.mulf %a, %a : f32
    %den = arith.addf %w, %abs : f32
    %quot = arith.divf %a2, %den : f32
    %out = arith.subf %sel, %quot : f32
    bob.yield %out : f32
  }
  return %f : !bob.score_fn
}
)";
    Parsed parsed = parse(*ctx, text);
    std::uniform_real_distribution<double> u(-3.0, 3.0), positive(0.5, 2.0);
    int checked = 0;
    while (checked < 200) {
      const double s = u(rng), w = positive(rng);
      std::vector<double> v = {u(rng), u(rng), u(rng), u(rng)};
      const Index h = std::uniform_int_distribution<Index>(0, 3)(rng);
      const double a = s * v[static_cast<size_t>(h)], l = std::log1p(std::exp(a / w));
      const double mx = std::max(l, s - w);
      // Finite differences of a kink are not derivatives: keep 0.05 away from each.
      if (std::fabs(s) < 0.05 || std::fabs(s - 1) < 0.05 || std::fabs(l - (s - w)) < 0.05 ||
          std::fabs(mx - 3 * w) < 0.05)
        continue;
      ++checked;
      checkAgainstDifferences(parsed.mod, {{s, 0, static_cast<double>(h), 0, 0}},
                              {Capture::of(w), Capture::tensor({4}, v)}, kFdTol, rng);
    }
  }

  SECTION("random smooth compositions") {
    // Random straight-line bodies over the score, a scalar capture and two memref captures
    // (one read at two places), of add, sub, mul, neg, tanh, exp, log and divisions, kept
    // bounded (exp of tanh, log of 1 + x^2, division by 1 + x^2).
    for (int n = 0; n < 60; ++n) {
      std::ostringstream body;
      std::vector<std::string> pool = {"%s", "%c", "%v0", "%v1", "%m0"};
      int next = 0;
      auto fresh = [&] { return "%x" + std::to_string(next++); };
      auto operand = [&] {
        // Mostly recent values, so the composition is deep.
        const size_t size = pool.size();
        std::uniform_int_distribution<size_t> recent(size > 4 ? size - 4 : 0, size - 1), any(0, size - 1);
        return pool[std::bernoulli_distribution(0.7)(rng) ? recent(rng) : any(rng)];
      };
      for (int k = 0; k < 12; ++k) {
        const std::string x = operand(), y = operand(), r = fresh();
        switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
        case 0: body << "    " << r << " = arith.addf " << x << ", " << y << " : f32\n"; break;
        case 1: body << "    " << r << " = arith.subf " << x << ", " << y << " : f32\n"; break;
        case 2: body << "    " << r << " = arith.mulf " << x << ", " << y << " : f32\n"; break;
        case 3: body << "    " << r << " = arith.negf " << x << " : f32\n"; break;
        case 4: body << "    " << r << " = math.tanh " << x << " : f32\n"; break;
        case 5: {
          const std::string t = fresh();
          body << "    " << t << " = math.tanh " << x << " : f32\n"
               << "    " << r << " = math.exp " << t << " : f32\n";
          break;
        }
        case 6: {
          const std::string sq = fresh(), one = fresh();
          body << "    " << sq << " = arith.mulf " << x << ", " << x << " : f32\n"
               << "    " << one << " = arith.addf %one, " << sq << " : f32\n"
               << "    " << r << " = math.log " << one << " : f32\n";
          break;
        }
        default: {
          const std::string sq = fresh(), den = fresh();
          body << "    " << sq << " = arith.mulf " << y << ", " << y << " : f32\n"
               << "    " << den << " = arith.addf %one, " << sq << " : f32\n"
               << "    " << r << " = arith.divf " << x << ", " << den << " : f32\n";
          break;
        }
        }
        pool.push_back(r);
      }
      const std::string text = R"(
func.func @mod(%c0: f32, %v: memref<?xf32>, %m: memref<?x?xf32>) -> !bob.score_fn {
  %f = bob.score_mod captures(%c0, %v, %m : f32, memref<?xf32>, memref<?x?xf32>) {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32, %vec: memref<?xf32>, %mat: memref<?x?xf32>):
    %one = arith.constant 1.0 : f32
    %i1 = arith.constant 1 : index
    %i4 = arith.constant 4 : index
    %h1 = arith.addi %h, %i1 : index
    %next = arith.remsi %h1, %i4 : index
    %v0 = memref.load %vec[%h] : memref<?xf32>
    %v1 = memref.load %vec[%next] : memref<?xf32>
    %m0 = memref.load %mat[%h, %kv] : memref<?x?xf32>
)" + body.str() + "    bob.yield " + pool.back() + R"( : f32
  }
  return %f : !bob.score_fn
}
)";
      INFO(text);
      Parsed parsed = parse(*ctx, text);
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      const Index h = std::uniform_int_distribution<Index>(0, 3)(rng);
      const Index kv = std::uniform_int_distribution<Index>(0, 2)(rng);
      checkAgainstDifferences(
          parsed.mod, {{u(rng), 0, static_cast<double>(h), 0, static_cast<double>(kv)}},
          {Capture::of(u(rng)), Capture::tensor({4}, randomVector(4, -1, 1, rng)),
           Capture::tensor({4, 3}, randomVector(12, -1, 1, rng))},
          kFuzzFdTol, rng);
    }
  }
}

TEST_CASE("score-mod regions: F1 and F2 are constants exactly when f is the score plus terms independent of it") {
  auto ctx = makeContext();
  std::mt19937_64 rng(20260103);
  for (const ModCase &c : modCases(rng)) {
    INFO(c.name);
    Parsed parsed = parse(*ctx, scoreModText(c.mod, c.p, kHeads).text);
    bob::ScoreModOp op = parsed.mod;
    if (c.mod.softcap != 0.0) {
      CHECK_FALSE(op.getConstantPartial({kScore}).has_value());
      CHECK_FALSE(op.getConstantPartial({kScore, kScore}).has_value());
    } else {
      CHECK(op.getConstantPartial({kScore}) == 1.0);
      CHECK(op.getConstantPartial({kScore, kScore}) == 0.0);
    }
    // A parameter partial the pass left out reads as the constant 0.
    for (int64_t k = 0; k < static_cast<int64_t>(op.getCaptures().size()); ++k)
      if (op.isDifferentiable(k) && !op.getPartial({kScore, k}))
        CHECK(op.getConstantPartial({kScore, k}) == 0.0);
  }
  // Differentiating again changes nothing.
  Parsed parsed = parse(*ctx, scoreModText(makeMod(Kind::All, makeProblem(5, 7, 16, false), rng),
                                           makeProblem(5, 7, 16, false), kHeads)
                                  .text);
  std::string before, after;
  llvm::raw_string_ostream(before) << *parsed.module;
  auto again = bob::differentiateScoreMod(parsed.mod);
  REQUIRE(mlir::succeeded(again));
  CHECK(*again == parsed.mod);
  llvm::raw_string_ostream(after) << *parsed.module;
  CHECK(before == after);
}

TEST_CASE("score-mod regions: a mask region agrees with the oracle's visibility and masks' definitions") {
  auto ctx = makeContext();
  std::mt19937_64 rng(20260104);

  SECTION("a dense mask, broadcast over the batch") {
    const Problem p = makeProblem(5, 7, 16, false);
    ScoreMod mod;
    mod.mask = HeadTensor(1, kHeads, p.N, p.M);
    std::bernoulli_distribution keep(0.6);
    for (double &x : mod.mask.data)
      x = keep(rng) ? 1.0 : 0.0;
    Parsed parsed = parse(*ctx, R"(
func.func @mask(%flags0: memref<?x?x?x?xi8>) -> !bob.mask_fn {
  %m = bob.score_mask captures(%flags0 : memref<?x?x?x?xi8>) {
  ^bb0(%b: index, %h: index, %q: index, %kv: index, %flags: memref<?x?x?x?xi8>):
    %c0 = arith.constant 0 : index
    %x = memref.load %flags[%c0, %h, %q, %kv] : memref<?x?x?x?xi8>
    %zero = arith.constant 0 : i8
    %visible = arith.cmpi ne, %x, %zero : i8
    bob.yield %visible : i1
  }
  return %m : !bob.mask_fn
}
)");
    const std::vector<Capture> captures = {
        Capture::tensor({1, kHeads, p.N, p.M}, mod.mask.data)};
    for (Index b = 0; b < kBatch; ++b)
      for (Index h = 0; h < kHeads; ++h)
        for (Index i = 0; i < p.N; ++i)
          for (Index j = 0; j < p.M; ++j) {
            const double visible = evaluate(parsed.mask.getBody(),
                                            {double(b), double(h), double(i), double(j)}, captures)[0];
            CHECK(visible == (detail::HeadMod{p, mod, b, h}.visible(i, j) ? 1.0 : 0.0));
          }
  }

  SECTION("a document mask and a prefix-LM mask") {
    // Visible: same document (ids by batch and position, i32) and key not right of the query,
    // or the key in the prefix.
    Parsed parsed = parse(*ctx, R"(
func.func @mask(%docs0: memref<?x?xi32>, %prefix0: index) -> !bob.mask_fn {
  %m = bob.score_mask captures(%docs0, %prefix0 : memref<?x?xi32>, index) {
  ^bb0(%b: index, %h: index, %q: index, %kv: index, %docs: memref<?x?xi32>, %prefix: index):
    %dq = memref.load %docs[%b, %q] : memref<?x?xi32>
    %dk = memref.load %docs[%b, %kv] : memref<?x?xi32>
    %same = arith.cmpi eq, %dq, %dk : i32
    %past = arith.cmpi ule, %kv, %q : index
    %causal = arith.andi %same, %past : i1
    %inPrefix = arith.cmpi slt, %kv, %prefix : index
    %visible = arith.ori %causal, %inPrefix : i1
    bob.yield %visible : i1
  }
  return %m : !bob.mask_fn
}
)");
    const Index n = 12, prefix = 3;
    std::vector<double> docs = {0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 0, 1, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3};
    const std::vector<Capture> captures = {Capture::tensor({2, n}, docs),
                                           Capture::of(static_cast<double>(prefix))};
    for (Index b = 0; b < 2; ++b)
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j) {
          const bool expected = (docs[static_cast<size_t>(b * n + i)] == docs[static_cast<size_t>(b * n + j)] && j <= i) ||
                                j < prefix;
          CHECK(evaluate(parsed.mask.getBody(), {double(b), 0, double(i), double(j)}, captures)[0] ==
                (expected ? 1.0 : 0.0));
        }
  }
}
