// bob_numerics: where BoB's bf16 error comes from (docs/numerics.md). Emulates the GPU kernels'
// arithmetic on the CPU (BobEmulation.h) under a list of configurations that each turn one
// rounding off (ablation) or apply a candidate fix, and prints the relative L2 error of every
// output against the exact float64 result on the same bf16 inputs (oracle::compare, the measure
// of the GPU tests and of `flashbob run --check`).
//
//   bob_numerics --n 2048 --scale 0.5 --config gpu,no-qT1,center --buckets
//   bob_numerics --n 1048576 --rows 64 --config gpu     (the last 64 query rows of N = M = 1M,
//                                                        the inputs of `flashbob run --seed 1`)
#include "bench/numerics/BobEmulation.h"
#include "kernels/oracle/ErrorMeasure.h"

#include "llvm/Support/Parallel.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace flashbob;
using namespace flashbob::numerics;

namespace {

struct Named {
  std::string name;
  std::string what;
  std::function<void(Model&)> apply;
};

void allOperandsOff(Model& m) {
  m.fwdP = m.bwdDS = m.bwdP = m.qDS = m.qPdP = m.qP = m.qT1 = m.qGP = false;
  m.kvDS = m.kvSbar = m.kvDPbar = false;
}

const std::vector<Named>& configs() {
  static const std::vector<Named> list = {
      {"gpu", "the kernels' arithmetic (H200 model)", [](Model&) {}},
      {"acc-rn", "MMA sums rounded to nearest instead of truncated", [](Model& m) { m.acc = Acc::Float32; }},
      {"acc-exact", "accumulators in float64", [](Model& m) { m.acc = Acc::Exact; }},
      {"tc24", "MMA alignment keeps 24 bits", [](Model& m) { m.tcBits = 24; }},
      {"tc25", "MMA alignment keeps 25 bits", [](Model& m) { m.tcBits = 25; }},
      {"tc27", "MMA alignment keeps 27 bits", [](Model& m) { m.tcBits = 27; }},
      {"group8", "MMA fused sums of 8 products", [](Model& m) { m.tcGroup = 8; }},
      {"ew64", "elementwise math in float64", [](Model& m) { m.ew32 = false; }},
      {"exact-fwd", "backward and BoB read the exact O and L", [](Model& m) { m.exactFwd = true; }},
      {"no-O16", "O stored in float32", [](Model& m) { m.storeO16 = false; }},
      {"no-fwdP", "forward: P not rounded before P V", [](Model& m) { m.fwdP = false; }},
      {"no-qDS", "pass 1: dS not rounded", [](Model& m) { m.qDS = false; }},
      {"no-qPdP", "pass 1: P o dP not rounded", [](Model& m) { m.qPdP = false; }},
      {"no-qP", "pass 1: P not rounded", [](Model& m) { m.qP = false; }},
      {"no-qT1", "pass 1: G o dS + P o W not rounded", [](Model& m) { m.qT1 = false; }},
      {"no-qGP", "pass 1: G o P not rounded", [](Model& m) { m.qGP = false; }},
      {"no-q", "pass 1: no operand rounded",
       [](Model& m) { m.qDS = m.qPdP = m.qP = m.qT1 = m.qGP = false; }},
      {"no-kv", "pass 2: no operand rounded", [](Model& m) { m.kvDS = m.kvSbar = m.kvDPbar = false; }},
      {"no-out16", "outputs stored in float32", [](Model& m) { m.out16 = false; }},
      {"only-out16", "exact except the outputs' bf16 storage",
       [](Model& m) { allOperandsOff(m); m.acc = Acc::Exact; m.ew32 = false; m.exactFwd = true; }},
      {"only-fwd", "exact BoB arithmetic on the emulated forward's O, L (outputs bf16)",
       [](Model& m) { m.qDS = m.qPdP = m.qP = m.qT1 = m.qGP = m.kvDS = m.kvSbar = m.kvDPbar = false;
                      m.bwdDS = m.bwdP = false; m.acc = Acc::Exact; }},
      {"all-off", "no rounding at all (the tiled float64 model)",
       [](Model& m) { allOperandsOff(m); m.acc = Acc::Exact; m.ew32 = false; m.exactFwd = true;
                      m.out16 = false; m.storeO16 = false; }},
      {"center", "fix: pass 1 centers G o dS + P o W by running c, b estimates (every block)",
       [](Model& m) { m.fix = Fix::Center; }},
      {"lazy", "fix: the same, estimates updated when a row's mass doubles",
       [](Model& m) { m.fix = Fix::CenterLazy; }},
      {"center-gp", "fix for gdO: with centering, G o P centered too and P V accumulated",
       [](Model& m) { m.centerGP = true; }},
      {"center-known", "bound: pass 1 centered by the final c, b from the start",
       [](Model& m) { m.fix = Fix::CenterKnown; }},
      {"split", "fix: G o dS + P o W as bf16 hi + lo (one more product)",
       [](Model& m) { m.fix = Fix::SplitT1; }},
      {"x3-fwd", "pass 1 with two accumulators: X3 from the forward, X2 from an f32 dQ",
       [](Model& m) { m.fix = Fix::X3FromForward; }},
      {"cast-bf16", "float32 inputs: every operand rounded to bf16, outputs float32",
       [](Model& m) { m.operands = Operands::CastBf16; m.out16 = m.storeO16 = false; }},
      {"tf32", "float32 inputs: every operand rounded to tf32, outputs float32",
       [](Model& m) { m.operands = Operands::Tf32; m.out16 = m.storeO16 = false; }},
      {"bf16x3", "float32 inputs: every product as three bf16 products of hi + lo splits",
       [](Model& m) { m.operands = Operands::Bf16x3; m.out16 = m.storeO16 = false; }},
      {"tf32x3", "float32 inputs: every product as three tf32 products of hi + lo splits",
       [](Model& m) { m.operands = Operands::Tf32x3; m.out16 = m.storeO16 = false; }},
      {"lazy-acc-rn", "lazy centering and round-to-nearest MMA sums",
       [](Model& m) { m.fix = Fix::CenterLazy; m.acc = Acc::Float32; }},
      {"lazy-exact-fwd", "lazy centering on the exact O, L",
       [](Model& m) { m.fix = Fix::CenterLazy; m.exactFwd = true; }},
  };
  return list;
}

const char* kAblation =
    "gpu,acc-rn,acc-exact,ew64,exact-fwd,no-O16,no-fwdP,no-qDS,no-qPdP,no-qP,no-qT1,no-qGP,no-q,"
    "no-kv,no-out16,only-out16,only-fwd,all-off,center,lazy,split";

[[noreturn]] void usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "bob_numerics: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: bob_numerics [--n N] [--m M] [--d D] [--scale S] [--causal] [--rows R]\n"
               "         [--dist uniform|normal|uniform32|normal32] [--seed S] [--threads T] [--config A,B,...|--ablate]\n"
               "         [--buckets] [--given-fwd] [--tails R1,R2,...] [--list]\n"
               "  --rows R     only the last R query rows of the N x M problem (query-major outputs)\n"
               "  --buckets    gQ's error by the row's largest probability\n"
               "  --given-fwd  also compare with the exact result given the emulated O and L\n");
  std::exit(2);
}

