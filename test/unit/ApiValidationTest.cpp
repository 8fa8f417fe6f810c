// The C++ API rejects bad arguments before touching the GPU (these run without one), with a
// message that names the argument.
#include "api/Attention.h"
#include "jit/HeadDims.h"
#include "jit/Overlap.h"
#include "support/Errors.h"

#include <catch2/catch.hpp>

using namespace flashbob;

namespace {
std::string forwardError(const AttentionProblem &p, Tensor q, Tensor k, Tensor v, Tensor o,
                         RowVector lse) {
  llvm::Error e = attentionForward(p, q, k, v, o, lse);
  return e ? llvm::toString(std::move(e)) : std::string("no error");
}

std::string messageOf(llvm::Error e) { return e ? llvm::toString(std::move(e)) : "no error"; }

// The argument an InvalidArgumentError names, or what the error was instead.
std::string invalidArgumentOf(llvm::Error e) {
  std::string argument = "no error";
  llvm::Error rest = llvm::handleErrors(std::move(e), [&](const support::InvalidArgumentError &a) {
    argument = a.argument();
  });
  return rest ? "not an InvalidArgumentError: " + llvm::toString(std::move(rest)) : argument;
}
} // namespace

TEST_CASE("API validation names the bad argument", "[api]") {
  AttentionProblem p{/*batch=*/1, /*heads=*/2, /*seqQ=*/100, /*seqK=*/80, /*headDim=*/64};
  const CUdeviceptr base = 0x10000; // never dereferenced: validation fails first
  // q, k, v and o 1 MiB apart (an output may not share memory), lse after them.
  Tensor q = p.contiguous(base, p.seqQ), k = p.contiguous(base + (1 << 20), p.seqK),
         o = p.contiguous(base + (2 << 20), p.seqQ);
  RowVector lse{base + (3 << 20)};

  // Valid: the call gets as far as the driver, which does not exist here.
  CHECK(invalidArgumentOf(attentionForward(p, q, k, k, o, lse)).rfind("not an InvalidArgument", 0) ==
        0);

  AttentionProblem bad = p;
  bad.seqQ = 0;
  CHECK_THAT(forwardError(bad, q, k, k, o, lse), Catch::Contains("seq_q (N) must be positive"));
  bad = p;
  bad.headDim = 257;
  CHECK_THAT(forwardError(bad, q, k, k, o, lse), Catch::Contains("head_dim 257"));
  bad = p;
  bad.batch = -1;
  CHECK_THAT(forwardError(bad, q, k, k, o, lse), Catch::Contains("batch must be positive"));
  bad = p;
  bad.scale = -1.0;
  CHECK_THAT(forwardError(bad, q, k, k, o, lse), Catch::Contains("scale"));

  // Grouped-query attention: key/value heads must divide the query heads.
  bad = p;
  bad.headsKv = -1;
  CHECK(invalidArgumentOf(attentionForward(bad, q, k, k, o, lse)) == "heads_kv");
  bad.heads = 6;
  bad.headsKv = 4;
  CHECK_THAT(forwardError(bad, bad.contiguous(base, bad.seqQ), k, k, bad.contiguous(base, bad.seqQ),
                          lse),
             Catch::Contains("heads_kv = 4 must divide heads = 6"));
  CHECK(invalidArgumentOf(attentionForward(bad, q, k, k, o, lse)) == "heads_kv");

  // Sliding windows: each side -1 (unbounded) or a size no larger than both sequences.
  bad = p;
  bad.windowLeft = -2;
  CHECK(invalidArgumentOf(attentionForward(bad, q, k, k, o, lse)) == "window_left");
  CHECK_THAT(forwardError(bad, q, k, k, o, lse),
             Catch::Contains("window_left must be -1 (unbounded) or >= 0, got -2"));
  bad = p;
  bad.windowRight = 101; // N = 100, M = 80
  CHECK(invalidArgumentOf(attentionForward(bad, q, k, k, o, lse)) == "window_right");
  CHECK_THAT(forwardError(bad, q, k, k, o, lse),
             Catch::Contains("window_right = 101 is larger than the sequences"));
  bad.windowRight = 100; // reaches past M - 1 but hides something when N > M: accepted
  bad.windowLeft = 0;
  CHECK_THAT(forwardError(bad, q, k, k, o, RowVector{0}), Catch::Contains("lse is a null pointer"));

  Tensor nullK = k;
  nullK.data = 0;
  CHECK_THAT(forwardError(p, q, nullK, k, o, lse), Catch::Contains("k is a null pointer"));
  Tensor unaligned = q;
  unaligned.data = base + 2;
  CHECK_THAT(forwardError(p, unaligned, k, k, o, lse), Catch::Contains("q is not 16-byte aligned"));
  Tensor strided = k;
  strided.stride[3] = 2;
  CHECK_THAT(forwardError(p, q, k, strided, o, lse), Catch::Contains("v must have unit stride"));
  Tensor oddRows = q;
  oddRows.stride[2] = 68;
  CHECK_THAT(forwardError(p, q, k, k, oddRows, lse), Catch::Contains("o stride[2] = 68"));
  CHECK_THAT(forwardError(p, q, k, k, o, RowVector{0}), Catch::Contains("lse is a null pointer"));

  // The class says "invalid argument" (the C API's status, the CLI's exit code) and which one.
  bad = p;
  bad.headDim = 7;
  CHECK(invalidArgumentOf(attentionForward(bad, q, k, k, o, lse)) == "head_dim");
  CHECK(invalidArgumentOf(attentionForward(p, q, nullK, k, o, lse)) == "k");
  CHECK(invalidArgumentOf(attentionForward(p, q, k, k, o, RowVector{0})) == "lse");

  // The forward with its JVP checks each of its nine operands by its own name: the inputs q, k,
  // v and their tangents, the outputs o, lse and tO (each apart from the others).
  struct DualArguments {
    Tensor q, k, v, tQ, tK, tV, o;
    RowVector lse;
    Tensor tO;
  };
  const DualArguments dual{q, k, k, p.contiguous(base + (4 << 20), p.seqQ),
                           p.contiguous(base + (5 << 20), p.seqK),
                           p.contiguous(base + (5 << 20), p.seqK), o, lse,
                           p.contiguous(base + (6 << 20), p.seqQ)};
  auto forwardDual = [&](const DualArguments &a) {
    return attentionForwardDual(p, a.q, a.k, a.v, a.tQ, a.tK, a.tV, a.o, a.lse, a.tO);
  };
  CHECK(invalidArgumentOf(forwardDual(dual)).rfind("not an InvalidArgument", 0) == 0);
  const std::pair<const char *, Tensor DualArguments::*> dualTensors[] = {
      {"q", &DualArguments::q},   {"k", &DualArguments::k},   {"v", &DualArguments::v},
      {"tQ", &DualArguments::tQ}, {"tK", &DualArguments::tK}, {"tV", &DualArguments::tV},
      {"o", &DualArguments::o},   {"tO", &DualArguments::tO}};
  for (auto [name, member] : dualTensors) {
    DualArguments missing = dual;
    (missing.*member).data = 0;
    CHECK(invalidArgumentOf(forwardDual(missing)) == name);
    DualArguments misaligned = dual;
    (misaligned.*member).data += 2;
    CHECK(invalidArgumentOf(forwardDual(misaligned)) == name);
  }
  DualArguments noLse = dual;
  noLse.lse = RowVector{0};
  CHECK(invalidArgumentOf(forwardDual(noLse)) == "lse");
  // A tangent's strides are its own: tK's row stride of 68 elements (rows not 16-byte aligned)
  // is refused by its name.
  DualArguments oddTangent = dual;
  oddTangent.tK.stride[2] = 68;
  CHECK_THAT(llvm::toString(forwardDual(oddTangent)), Catch::Contains("tK stride[2] = 68"));
}

