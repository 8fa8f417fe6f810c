// A CPU emulation of the GPU kernels' arithmetic (forward, first backward, BoB passes 1 and 2),
// used to find where BoB's bf16 error comes from (docs/numerics.md). The kernels' tile loops
// are run in float64, and the GPU's roundings are applied exactly where the kernels apply them:
//   * every product operand that the kernels form in registers (P, dS, P o dP, G o dS + P o W,
//     G o P, dPbar, Sbar) is rounded to bf16 (round to nearest even) before its product;
//   * elementwise math (exp2, the tiles, row sums, the epilogues) is done in float32;
//   * tensor-core accumulation follows a model of the H100/H200 MMA unit (below);
//   * O is stored as bf16 and L as float32 between the kernels; the outputs are stored as bf16.
// Each rounding has a switch (Model), so its share of the error can be measured by turning it
// off (ablation). With every switch off and exact accumulation the emulation is the tiled
// float64 model of kernels/oracle (test/unit/NumericsTest.cpp checks it against dense::bob).
//
// The MMA model (Acc::TensorCore): an mma with k = 16 adds 16 exact products (bf16 x bf16 is
// exact) and the fp32 accumulator C in one fused sum: every addend is aligned to the largest
// one's exponent and truncated to `tcBits` significant bits below it, the sum is exact, and the
// result goes back to float32 rounded toward zero (truncated). NVIDIA's MMA units truncate
// instead of rounding to nearest (Fasi et al. 2021 for V100/A100; for sm_90 the probes of
// github.com/huweim/emulation_sys report 25 fraction bits and RZ). tcBits = 26 (25 fraction
// bits, two more than float32 keeps) reproduces the H200's measured gQ error at N = 1M
// (3.44e-3; docs/numerics.md). Acc::Float32 rounds each fused sum to nearest instead;
// Acc::Exact keeps the accumulators in float64.
#pragma once

#include "kernels/oracle/Oracle.h"

#include <string>
#include <vector>

