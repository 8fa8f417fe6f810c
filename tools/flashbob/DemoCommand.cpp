// `flashbob demo`: the README's main job.
//
// 1. The float64 oracle on a small problem: the tiled two-pass BoB schedule (the executable spec
//    of the GPU kernels) against the dense reference.
// 2. On a GPU: compiles the kernels (JIT), runs BoB on a default problem, checks it against the
//    oracle and prints the errors and the time. Without a GPU: says so, compiles the BoB kernels
//    for sm_90a anyway and shows where their PTX went and a summary of each.
#include "jit/Compile.h"
#include "jit/Launch.h"
#include "jit/Validate.h"
#include "kernels/Kernels.h"
#include "kernels/oracle/ErrorMeasure.h"
#include "kernels/oracle/Oracle.h"
#include "runtime/driver/CudaDriver.h"
#include "support/Knobs.h"
#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/IntegerOption.h"
#include "tools/flashbob/OptionCategories.h"
#include "tools/flashbob/OutputFile.h"

#include "kernels/TileTable.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

namespace flashbob::tool {

llvm::cl::SubCommand demoCommand("demo", "Run exact BoB on a default problem and check it");

namespace {
IntegerOpt<int64_t> seqQ("seq-q", llvm::cl::desc("Queries N"), llvm::cl::init(200),
                            llvm::cl::sub(demoCommand), llvm::cl::cat(demoCategory));
IntegerOpt<int64_t> seqK("seq-k", llvm::cl::desc("Keys M"), llvm::cl::init(232),
                            llvm::cl::sub(demoCommand), llvm::cl::cat(demoCategory));
IntegerOpt<int64_t> headDim("head-dim", llvm::cl::desc("Head dimension d"), llvm::cl::init(64),
                               llvm::cl::sub(demoCommand), llvm::cl::cat(demoCategory));
llvm::cl::opt<bool> causal("causal", llvm::cl::desc("Causal mask (bottom-right aligned)"),
                           llvm::cl::init(true), llvm::cl::sub(demoCommand),
                           llvm::cl::cat(demoCategory));
IntegerOpt<int64_t> blockM("block-m", llvm::cl::desc("Query tile of the CPU tiled model"),
                              llvm::cl::init(64), llvm::cl::sub(demoCommand),
                              llvm::cl::cat(demoCategory));
IntegerOpt<int64_t> blockN("block-n", llvm::cl::desc("Key tile of the CPU tiled model"),
                              llvm::cl::init(48), llvm::cl::sub(demoCommand),
                              llvm::cl::cat(demoCategory));
llvm::cl::opt<bool> cpuOnly("cpu-only", llvm::cl::desc("Skip the GPU part"),
                            llvm::cl::sub(demoCommand), llvm::cl::cat(demoCategory));
IntegerOpt<int64_t> gpuSeq("gpu-seq", llvm::cl::desc("Sequence length of the GPU problem"),
                              llvm::cl::init(4096), llvm::cl::sub(demoCommand),
                              llvm::cl::cat(demoCategory));

using oracle::Matrix;

// 2^24 pairs: 128 MiB per dense float64 N x M matrix, a few seconds of CPU.
constexpr int64_t kMaxCpuPairs = int64_t(1) << 24;

Matrix randomMatrix(oracle::Index rows, oracle::Index cols, std::mt19937_64 &rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Matrix m(rows, cols);
  for (double &x : m.data)
    x = normal(rng);
  return m;
}

} // namespace

namespace {
// Without a GPU: compile the two BoB passes for sm_90a and show what came out and where.
bool showKernelsWithoutGpu() {
  llvm::SmallString<128> dir;
  if (std::string fromKnob = support::knobs::dumpDir(); !fromKnob.empty())
    dir = fromKnob;
  else
    llvm::sys::path::system_temp_directory(true, dir), llvm::sys::path::append(dir, "flashbob-demo");
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    llvm::outs() << "cannot create the dump directory " << dir << ": " << ec.message() << "\n";
    return false;
  }
  llvm::outs() << "generated kernels (sm_90a, bf16, d=64, causal), written to " << dir << ":\n";
  bool ok = true;
  for (bob::KernelKind kind : {bob::KernelKind::bob_q, bob::KernelKind::bob_kv}) {
    compiler::KernelSpec spec;
    spec.kind = kind;
    spec.causal = true;
    spec.tiles = kernels::defaultTiles(kind, spec.headDim, spec.arch);
    auto a = jit::compileKernel(spec, /*assemble=*/true);
    if (!a) {
      llvm::outs() << "  " << spec.name() << ": " << llvm::toString(a.takeError()) << "\n";
      ok = false;
      continue;
    }
    std::string path = (dir + "/" + spec.name() + ".ptx").str();
    if (llvm::Error e = writeOutput(path, [&](llvm::raw_ostream &os) { os << a->ptx; })) {
      llvm::outs() << "  " << spec.name() << ": " << llvm::toString(std::move(e)) << "\n";
      ok = false;
      continue;
    }
    llvm::outs() << llvm::formatv("  {0}: {1} threads, {2} B shared, {3} registers, {4} B spill, "
                                  "{5} KiB PTX -> {6}\n",
                                  a->entry, a->threads, a->sharedBytes, a->registers, a->spillBytes,
                                  a->ptx.size() / 1024, path);
  }
  return ok;
}

bool runGpuPart() {
  llvm::outs() << "\n[2] GPU: exact BoB through the generated kernels\n";
  auto driver = runtime::CudaDriver::get();
  if (!driver) {
    llvm::outs() << "no GPU: " << llvm::toString(driver.takeError()) << "\n";
    return showKernelsWithoutGpu();
  }
  RunOptions o;
  o.op = Op::bob;
  o.problem.batch = 1;
  o.problem.heads = 4;
  o.problem.seqQ = o.problem.seqK = gpuSeq;
  o.problem.headDim = 64;
  o.problem.causal = true;
  o.check = true;
  auto report = runAttention(o, llvm::outs());
  if (!report) {
    llvm::outs() << "GPU run failed: " << llvm::toString(report.takeError()) << "\n";
    return false;
  }
  return report->passed;
}
} // namespace