// Every head dim from 8 to 256 is taken (one that is no multiple of 16 runs at the next one,
// zero-padded: jit/HeadDims.h); 0, 7 and 257 are refused naming head_dim, with the range. A
// head dim copied into padded memory (no multiple of 8) takes tensors aligned only to their
// element; the others keep the kernels' 16-byte rows.
TEST_CASE("head dims: every d from 8 to 256, each path's alignment", "[api]") {
  const CUdeviceptr base = 0x10000; // never dereferenced: validation fails first or the driver
  const std::string accepted = "not an InvalidArgumentError: no CUDA driver found";
  auto forward = [&](const AttentionProblem &p, int64_t rowStride, CUdeviceptr offset) {
    auto tensor = [&](CUdeviceptr at, int64_t rows) {
      Tensor t = p.contiguous(at + offset, rows);
      t.stride[2] = rowStride;
      t.stride[1] = rowStride * rows;
      t.stride[0] = t.stride[1] * p.heads;
      return t;
    };
    return attentionForward(p, tensor(base, p.seqQ), tensor(base + (1 << 20), p.seqK),
                            tensor(base + (2 << 20), p.seqK), tensor(base + (3 << 20), p.seqQ),
                            RowVector{base + (4 << 20)});
  };
  AttentionProblem p{/*batch=*/1, /*heads=*/2, /*seqQ=*/100, /*seqK=*/80, /*headDim=*/64};
  for (int64_t d = 8; d <= 256; ++d) {
    p.headDim = d;
    INFO("d = " << d);
    // Contiguous rows: d elements apart (16-byte aligned only for multiples of 8).
    CHECK_THAT(invalidArgumentOf(forward(p, d, 0)), Catch::StartsWith(accepted));
  }
  for (int64_t d : {0, 7, 257, -16}) {
    p.headDim = d;
    INFO("d = " << d);
    CHECK(invalidArgumentOf(forward(p, 264, 0)) == "head_dim");
    CHECK_THAT(messageOf(forward(p, 264, 0)),
               Catch::Contains("head_dim " + std::to_string(d) + " is unsupported (8 to 256)"));
    // Past the widest, the message says why (up to 512 was asked for: registers, not shared
    // memory, are the limit); below the narrowest there is no such reason to give.
    if (d > 256)
      CHECK_THAT(messageOf(forward(p, 264, 0)), Catch::Contains("wider heads do not fit"));
    else
      CHECK_THAT(messageOf(forward(p, 264, 0)), !Catch::Contains("wider heads"));
  }
  // d = 100: copied, so an element-aligned start and odd row strides are fine ...
  p.headDim = 100;
  CHECK_THAT(invalidArgumentOf(forward(p, 101, 2)), Catch::StartsWith(accepted));
  CHECK_THAT(messageOf(forward(p, 101, 1)), Catch::Contains("q is not 2-byte aligned"));
  CHECK_THAT(messageOf(forward(p, 99, 0)), Catch::Contains("q rows overlap: stride[2] = 99 < "
                                                           "head_dim 100"));
  // ... while d = 72 (padded inside the kernels) and 64 are read by the kernels in 16-byte
  // pieces.
  for (int64_t d : {72, 64}) {
    p.headDim = d;
    INFO("d = " << d);
    CHECK_THAT(messageOf(forward(p, d, 2)), Catch::Contains("q is not 16-byte aligned"));
    CHECK_THAT(messageOf(forward(p, d + 4, 0)),
               Catch::Contains("stride[2] = " + std::to_string(d + 4) +
                               " must be a positive multiple of 8 elements"));
  }
}