struct Buckets {
  std::vector<double> edges{0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0000001};
};

void printBuckets(const Matrix& got, const Outputs& ref) {
  const Buckets b;
  const size_t nb = b.edges.size() - 1;
  std::vector<double> err(nb), sig(nb);
  std::vector<long> rows(nb);
  double errAll = 0, sigAll = 0;
  for (Index i = 0; i < got.rows; ++i) {
    double e = 0, s = 0;
    for (Index k = 0; k < got.cols; ++k) {
      const double diff = got(i, k) - ref.gQ(i, k);
      e += diff * diff;
      s += ref.gQ(i, k) * ref.gQ(i, k);
    }
    size_t k = 0;
    while (k + 1 < nb && ref.pmax[static_cast<size_t>(i)] >= b.edges[k + 1]) ++k;
    err[k] += e;
    sig[k] += s;
    ++rows[k];
    errAll += e;
    sigAll += s;
  }
  std::printf("    gQ by row max P:  bucket       rows  share of err^2  share of |gQ|^2  rel L2\n");
  for (size_t k = 0; k < nb; ++k) {
    if (!rows[k]) continue;
    std::printf("                      [%.2f,%.2f) %6ld  %14.3f  %15.3f  %.2e\n", b.edges[k],
                std::min(1.0, b.edges[k + 1]), rows[k], err[k] / errAll, sig[k] / sigAll,
                std::sqrt(err[k] / sig[k]));
  }
}