int runDemo() {
  // Checked with the CPU flags, before the CPU part runs and the driver is looked for.
  if (gpuSeq <= 0 || gpuSeq > jit::kMaxSequence) {
    llvm::errs() << llvm::formatv("flashbob demo: --gpu-seq: must be in [1, {0}], got {1}\n",
                                  jit::kMaxSequence, int64_t(gpuSeq));
    return kExitUsage;
  }
  // The CPU part holds dense N x M float64 matrices (a dozen of them): bound N * M so that a
  // large --seq-q is refused here instead of aborting in an allocation.
  int64_t pairs = 0;
  if (seqQ > 0 && seqK > 0 &&
      (__builtin_mul_overflow(int64_t(seqQ), int64_t(seqK), &pairs) || pairs > kMaxCpuPairs)) {
    llvm::errs() << llvm::formatv("flashbob demo: --seq-q {0} --seq-k {1}: too large for the CPU "
                                  "oracle's dense matrices (N * M at most {2}); the GPU part's "
                                  "length is --gpu-seq\n",
                                  int64_t(seqQ), int64_t(seqK), kMaxCpuPairs);
    return kExitUsage;
  }
  oracle::Problem p;
  oracle::Tiling tiling{blockM, blockN};
  try {
    p = oracle::makeProblem(seqQ, seqK, headDim, causal);
    oracle::validate(p);
    oracle::validate(tiling);
  } catch (const std::invalid_argument &e) {
    llvm::errs() << "flashbob demo: " << e.what() << "\n";
    return kExitUsage;
  }

  llvm::outs() << "FlashBoB demo: exact backward-over-backward of softmax attention\n";
  llvm::outs() << "\n[1] CPU: tiled two-pass model vs dense float64 oracle\n";
  llvm::outs() << llvm::formatv("problem: N={0} M={1} d={2} causal={3} scale={4:F6}; "
                                "tiled model block_m={5} block_n={6}\n",
                                p.N, p.M, p.d, p.causal ? "yes" : "no", p.scale, tiling.block_m,
                                tiling.block_n);

  std::mt19937_64 rng(20261130);
  Matrix Q = randomMatrix(p.N, p.d, rng), K = randomMatrix(p.M, p.d, rng),
         V = randomMatrix(p.M, p.d, rng), dO = randomMatrix(p.N, p.d, rng),
         uQ = randomMatrix(p.N, p.d, rng), uK = randomMatrix(p.M, p.d, rng),
         uV = randomMatrix(p.M, p.d, rng);

  auto t0 = std::chrono::steady_clock::now();
  oracle::ForwardResult fwdDense = oracle::dense::forward(p, Q, K, V);
  oracle::BackwardResult bwdDense = oracle::dense::backward(p, Q, K, V, dO);
  oracle::BobResult bobDense = oracle::dense::bob(p, Q, K, V, dO, uQ, uK, uV);
  auto t1 = std::chrono::steady_clock::now();
  oracle::ForwardResult fwdTiled = oracle::tiled::forward(p, tiling, Q, K, V);
  oracle::BackwardResult bwdTiled = oracle::tiled::backward(p, tiling, Q, K, V, dO, fwdTiled);
  oracle::BobResult bobTiled =
      oracle::tiled::bob(p, tiling, Q, K, V, dO, uQ, uK, uV, fwdTiled, bwdTiled);
  auto t2 = std::chrono::steady_clock::now();

  struct Row {
    const char *name;
    const std::vector<double> &tiled, &dense;
  };
  const Row rows[] = {
      {"O", fwdTiled.O.data, fwdDense.O.data},       {"L", fwdTiled.L, fwdDense.L},
      {"dQ", bwdTiled.dQ.data, bwdDense.dQ.data},    {"dK", bwdTiled.dK.data, bwdDense.dK.data},
      {"dV", bwdTiled.dV.data, bwdDense.dV.data},    {"D", bwdTiled.D, bwdDense.D},
      {"gQ", bobTiled.gQ.data, bobDense.gQ.data},    {"gK", bobTiled.gK.data, bobDense.gK.data},
      {"gV", bobTiled.gV.data, bobDense.gV.data},    {"gdO", bobTiled.gdO.data, bobDense.gdO.data},
      {"c", bobTiled.c, bobDense.c},                 {"b", bobTiled.b, bobDense.b},
  };
  const double tolerance = 1e-12;
  bool ok = true;
  llvm::outs() << "output  rel. L2 error (tiled two-pass vs dense float64)\n";
  for (const Row &r : rows) {
    oracle::ErrorStats stats = oracle::compare(r.tiled, r.dense);
    double err = stats.nonFinite ? std::numeric_limits<double>::infinity() : stats.relL2;
    ok &= err <= tolerance;
    llvm::outs() << llvm::formatv("{0,-6}  {1:E2}\n", r.name, err);
  }
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  llvm::outs() << llvm::formatv("time: dense {0:F1} ms, tiled {1:F1} ms (CPU, float64)\n",
                                ms(t0, t1), ms(t1, t2));
  llvm::outs() << (ok ? "oracle: PASS (every output within 1e-12 of the dense oracle)\n"
                      : "oracle: FAIL (an output is off by more than 1e-12)\n");
  if (!cpuOnly)
    ok &= runGpuPart();
  llvm::outs() << (ok ? "demo: PASS\n" : "demo: FAIL\n");
  return ok ? kExitOk : kExitFailure;
}

} // namespace flashbob::tool