TEST_CASE("v of another head dim than q and k: its width checked, its limits, no ring step",
          "[api]") {
  const CUdeviceptr base = 0x10000; // never dereferenced: validation fails first or the driver
  const std::string accepted = "not an InvalidArgumentError: no CUDA driver found";
  AttentionProblem p{/*batch=*/1, /*heads=*/2, /*seqQ=*/100, /*seqK=*/80, /*headDim=*/192};
  p.headDimV = 128;
  // Each tensor's rows as wide as its kind: q, k at 192; v, o at 128 (contiguous, so v's and
  // o's rows would overlap at 192 elements apart only if read 192 wide).
  auto forward = [&](const AttentionProblem &p, int64_t vRowStride) {
    Tensor q = p.contiguous(base, p.seqQ), k = p.contiguous(base + (1 << 20), p.seqK);
    Tensor v = p.contiguous(base + (2 << 20), p.seqK, p.heads, p.valueDim()),
           o = p.contiguous(base + (3 << 20), p.seqQ, p.heads, p.valueDim());
    v.stride[2] = vRowStride;
    return attentionForward(p, q, k, v, o, RowVector{base + (4 << 20)});
  };
  CHECK_THAT(invalidArgumentOf(forward(p, 128)), Catch::StartsWith(accepted));
  CHECK_THAT(messageOf(forward(p, 120)),
             Catch::Contains("v rows overlap: stride[2] = 120 < head_dim_v 128"));
  // o (v's width) laid out 128 wide right before lse: read 192 wide it would reach into lse.
  {
    Tensor q = p.contiguous(base, p.seqQ), k = p.contiguous(base + (1 << 20), p.seqK);
    Tensor v = p.contiguous(base + (2 << 20), p.seqK, p.heads, 128);
    const CUdeviceptr oBytes = CUdeviceptr(p.heads * p.seqQ * 128 * 2);
    Tensor o = p.contiguous(base + (3 << 20), p.seqQ, p.heads, 128);
    CHECK_THAT(invalidArgumentOf(attentionForward(p, q, k, v, o,
                                                  RowVector{base + (3 << 20) + oBytes})),
               Catch::StartsWith(accepted));
  }
  for (int64_t dv : {7, 257, -8}) {
    AttentionProblem bad = p;
    bad.headDimV = dv;
    INFO("d_v = " << dv);
    CHECK(invalidArgumentOf(forward(bad, 264)) == "head_dim_v");
    CHECK_THAT(messageOf(forward(bad, 264)),
               Catch::Contains("head_dim_v " + std::to_string(dv) + " is unsupported"));
  }
  AttentionProblem ring = p;
  ring.ringStep = true;
  CHECK(invalidArgumentOf(forward(ring, 128)) == "head_dim_v");
  CHECK_THAT(messageOf(forward(ring, 128)), Catch::Contains("ring steps take one head dim"));
  // Different widths run on padded copies; head_dim_v equal to head_dim is one width, as 0 is.
  CHECK(jit::headDimPadding(p) == jit::HeadDimPadding::copy);
  AttentionProblem same{/*batch=*/1, /*heads=*/2, /*seqQ=*/100, /*seqK=*/80, /*headDim=*/64};
  same.headDimV = 64;
  CHECK(jit::headDimPadding(same) == jit::HeadDimPadding::none);
  same.headDimV = 80;
  CHECK(jit::headDimPadding(same) == jit::HeadDimPadding::copy);
}