double rel(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.empty()) return NAN;
  oracle::ErrorStats s = oracle::compare(got, ref);
  return s.nonFinite ? INFINITY : s.relL2;
}

void printRow(const char* name, const Outputs& got, const Outputs& ref, bool keyMajor) {
  auto f = [](double v) {
    static char buf[8][16];
    static int k = 0;
    char* out = buf[k++ % 8];
    if (std::isnan(v)) std::snprintf(out, 16, "%8s", "-");
    else std::snprintf(out, 16, "%8.2e", v);
    return out;
  };
  std::printf("%-20s %s %s %s %s", name, f(rel(got.O.data, ref.O.data)),
              f(rel(got.dQ.data, ref.dQ.data)),
              f(keyMajor ? rel(got.dK.data, ref.dK.data) : NAN),
              f(keyMajor ? rel(got.dV.data, ref.dV.data) : NAN));
  std::printf(" %s %s %s %s %s %s\n", f(rel(got.gQ.data, ref.gQ.data)),
              f(keyMajor ? rel(got.gK.data, ref.gK.data) : NAN),
              f(keyMajor ? rel(got.gV.data, ref.gV.data) : NAN), f(rel(got.gdO.data, ref.gdO.data)),
              f(rel(got.c, ref.c)), f(rel(got.b, ref.b)));
}

}  // namespace

