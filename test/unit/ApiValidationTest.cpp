// The C++ API rejects bad arguments before touching the GPU (these run without one), with a
// message that names the argument.
#include "api/Attention.h"
#include "support/Errors.h"

#include <catch2/catch.hpp>

using namespace flashbob;

namespace {
std::string forwardError(const AttentionProblem &p, Tensor q, Tensor k, Tensor v, Tensor o,
                         RowVector lse) {
  llvm::Error e = attentionForward(p, q, k, v, o, lse);
  return e ? llvm::toString(std::move(e)) : std::string("no error");
}

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
  AttentionProblem p;
  p.batch = 1;
  p.heads = 2;
  p.seqQ = 100;
  p.seqK = 80;
  p.headDim = 64;
  const CUdeviceptr base = 0x10000; // never dereferenced: validation fails first
  Tensor q = p.contiguous(base, p.seqQ), k = p.contiguous(base, p.seqK);
  RowVector lse{base};

  CHECK_THAT(forwardError(p, q, k, k, q, lse), !Catch::Contains("stride") && !Catch::Contains("null"));

  AttentionProblem bad = p;
  bad.seqQ = 0;
  CHECK_THAT(forwardError(bad, q, k, k, q, lse), Catch::Contains("seq_q (N) must be positive"));
  bad = p;
  bad.headDim = 100;
  CHECK_THAT(forwardError(bad, q, k, k, q, lse), Catch::Contains("head_dim 100"));
  bad = p;
  bad.batch = -1;
  CHECK_THAT(forwardError(bad, q, k, k, q, lse), Catch::Contains("batch must be positive"));
  bad = p;
  bad.scale = -1.0;
  CHECK_THAT(forwardError(bad, q, k, k, q, lse), Catch::Contains("scale"));

  Tensor nullK = k;
  nullK.data = 0;
  CHECK_THAT(forwardError(p, q, nullK, k, q, lse), Catch::Contains("k is a null pointer"));
  Tensor unaligned = q;
  unaligned.data = base + 2;
  CHECK_THAT(forwardError(p, unaligned, k, k, q, lse), Catch::Contains("q is not 16-byte aligned"));
  Tensor strided = k;
  strided.stride[3] = 2;
  CHECK_THAT(forwardError(p, q, k, strided, q, lse), Catch::Contains("v must have unit stride"));
  Tensor oddRows = q;
  oddRows.stride[2] = 68;
  CHECK_THAT(forwardError(p, q, k, k, oddRows, lse), Catch::Contains("o stride[2] = 68"));
  CHECK_THAT(forwardError(p, q, k, k, q, RowVector{0}), Catch::Contains("lse is a null pointer"));

  // The class says "invalid argument" (the C API's status, the CLI's exit code) and which one.
  bad = p;
  bad.headDim = 100;
  CHECK(invalidArgumentOf(attentionForward(bad, q, k, k, q, lse)) == "head_dim");
  CHECK(invalidArgumentOf(attentionForward(p, q, nullK, k, q, lse)) == "k");
  CHECK(invalidArgumentOf(attentionForward(p, q, k, k, q, RowVector{0})) == "lse");
}