// Sizes the kernels would compute wrongly are refused, not launched with a truncated grid or
// wrapped row positions; the largest valid sizes pass validation (the call then fails only at
// the missing driver, after validation).
TEST_CASE("API validation refuses sizes the kernels cannot index", "[api]") {
  AttentionProblem p{/*batch=*/1, /*heads=*/1, /*seqQ=*/128, /*seqK=*/128, /*headDim=*/64};
  const CUdeviceptr base = 0x10000;
  // q (= k = v), o and lse 1 TiB apart: room for the largest tensors below (256 GiB).
  const CUdeviceptr far = CUdeviceptr(1) << 40;
  auto error = [&](const AttentionProblem &prob) {
    Tensor q = prob.contiguous(base, prob.seqQ), k = prob.contiguous(base, prob.seqK);
    return invalidArgumentOf(attentionForward(prob, q, k, k, prob.contiguous(base + far, prob.seqQ),
                                              RowVector{base + 2 * far}));
  };
  const std::string accepted = "not an InvalidArgumentError: no CUDA driver found";

  // batch * heads wraps int64 to 2 (3 * 0x5555555555555556 = 2^64 + 2): refused, not a 2-row grid.
  AttentionProblem bad = p;
  bad.batch = 3;
  bad.heads = 0x5555555555555556;
  CHECK(error(bad) == "batch");
  bad.heads = 21846; // 3 * 21846 = 65538 > 65535
  CHECK(error(bad) == "batch");

  // 2^38 + 64 rows would truncate the grid's x to one block; 2^31 would wrap i32 row positions.
  bad = p;
  bad.seqQ = (int64_t(1) << 38) + 64;
  CHECK(error(bad) == "seq_q");
  bad.seqQ = int64_t(1) << 31;
  CHECK(error(bad) == "seq_q");
  bad = p;
  bad.seqK = int64_t(1) << 31;
  CHECK(error(bad) == "seq_k");

  // A tensor whose strides times sizes overflow 64-bit byte offsets.
  Tensor q = p.contiguous(base, p.seqQ), k = p.contiguous(base, p.seqK);
  Tensor huge = k;
  huge.stride[0] = int64_t(1) << 62;
  bad = p;
  bad.batch = 4;
  CHECK(invalidArgumentOf(attentionForward(bad, q, huge, k, q, RowVector{base})) == "k");
  // ... or wrap past the end of the address space from where it starts.
  Tensor high = k;
  high.data = ~CUdeviceptr(0) - 1023; // 16-byte aligned, 1 KiB below the top
  CHECK(invalidArgumentOf(attentionForward(p, q, high, k, q, RowVector{base})) == "k");
  CHECK(invalidArgumentOf(attentionForward(p, q, k, k, q, RowVector{~CUdeviceptr(0) - 255})) ==
        "lse");

  // The kernels' scale is f32: finite doubles beyond float's range are refused.
  for (double scale : {1e300, 1e-320, 1e-39}) {
    bad = p;
    bad.scale = scale;
    CHECK(error(bad) == "scale");
  }
  // So is a scale f32 holds whose s log2(e), the kernels' other scalar, it does not.
  bad = p;
  bad.scale = 3e38;
  CHECK(error(bad) == "scale");
  {
    Tensor q = bad.contiguous(base, bad.seqQ);
    CHECK_THAT(forwardError(bad, q, q, q, q, RowVector{base}),
               Catch::Contains("scale * log2(e) inf, not a positive normal float32"));
  }

  // The largest valid sizes are accepted (the error is then the missing driver's, not ours).
  AttentionProblem edge = p;
  edge.seqQ = edge.seqK = (int64_t(1) << 31) - 256;
  CHECK_THAT(error(edge), Catch::StartsWith(accepted));
  edge = p;
  edge.batch = 5;
  edge.heads = 13107; // 65535
  CHECK_THAT(error(edge), Catch::StartsWith(accepted));
  edge = p;
  edge.scale = 1e-30;
  CHECK_THAT(error(edge), Catch::StartsWith(accepted));
}