int main(int argc, char** argv) {
  Index N = 1024, M = -1, d = 64, rows = 0;
  double scale = 0;
  bool causal = false, buckets = false, givenFwd = false;
  std::vector<Index> tails;  // also report gQ, gdO over the last R rows only
  std::string dist = "uniform", configList = "gpu";
  unsigned long long seed = 1;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--n") N = std::stoll(next());
      else if (a == "--m") M = std::stoll(next());
      else if (a == "--d") d = std::stoll(next());
      else if (a == "--scale") scale = std::stod(next());
      else if (a == "--rows") rows = std::stoll(next());
      else if (a == "--dist") dist = next();
      else if (a == "--seed") seed = std::stoull(next());
      else if (a == "--threads") threads = std::stoi(next());
      else if (a == "--config") configList = next();
      else if (a == "--ablate") configList = kAblation;
      else if (a == "--causal") causal = true;
      else if (a == "--tails") {
        std::stringstream ss(next());
        std::string t;
        while (std::getline(ss, t, ',')) tails.push_back(std::stoll(t));
      }
      else if (a == "--buckets") buckets = true;
      else if (a == "--given-fwd") givenFwd = true;
      else if (a == "--list") {
        for (const Named& c : configs()) std::printf("%-15s %s\n", c.name.c_str(), c.what.c_str());
        std::printf("%-15s %s\n%-15s %s\n%-15s %s\n", "lazy:F", "lazy centering, mass factor F",
                    "flush:T[:MASK]", "accumulators added to a float32 copy every T blocks (MASK: Model::flushMask)",
                    "A+B", "configs A and B together");
        return 0;
      } else usage("unknown argument " + a);
    } catch (const std::logic_error&) {
      usage("bad value for " + a);
    }
  }
  if (M < 0) M = N;
  if (N <= 0 || M <= 0 || d <= 0 || rows < 0 || rows > N || threads <= 0) usage("bad sizes");
  // Every parallel loop (the emulation's blocks, the float64 oracle's rows) runs on LLVM's pool.
  llvm::parallel::strategy = llvm::hardware_concurrency(static_cast<unsigned>(threads));
  std::vector<const Named*> chosen;
  try {
    std::stringstream ss(configList);
    std::string name;
    while (std::getline(ss, name, ',')) {
      // A config is one name or several joined by '+', applied in order; lazy:F is lazy
      // centering with mass factor F, flush:T flushes the accumulators every T blocks.
      std::vector<std::function<void(Model&)>> parts;
      std::stringstream parts_ss(name);
      std::string part;
      while (std::getline(parts_ss, part, '+')) {
        const Named* found = nullptr;
        for (const Named& c : configs())
          if (c.name == part) found = &c;
        if (found) {
          parts.push_back(found->apply);
        } else if (part.rfind("lazy:", 0) == 0) {
          const double f = std::stod(part.substr(5));
          parts.push_back([f](Model& m) { m.fix = Fix::CenterLazy; m.lazyFactor = f; });
        } else if (part.rfind("flush:", 0) == 0) {  // flush:T or flush:T:MASK
          const std::string rest = part.substr(6);
          const int t = std::stoi(rest);
          const size_t colon = rest.find(':');
          const unsigned mask = colon == std::string::npos ? ~0u : std::stoul(rest.substr(colon + 1));
          parts.push_back([t, mask](Model& m) { m.flushEvery = t; m.flushMask = mask; });
        } else {
          usage("unknown config " + part + " (--list shows them)");
        }
      }
      static std::vector<std::unique_ptr<Named>> made;
      made.push_back(std::make_unique<Named>(Named{name, name, [parts](Model& m) {
                                                     for (const auto& f : parts) f(m);
                                                   }}));
      chosen.push_back(made.back().get());
    }
  } catch (const std::logic_error&) {
    usage("bad config " + configList);
  }

  // A sub-problem keeps the last `rows` query rows and every key (same causal alignment).
  const Index firstRow = rows ? N - rows : 0;
  Problem p = oracle::makeProblem(rows ? rows : N, M, d, causal);
  if (scale != 0) p.scale = scale;
  const bool keyMajor = rows == 0;
  const Inputs in = makeInputs(p, dist, seed, firstRow);
  Tiles tiles = Tiles::forHeadDim(d);
  if (rows && threads > 1) {
    // Query rows are independent in the query-major kernels: smaller query blocks change no
    // result, and give every thread some.
    const Index bm = std::max<Index>(1, (rows + threads - 1) / threads);
    tiles.fwdM = std::min(tiles.fwdM, bm);
    tiles.bwdQM = std::min(tiles.bwdQM, bm);
    tiles.bobQM = std::min(tiles.bobQM, bm);
  }

  auto t0 = std::chrono::steady_clock::now();
  const Outputs ref = exactRows(p, in, keyMajor, nullptr, nullptr, threads);
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double pm = 0, pm90 = 0;
  for (double v : ref.pmax) {
    pm += v;
    pm90 += v >= 0.9;
  }
  std::printf("N = %lld%s, M = %lld, d = %lld, scale = %g, %s, %s inputs (seed %llu); "
              "mean row max P %.3f, rows with max P >= 0.9: %.1f%%; reference %.1f s\n",
              static_cast<long long>(N), rows ? (" (last " + std::to_string(rows) + " rows)").c_str() : "",
              static_cast<long long>(M), static_cast<long long>(d), p.scale,
              causal ? "causal" : "full", dist.c_str(), seed, pm / p.N, 100.0 * pm90 / p.N, seconds());
  std::printf("relative L2 error against float64 on the same %s inputs\n",
              isFloat32Dist(dist) ? "float32" : "bf16");
  std::printf("%-20s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "config", "O", "dQ", "dK", "dV",
              "gQ", "gK", "gV", "gdO", "c", "b");
  std::fflush(stdout);
  for (const Named* c : chosen) {
    Model m;
    c->apply(m);
    t0 = std::chrono::steady_clock::now();
    const Outputs got = emulate(p, in, m, tiles, keyMajor, threads);
    printRow(c->name.c_str(), got, ref, keyMajor);
    if (givenFwd) {
      // The exact result given the emulated forward's stored O and L: the error BoB adds itself.
      const Outputs refGiven = exactRows(p, in, keyMajor, &got.Oread, &got.Lread, threads);
      printRow(("  given O,L"), got, refGiven, keyMajor);
    }
    if (buckets) printBuckets(got.gQ, ref);
    for (Index r : tails) {
      if (r <= 0 || r > p.N) continue;
      auto tail = [&](const Matrix& m) {
        return std::vector<double>(m.data.end() - r * p.d, m.data.end());
      };
      std::printf("    last %lld rows: gQ %.2e, gdO %.2e\n", static_cast<long long>(r),
                  rel(tail(got.gQ), tail(ref.gQ)), rel(tail(got.gdO), tail(ref.gdO)));
    }
    if (got.rowSteps)
      std::printf("    estimates changed in %.2f%% of (row, key block) steps, %.2f%% of (warp, key "
                  "block) steps\n", 100.0 * got.rowUpdates / got.rowSteps,
                  100.0 * got.warpUpdates / got.warpSteps);
    std::fflush(stdout);
    std::fprintf(stderr, "  (%s: %.1f s)\n", c->name.c_str(), seconds());
  }
  return 0;
}