namespace flashbob::numerics {

using oracle::Index;
using oracle::Matrix;
using oracle::Problem;

enum class Acc { Exact, Float32, TensorCore };

// What a product's operands are on the tensor cores, for float32 inputs (docs/numerics.md,
// "Float32 inputs"). Bf16: as today, the inputs are bf16 and the operands formed in registers
// are rounded where the Model's switches say. The others round every operand of every product
// (inputs and register tiles alike) as the tensor cores would take it:
enum class Operands {
  Bf16,
  CastBf16, // each operand rounded to bf16: float32 inputs cast to bf16 for today's kernels
  Tf32,     // each operand rounded to tf32 (11 significant bits): one tf32 product
  Bf16x3,   // each operand split into bf16 hi + lo (hi = bf16(x), lo = bf16(x - hi)) and the
            // product made of three bf16 products, lo hi + hi lo + hi hi (lo lo dropped)
  Tf32x3,   // the same with tf32 pieces (3xTF32)
};

// How pass 1 forms the operand that X1 multiplies by K (docs/numerics.md, "The fix").
enum class Fix {
  None,        // the kernel today: G o dS + P o W, rounded to bf16
  Center,      // G o dS + P o W - c^ (P o dP) - b^ P with running estimates c^, b^ of the row
               // scalars, updated at every key block (X1 corrected by the change times X2, X3)
  CenterLazy,  // the same, but a row's estimates are updated only when its probability mass
               // seen so far has grown by `lazyFactor` since the last update
  SplitT1,     // G o dS + P o W as a bf16 hi + lo pair: one more product per key block
  CenterKnown, // centered by the final c, b from the start (a bound: not a kernel)
  X3FromForward, // pass 1 keeps two accumulators, X1 and X4 (a register plan for bob_q): X3 = P K
               // comes from the forward (a second float32 accumulator beside P V, the same
               // bf16 P), dQ from the first backward kept in float32, and
               // gQ = s X1 - c o dQ - s b' o X3 with b' = rowsum(G o dS + P o W) (X2 = dQ / s +
               // D o X3 substituted: the same value in exact arithmetic)
};

struct Model {
  Acc acc = Acc::TensorCore;
  Operands operands = Operands::Bf16;
  int tcBits = 26;   // significant bits kept when aligning the addends of one fused MMA sum
  int tcGroup = 16;  // products per fused sum (k of one mma instruction)
  bool ew32 = true;  // elementwise math in float32 (false: float64)
  // Round to bf16 before the product (true = what the GPU does):
  bool fwdP = true;                  // forward: P before P V
  bool bwdDS = true, bwdP = true;    // first backward: dS before dS K, dS^T Q; P before P^T dO
  bool qDS = true;                   // pass 1: dS before dS uK
  bool qPdP = true;                  //         P o dP before (P o dP) K   (X2)
  bool qP = true;                    //         P before P K, P uV         (X3, X4)
  bool qT1 = true;                   //         G o dS + P o W before its K product (X1)
  bool qGP = true;                   //         G o P before (G o P) V    (X4)
  bool kvDS = true, kvSbar = true, kvDPbar = true;  // pass 2: dS^T, Sbar^T, dPbar^T
  bool storeO16 = true;  // O stored as bf16 (the backward kernels read it)
  bool exactFwd = false; // backward and BoB read the exact O and L instead of the emulated ones
  bool out16 = true;     // outputs stored as bf16
  Fix fix = Fix::None;
  double lazyFactor = 2.0;
  // With Fix::Center*: X4 takes (G - c^) o P instead of G o P, and pass 1 accumulates P V
  // (one more product per key block) so that gdO = X4 - (c - c^) P V needs no stored O.
  bool centerGP = false;
  // Every kernel adds its MMA accumulators to a float32 copy (round to nearest) every
  // flushEvery blocks of its sweep, the accumulators restarting from zero (0: never).
  int flushEvery = 0;
  // Which accumulators flush (bits): 1 X1, 2 X2, 4 X3, 8 X4 (pass 1), 16 gK and gV (pass 2),
  // 32 O (forward), 64 dQ, 128 dK and dV.
  unsigned flushMask = ~0u;
};

// Block sizes of the kernels (the sm_90a defaults of kernels/TileTable.cpp for d = 64).
struct Tiles {
  Index fwdM = 64, fwdN = 128;
  Index bwdQM = 64, bwdQN = 128;   // bwd_q: query rows x key block
  Index bwdKVN = 64, bwdKVM = 64;  // bwd_kv: key rows x query block
  Index bobQM = 64, bobQN = 32;    // bob_q
  Index bobKVN = 64, bobKVM = 64;  // bob_kv
  static Tiles forHeadDim(Index d);
};

struct Inputs {
  Matrix Q, K, V, dO, uQ, uK, uV;
};

// Everything the kernels produce (key-major outputs empty unless asked for).
struct Outputs {
  Matrix O;
  std::vector<double> L;
  Matrix Oread;                // the O and L the backward kernels read (emulate only): the
  std::vector<double> Lread;   // forward's, or the exact ones with Model::exactFwd
  Matrix dQ, dK, dV;
  Matrix x3Forward, dQ32;      // Fix::X3FromForward: the forward's P K and dQ, both float32
  std::vector<double> D;
  Matrix gQ, gK, gV, gdO;
  std::vector<double> c, b;
  std::vector<double> pmax;  // reference only: the largest probability of each query row
  // Fix::Center*: (row, key block) steps of pass 1, and those in which a row's estimates
  // changed; (16-row warp, key block) steps in which any of the warp's rows changed.
  long long rowSteps = 0, rowUpdates = 0, warpSteps = 0, warpUpdates = 0;
};

// Rounding helpers (exposed for the test).
double toBf16(double x);  // round to nearest even, 8 significant bits
double toTf32(double x);  // round to nearest even, 11 significant bits
double toF32(double x);
double truncF32(double x);  // float32, rounded toward zero

// One fused MMA step as modelled: returns C + sum a[i] b[i] (i < n <= tcGroup).
double mmaStep(const Model& m, double C, const double* a, const double* b, int n);

// The GPU's arithmetic: forward, first backward, BoB. keyMajor: also the key-major kernels
// (dK, dV, gK, gV), which need every query row of the head.
Outputs emulate(const Problem& p, const Inputs& in, const Model& m, const Tiles& t,
                bool keyMajor, int threads = 1);

// The exact float64 result, one query row at a time (O(M) memory, so it scales to M = 1M; it is
// checked against oracle::dense in the test). If O and L are given, the backward and BoB use
// them (D = rowsum(dO o O), P = exp(S - L)) instead of the exact forward: the result is then
// "exact given the forward's stored outputs".
Outputs exactRows(const Problem& p, const Inputs& in, bool keyMajor, const Matrix* O = nullptr,
                  const std::vector<double>* L = nullptr, int threads = 1);

// Inputs as `flashbob run` generates them (uniform on [-sqrt 3, sqrt 3), rounded to bf16; seed,
// tensor, index as tools/flashbob/ProblemBuffers.cpp), or normal(0, 1) rounded to bf16; with
// the suffix 32 (uniform32, normal32) rounded to float32 only (isFloat32Dist). For a
// sub-problem (the CLI's --check-rows), `firstRow` is the first query row taken of `nTotal`.
Inputs makeInputs(const Problem& p, const std::string& dist, unsigned long long seed,
                  Index firstRow = 0);
bool isFloat32Dist(const std::string& dist);

}  // namespace flashbob::numerics