TEST_CASE("ring steps: float32 outputs, BoB's passes apart, no JVP", "[api]") {
  AttentionProblem p{/*batch=*/1, /*heads=*/2, /*seqQ=*/100, /*seqK=*/80, /*headDim=*/64};
  p.ringStep = true;
  const CUdeviceptr base = 0x10000; // never dereferenced
  Tensor q = p.contiguous(base, p.seqQ), k = p.contiguous(base, p.seqK);
  RowVector rows{base + (1 << 20)};
  // A float32 output's rows are 16-byte aligned at a stride of 4 elements: a row stride of 68
  // floats (272 bytes) passes where a bf16 tensor's (136 bytes) does not.
  Tensor f32Out = q;
  f32Out.data = base + (2 << 20);
  f32Out.stride[2] = 68;
  f32Out.stride[1] = 68 * p.seqQ;
  f32Out.stride[0] = 2 * f32Out.stride[1];
  llvm::Error e = attentionForward(p, q, k, k, f32Out, rows);
  CHECK(invalidArgumentOf(std::move(e)).rfind("not an InvalidArgumentError", 0) == 0);
  CHECK_THAT(forwardError(p, f32Out, k, k, f32Out, rows),
             Catch::Contains("q stride[2] = 68 must be a positive multiple of 8 elements"));
  f32Out.stride[2] = 66;
  CHECK_THAT(forwardError(p, q, k, k, f32Out, rows),
             Catch::Contains("o stride[2] = 66 must be a positive multiple of 4 elements (16-byte "
                             "aligned rows of float32)"));
  // One GPU's bob_q finishes pass 1 itself: pass 1 alone is a ring step only.
  BobInputs in{q, k, k, q, q, rows, q, k, k};
  BobPass1Outputs pass1{q, q, q, q, rows, rows, rows};
  AttentionProblem oneGpu = p;
  oneGpu.ringStep = false;
  CHECK(invalidArgumentOf(attentionBobPass1(oneGpu, in, pass1)) == "ring_step");
  // Pass 1 takes X1..X4 and beta: each named when missing.
  pass1.x3.data = 0;
  CHECK_THAT([&] {
    llvm::Error err = attentionBobPass1(p, in, pass1);
    return err ? llvm::toString(std::move(err)) : std::string("no error");
  }(), Catch::Contains("X3 is a null pointer"));
  pass1.x3 = q;
  pass1.betaRow.data = 0;
  CHECK(invalidArgumentOf(attentionBobPass1(p, in, pass1)) == "beta");
  // Pass 2 reads b (not beta) and writes gK, gV; on one GPU too (bob_kv alone).
  CHECK(invalidArgumentOf(attentionBobPass2(p, in, {rows, rows, RowVector{0}}, k, k)) == "b");
  // The forward's JVP has no ring-step form: named, at the call and at precompile.
  CHECK(invalidArgumentOf(attentionForwardJvp(p, q, k, k, q, rows, q, k, k, q)) == "ring_step");
  CHECK(invalidArgumentOf(attentionPrecompile(p, {AttentionOp::forward_jvp})) == "ring_step");
  // Nor has the forward with its JVP.
  CHECK(invalidArgumentOf(attentionForwardDual(p, q, k, k, q, k, k, f32Out, rows, q)) ==
        "ring_step");
  CHECK(invalidArgumentOf(attentionPrecompile(p, {AttentionOp::forward_dual})) == "ring_step");
}

// An output may not share memory with an input or another output; inputs may share memory.
TEST_CASE("an output overlapping an input or another output is refused, naming both", "[api]") {
  AttentionProblem p{/*batch=*/2, /*heads=*/2, /*seqQ=*/100, /*seqK=*/80, /*headDim=*/64};
  const CUdeviceptr mib = 1 << 20;
  Tensor q = p.contiguous(mib, p.seqQ), k = p.contiguous(2 * mib, p.seqK),
         v = p.contiguous(3 * mib, p.seqK), o = p.contiguous(4 * mib, p.seqQ);
  RowVector lse{5 * mib};
  const std::string accepted = "not an InvalidArgumentError: no CUDA driver found";

  CHECK_THAT(invalidArgumentOf(attentionForward(p, q, k, v, o, lse)), Catch::StartsWith(accepted));
  // q = k = v: self-attention on one tensor (N = M here).
  AttentionProblem self = p;
  self.seqK = self.seqQ;
  CHECK_THAT(invalidArgumentOf(attentionForward(self, q, q, q, o, lse)),
             Catch::StartsWith(accepted));

  // The output is the argument named; the message names the input too.
  CHECK(invalidArgumentOf(attentionForward(p, q, k, v, k, lse)) == "o");
  CHECK_THAT(forwardError(p, q, k, v, q, lse),
             Catch::StartsWith("flashbob: o overlaps q: an output must not share memory with an "
                               "input or another output (o: bytes [0x100000, 0x10c800), q: "
                               "[0x100000, 0x10c800))"));
  // o's extent is 2 x 2 x 100 x 64 bf16 (51200 bytes): ending one row into v, or right at it.
  const CUdeviceptr oBytes = 2 * 2 * 100 * 64 * 2;
  CHECK_THAT(forwardError(p, q, k, v, p.contiguous(3 * mib - oBytes + 128, p.seqQ), lse),
             Catch::StartsWith("flashbob: o overlaps v"));
  CHECK_THAT(invalidArgumentOf(attentionForward(p, q, k, v, p.contiguous(3 * mib - oBytes, p.seqQ),
                                                lse)),
             Catch::StartsWith(accepted));
  // lse (2 x 2 x 100 floats, 1600 bytes) ending on o's first byte, or right before it.
  CHECK_THAT(forwardError(p, q, k, v, o, RowVector{4 * mib - 1600 + 4}),
             Catch::StartsWith("flashbob: o overlaps lse"));
  CHECK_THAT(invalidArgumentOf(attentionForward(p, q, k, v, o, RowVector{4 * mib - 1600})),
             Catch::StartsWith(accepted));

  // The backward: dQ on dK's last row, D on lse; dQ, dK, dV end to end are accepted.
  const CUdeviceptr grads = 16 * mib, kBytes = 2 * 2 * 80 * 64 * 2;
  Tensor dK = p.contiguous(grads, p.seqK), dV = p.contiguous(grads + kBytes, p.seqK);
  Tensor dQ = p.contiguous(grads + 2 * kBytes, p.seqQ);
  auto backward = [&](const Tensor &dq, RowVector d) {
    return attentionBackward(p, q, k, v, o, p.contiguous(6 * mib, p.seqQ), lse, dq, dK, dV, d);
  };
  CHECK_THAT(invalidArgumentOf(backward(dQ, RowVector{7 * mib})), Catch::StartsWith(accepted));
  llvm::Error e = backward(p.contiguous(grads + kBytes - 128, p.seqQ), RowVector{7 * mib});
  CHECK_THAT(llvm::toString(std::move(e)), Catch::StartsWith("flashbob: dQ overlaps dK"));
  e = backward(dQ, lse);
  CHECK_THAT(llvm::toString(std::move(e)), Catch::StartsWith("flashbob: D overlaps lse"));
}

TEST_CASE("footprints: extents apart, overlapping, or rows interleaved without meeting",
          "[api]") {
  using jit::Footprint;
  using jit::mayOverlap;
  CHECK_FALSE(mayOverlap(Footprint::contiguous(0x1000, 256), Footprint::contiguous(0x1100, 16)));
  CHECK(mayOverlap(Footprint::contiguous(0x1000, 257), Footprint::contiguous(0x1100, 16)));
  CHECK(mayOverlap(Footprint::contiguous(0x1100, 16), Footprint::contiguous(0x1000, 257)));
  CHECK(mayOverlap(Footprint::contiguous(0x1000, 16), Footprint::contiguous(0x1000, 16)));

  // A view of (seq 4, 3 views, heads 2, d 8) bf16: rows of 16 bytes, heads 16 bytes apart, seq
  // 96 bytes apart.
  auto view = [](uint64_t start) {
    Footprint f;
    f.start = start;
    f.rowBytes = 16;
    f.sizes = {1, 2, 4};
    f.strideBytes = {0, 16, 96};
    f.extentBytes = 3 * 96 + 32;
    return f;
  };
  CHECK_FALSE(mayOverlap(view(0x1000), view(0x1020))); // q and k views
  CHECK_FALSE(mayOverlap(view(0x1040), view(0x1000))); // v and q
  CHECK(mayOverlap(view(0x1000), view(0x1010)));       // one head into the other
  CHECK(mayOverlap(view(0x1000), view(0x1000 + 96)));  // one sequence row further
  // A contiguous argument inside the views' gaps, or across one.
  CHECK_FALSE(mayOverlap(view(0x1000), Footprint::contiguous(0x1020, 64)));
  CHECK(mayOverlap(view(0x1000), Footprint::contiguous(0x1020, 65)));
  // The batch dimension of a single batch never counts, whatever its stride.
  Footprint one = view(0x1000);
  one.strideBytes[0] = 8;
  CHECK_FALSE(mayOverlap(one, view(0x1020)));
  one.sizes[0] = 2; // two batches 8 bytes apart: rows now overlap themselves and the others
  one.extentBytes += 8;
  CHECK(mayOverlap(one, view(0x1020)));
}
