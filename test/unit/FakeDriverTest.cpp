// Everything between argument checking and the launch, on the CPU, through the fake CUDA driver
// (test/fake_driver: an H200-like sm_90 device whose launches are recorded, not run): a bad
// argument is refused before the driver is even loaded; fwd, bwd and BoB launch the kernels the
// tile table names with the grid, block and shared memory their specs say; a failing driver
// call comes back as a CudaCallError naming it (FLASHBOB_ERROR_CUDA in C). Kernels are really
// compiled (ptxas included) into a cache directory of the build tree. The device's compute
// capability is read once per process, so the unsupported-device case is its own CTest run
// (tag [unsupported], FAKE_CUDA_CC=75 or 100).
#include "api/Attention.h"
#include "api/flashbob.h"
#include "compiler/dialect/Target.h"
#include "jit/Compile.h"
#include "jit/HeadDims.h"
#include "jit/KernelCache.h"
#include "jit/KernelKey.h"
#include "jit/Launch.h"
#include "jit/Validate.h"
#include "jit/Tuning.h"
#include "kernels/Kernels.h"
#include "kernels/Signature.h"
#include "runtime/cache/DiskCache.h"
#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/Log.h"
#include "support/Progress.h"
#include "test/fake_driver/FakeCudaDriver.h"
#include "test/unit/FakeDriverRecorder.h"
#include "test/unit/ChildProcess.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/bit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace flashbob;
using namespace flashbob::fake_driver;
using Kind = bob::KernelKind;

namespace {

AttentionProblem problem() {
  AttentionProblem p;
  p.batch = 2;
  p.heads = 3;
  p.seqQ = 1000; // not a multiple of any block: the grid rounds up
  p.seqK = 700;
  p.headDim = 64;
  return p;
}

// Addresses the fake never dereferences (kernels do not run), 16-byte aligned, far apart.
CUdeviceptr address(int i) { return CUdeviceptr(0x1000000000ull) * CUdeviceptr(i + 1); }

std::string messageOf(llvm::Error e) { return e ? llvm::toString(std::move(e)) : "no error"; }

// The C API's view of a problem (its sizes, mask and key/value heads) and of a tensor.
flashbob_problem cProblem(const AttentionProblem &p) {
  flashbob_problem c = FLASHBOB_PROBLEM_INIT;
  c.batch = p.batch;
  c.heads = p.heads;
  c.seq_q = p.seqQ;
  c.seq_k = p.seqK;
  c.head_dim = p.headDim;
  c.dtype = FLASHBOB_BF16;
  c.causal = p.causal;
  c.heads_kv = p.headsKv;
  return c;
}
flashbob_tensor cTensor(const Tensor &t) {
  return {reinterpret_cast<void *>(t.data), {t.stride[0], t.stride[1], t.stride[2], t.stride[3]}};
}

// What the launch of `kind` must look like, computed here from the tile table's spec.
void checkLaunch(const fake_cuda_launch_record &r, const AttentionProblem &p, Kind kind) {
  const compiler::KernelSpec spec = jit::defaultSpec(p, kind, bob::Arch::sm_90a);
  INFO(spec.name());
  CHECK(std::string(r.entry) == spec.name());
  const bool keyMajor = bob::isKeyMajor(kind);
  // A packed batch's grid covers its longest sequence (max_seqlen), not the packed rows.
  const int64_t rows = keyMajor ? p.longestK() : p.longestQ();
  const int64_t block = keyMajor ? spec.tiles.blockN : spec.tiles.blockM;
  CHECK(r.grid[0] == unsigned((rows + block - 1) / block));
  // Key-major kinds: one block row per key/value head, summing over its group of query heads.
  CHECK(r.grid[1] == unsigned(p.batch * (keyMajor ? p.keyValueHeads() : p.heads)));
  CHECK(r.grid[2] == 1u);
  CHECK(r.grid[0] == jit::gridFor(spec, p).x);
  CHECK(r.block[0] == unsigned(32 * spec.tiles.warps + (spec.tiles.producer ? 128 : 0)));
  CHECK(r.block[1] == 1u);
  auto shared = jit::sharedBytesFor(spec);
  REQUIRE(static_cast<bool>(shared));
  // The launch passes the dynamic part; the block's total adds the static reserve (mbarriers,
  // row exchange: SharedLayout.h staticReserve, a multiple of 1024 bytes on sm_90a).
  CHECK(r.sharedBytes > 0u);
  CHECK(int64_t(r.sharedBytes) < *shared);
  CHECK((*shared - int64_t(r.sharedBytes)) % 1024 == 0);
  CHECK(*shared - int64_t(r.sharedBytes) <= 4096);

  // The parameters, as the fake read them from kernelParams against the kernel's own list (from
  // its cubin): the signature's memrefs (ptr, ptr, offset, sizes, strides) and f32 scalars, then
  // one 128-byte tensor map by value per map the compiler listed (sm_90a: TMA), each one the
  // driver encoded.
  auto cache = jit::KernelCache::get();
  REQUIRE(static_cast<bool>(cache));
  auto kernel = (*cache)->kernel(spec);
  REQUIRE(static_cast<bool>(kernel));
  unsigned expected = 0, scalars = 0;
  for (const kernels::Param &param : kernels::signature(kind, p.varlen)) {
    if (param.isScalar) {
      ++expected;
      REQUIRE(scalars < 4);
      CHECK(r.scalars[scalars++] ==
            llvm::bit_cast<unsigned>(kernels::scalarValue(param.scalar, p.effectiveScale())));
    } else {
      switch (kernels::operandInfo(param.operand).layout) { // 3 + 2 x rank words
      case kernels::Layout::offsets: expected += 5; break;
      case kernels::Layout::rows:
      case kernels::Layout::counters: expected += 9; break;
      case kernels::Layout::tensor:
      case kernels::Layout::sums: expected += 11; break;
      }
    }
  }
  const unsigned maps = unsigned((*kernel)->loaded->tensorMaps().size());
  CHECK(maps > 0);
  CHECK(r.tensorMaps == maps);
  CHECK(r.params == expected + maps);
  CHECK(r.scalarCount == scalars);
}

// fwd, bwd and BoB on the tensors querySide(i) and keySide(i) at address(i) (q, k, v, o, dO at
// 0-4, the gradients at 5-7 and 12-15, the row vectors at 8-11); returns their five launches,
// each checked against its spec and its entry naming `variant` ("_gqa_", "_varlen_").
std::vector<fake_cuda_launch_record> launchEveryKind(const AttentionProblem &p,
                                                     llvm::function_ref<Tensor(int)> querySide,
                                                     llvm::function_ref<Tensor(int)> keySide,
                                                     const std::string &variant) {
  Tensor q = querySide(0), k = keySide(1), v = keySide(2), o = querySide(3), dO = querySide(4);
  RowVector lse{address(8)}, d{address(9)}, c{address(10)}, b{address(11)};
  REQUIRE(messageOf(attentionForward(p, q, k, v, o, lse)) == "no error");
  REQUIRE(messageOf(attentionBackward(p, q, k, v, o, dO, lse, querySide(5), keySide(6),
                                      keySide(7), d)) == "no error");
  BobInputs in{q, k, v, o, dO, lse, querySide(5), keySide(6), keySide(7)};
  BobOutputs out{querySide(12), keySide(13), keySide(14), querySide(15), d, c, b};
  REQUIRE(messageOf(attentionBob(p, in, out)) == "no error");
  std::vector<fake_cuda_launch_record> all = launches();
  REQUIRE(all.size() == 5);
  const Kind kinds[] = {Kind::fwd, Kind::bwd_q, Kind::bwd_kv, Kind::bob_q, Kind::bob_kv};
  for (size_t i = 0; i < all.size(); ++i) {
    checkLaunch(all[i], p, kinds[i]);
    CHECK(std::string(all[i].entry).find(variant) != std::string::npos);
  }
  return all;
}

// The bits of the f32 the kernels get for scalar `s` at softmax scale `scale`.
unsigned scalarBits(kernels::Scalar s, double scale) {
  return llvm::bit_cast<unsigned>(kernels::scalarValue(s, scale));
}

} // namespace

TEST_CASE("a bad argument is refused before the driver is loaded", "[fake]") {
  useFakeDriver();
  AttentionProblem p = problem();
  p.headDim = 257;
  llvm::Error e = attentionForward(p, p.contiguous(address(0), p.seqQ),
                                   p.contiguous(address(1), p.seqK),
                                   p.contiguous(address(2), p.seqK),
                                   p.contiguous(address(3), p.seqQ), RowVector{address(4)});
  CHECK_THAT(messageOf(std::move(e)), Catch::Contains("head_dim 257"));
  // Not loaded: no driver call happened at all (this case runs first in the binary).
  CHECK(loadedFake() == nullptr);
}

TEST_CASE("fwd, bwd, BoB and the forward with its JVP launch their kernels with the spec's grid, "
          "block and shared memory",
          "[fake]") {
  useFakeDriver();
  const AttentionProblem p = problem();
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK),
         v = p.contiguous(address(2), p.seqK), o = p.contiguous(address(3), p.seqQ),
         dO = p.contiguous(address(4), p.seqQ), dQ = p.contiguous(address(5), p.seqQ),
         dK = p.contiguous(address(6), p.seqK), dV = p.contiguous(address(7), p.seqK);
  RowVector lse{address(8)}, d{address(9)}, c{address(10)}, b{address(11)};

  REQUIRE(messageOf(attentionForward(p, q, k, v, o, lse)) == "no error");
  std::vector<fake_cuda_launch_record> fwd = launches();
  REQUIRE(fwd.size() == 1);
  checkLaunch(fwd[0], p, Kind::fwd);

  REQUIRE(messageOf(attentionBackward(p, q, k, v, o, dO, lse, dQ, dK, dV, d)) == "no error");
  std::vector<fake_cuda_launch_record> bwd = launches();
  REQUIRE(bwd.size() == 2);
  checkLaunch(bwd[0], p, Kind::bwd_q);
  checkLaunch(bwd[1], p, Kind::bwd_kv);

  BobInputs in{q, k, v, o, dO, lse, dQ, dK, dV};
  BobOutputs out{p.contiguous(address(12), p.seqQ), p.contiguous(address(13), p.seqK),
                 p.contiguous(address(14), p.seqK), p.contiguous(address(15), p.seqQ), d, c, b};
  REQUIRE(messageOf(attentionBob(p, in, out)) == "no error");
  std::vector<fake_cuda_launch_record> bob = launches();
  REQUIRE(bob.size() == 2);
  checkLaunch(bob[0], p, Kind::bob_q);
  checkLaunch(bob[1], p, Kind::bob_kv);

  // The forward and its JVP in one kernel, along tangents dQ, dK, dV (as BoB's cotangents).
  REQUIRE(messageOf(attentionForwardDual(p, q, k, v, dQ, dK, dV, o, lse,
                                         p.contiguous(address(12), p.seqQ))) == "no error");
  std::vector<fake_cuda_launch_record> dual = launches();
  REQUIRE(dual.size() == 1);
  checkLaunch(dual[0], p, Kind::fwd_dual);
}

TEST_CASE("grouped-query attention launches the _gqa kernels over the key/value heads",
          "[fake]") {
  useFakeDriver();
  for (int64_t headsKv : {2, 1}) { // groups of 3 query heads; multi-query
    AttentionProblem p = problem();
    p.heads = 6;
    p.headsKv = headsKv;
    INFO("heads_kv " << headsKv);
    std::vector<fake_cuda_launch_record> all = launchEveryKind(
        p, [&](int i) { return p.contiguous(address(i), p.seqQ); },
        [&](int i) { return p.contiguous(address(i), p.seqK, headsKv); }, "_gqa_");
    CHECK(all[2].grid[1] == unsigned(p.batch * headsKv)); // bwd_kv
    CHECK(all[1].grid[1] == unsigned(p.batch * p.heads)); // bwd_q
  }

  // A head count that does not divide is refused naming heads_kv, nothing launched (C API too);
  // equal counts run the ungrouped kernels.
  AttentionProblem p = problem();
  p.heads = 6;
  p.headsKv = 4;
  Tensor q = p.contiguous(address(0), p.seqQ);
  CHECK_THAT(messageOf(attentionForward(p, q, q, q, q, RowVector{address(1)})),
             Catch::Contains("heads_kv"));
  flashbob_problem cp = cProblem(p);
  const flashbob_tensor t{reinterpret_cast<void *>(q.data),
                          {q.stride[0], q.stride[1], q.stride[2], q.stride[3]}};
  CHECK(flashbob_forward(&cp, t, t, t, t, reinterpret_cast<float *>(address(1)), nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("heads_kv = 4 must divide heads = 6"));
  CHECK(launches().empty());
  p.headsKv = 6;
  REQUIRE(messageOf(attentionForward(p, q, p.contiguous(address(1), p.seqK),
                                     p.contiguous(address(2), p.seqK),
                                     p.contiguous(address(4), p.seqQ), RowVector{address(3)})) ==
          "no error");
  std::vector<fake_cuda_launch_record> plain = launches();
  REQUIRE(plain.size() == 1);
  CHECK(std::string(plain[0].entry).find("_gqa") == std::string::npos);
}

TEST_CASE("sweeps of 2^17 rows or more launch the backward's and BoB's _long kernels",
          "[fake]") {
  // The rows a block's sweep visits decide (kernels::kLongSweepRows): the keys for bwd_q and
  // bob_q, the queries (times the group) for bwd_kv and bob_kv, at most a window's span. The
  // forward and its JVP never flush.
  useFakeDriver();
  struct Sweep {
    int64_t n, m, heads, headsKv, windowLeft, windowRight;
    bool queryMajorLong, keyMajorLong;
  };
  const int64_t longRows = kernels::kLongSweepRows;
  const Sweep sweeps[] = {
      {64, longRows, 2, 0, -1, -1, true, false},          // a million keys: bwd_q, bob_q
      {64, longRows - 1, 2, 0, -1, -1, false, false},     // one key short of it
      {longRows, 64, 2, 0, -1, -1, false, true},          // a million queries: bwd_kv, bob_kv
      {longRows / 8, 64, 16, 2, -1, -1, false, true},     // 8 query heads per key/value head
      {longRows, longRows, 2, 0, 1000, 1000, false, false}, // a window bounds both sweeps
  };
  for (const Sweep &w : sweeps) {
    INFO("N " << w.n << " M " << w.m << " heads " << w.heads << ":" << w.headsKv << " window ("
              << w.windowLeft << ", " << w.windowRight << ")");
    AttentionProblem p = problem();
    p.batch = 1;
    p.seqQ = w.n;
    p.seqK = w.m;
    p.heads = w.heads;
    p.headsKv = w.headsKv;
    p.windowLeft = w.windowLeft;
    p.windowRight = w.windowRight;
    std::vector<fake_cuda_launch_record> all = launchEveryKind(
        p, [&](int i) { return p.contiguous(address(i), p.seqQ); },
        [&](int i) { return p.contiguous(address(i), p.seqK, p.keyValueHeads()); }, "_");
    auto isLong = [&](size_t i) { return std::string(all[i].entry).find("_long_") != std::string::npos; };
    CHECK_FALSE(isLong(0)); // fwd
    CHECK(isLong(1) == w.queryMajorLong); // bwd_q
    CHECK(isLong(2) == w.keyMajorLong);   // bwd_kv
    CHECK(isLong(3) == w.queryMajorLong); // bob_q
    CHECK(isLong(4) == w.keyMajorLong);   // bob_kv
  }
}

TEST_CASE("a packed batch launches the _varlen kernels over its longest sequence; bad offsets "
          "are refused naming them, nothing launched",
          "[fake]") {
  // The fake's device memory is the host's: the offsets are read back from plain vectors.
  useFakeDriver();
  std::vector<int32_t> cuQ{0, 300, 300, 1000}, cuK{0, 200, 650, 700};
  AttentionProblem p = problem(); // 3 heads, d 64
  p.batch = 3;
  p.seqQ = 1000;
  p.seqK = 700;
  p.varlen = true;
  p.maxSeqQ = 700;
  p.maxSeqK = 450;
  p.cuSeqlensQ = reinterpret_cast<CUdeviceptr>(cuQ.data());
  p.cuSeqlensK = reinterpret_cast<CUdeviceptr>(cuK.data());
  // flash-attn's (total, heads, d) memory: stride[0] is never read.
  // (equal head counts: both sides' strides are the same).
  auto packed = [&](int i) {
    Tensor t;
    t.data = address(i);
    t.stride[0] = 0;
    t.stride[1] = p.headDim;
    t.stride[2] = p.heads * p.headDim;
    return t;
  };
  launchEveryKind(p, packed, packed, "_varlen_");
  Tensor q = packed(0), k = packed(1), v = packed(2), o = packed(3);
  RowVector lse{address(8)};

  // Offsets that do not describe the tensors: each refused naming its argument, nothing launched.
  struct Bad {
    std::vector<int32_t> cuQ, cuK;
    int64_t maxQ, maxK;
    const char *argument, *message;
  };
  const Bad bad[] = {
      {{1, 300, 300, 1000}, cuK, 700, 450, "cu_seqlens_q", "cu_seqlens_q[0] = 1 must be 0"},
      {{0, 300, 200, 1000}, cuK, 800, 450, "cu_seqlens_q",
       "cu_seqlens_q must not decrease: cu_seqlens_q[2] = 200 < cu_seqlens_q[1] = 300"},
      {cuQ, {0, 200, 650, 690}, 700, 450, "cu_seqlens_k",
       "cu_seqlens_k[3] = 690 must be the total rows of the packed tensors, 700"},
      {cuQ, cuK, 699, 450, "max_seqlen_q",
       "sequence 2 has 700 rows (cu_seqlens_q[3] - cu_seqlens_q[2]), more than max_seqlen_q = 699"},
      {cuQ, cuK, 700, 0, "max_seqlen_k", "max_seqlen_k = 0 must be in 1..seq_k = 700"},
      {cuQ, cuK, 1001, 450, "max_seqlen_q", "max_seqlen_q = 1001 must be in 1..seq_q = 1000"},
  };
  for (const Bad &x : bad) {
    INFO(x.message);
    AttentionProblem wrong = p;
    std::vector<int32_t> offsetsQ = x.cuQ, offsetsK = x.cuK;
    wrong.cuSeqlensQ = reinterpret_cast<CUdeviceptr>(offsetsQ.data());
    wrong.cuSeqlensK = reinterpret_cast<CUdeviceptr>(offsetsK.data());
    wrong.maxSeqQ = x.maxQ;
    wrong.maxSeqK = x.maxK;
    llvm::Error e = attentionForward(wrong, q, k, v, o, lse);
    const std::string message = messageOf(std::move(e));
    CHECK_THAT(message, Catch::Contains(x.message));
    e = attentionForward(wrong, q, k, v, o, lse);
    std::string argument = "none";
    llvm::consumeError(llvm::handleErrors(std::move(e), [&](const support::InvalidArgumentError &a) {
      argument = a.argument();
    }));
    CHECK(argument == x.argument);
  }
  AttentionProblem nullOffsets = p;
  nullOffsets.cuSeqlensK = 0;
  CHECK_THAT(messageOf(attentionForward(nullOffsets, q, k, v, o, lse)),
             Catch::Contains("cu_seqlens_k is a null pointer"));
  CHECK(launches().empty());

  // While a stream is captured the offsets cannot be read back (the kernels clamp them to the
  // tensors instead): the call is its launch.
  ::setenv("FAKE_CUDA_CAPTURING", "1", 1);
  std::vector<int32_t> garbage{5, 3, 9999, -1};
  AttentionProblem captured = p;
  captured.cuSeqlensQ = reinterpret_cast<CUdeviceptr>(garbage.data());
  const std::string result = messageOf(attentionForward(captured, q, k, v, o, lse));
  ::unsetenv("FAKE_CUDA_CAPTURING");
  CHECK(result == "no error");
  CHECK(launches().size() == 1);
}

TEST_CASE("an output sharing memory with an input or another output is refused, nothing "
          "launched; inputs may share memory",
          "[fake]") {
  useFakeDriver();
  const AttentionProblem p = problem();
  const CUdeviceptr kBytes = CUdeviceptr(p.batch * p.heads * p.seqK * p.headDim * 2);
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK),
         v = p.contiguous(address(2), p.seqK), o = p.contiguous(address(3), p.seqQ),
         dO = p.contiguous(address(4), p.seqQ);
  RowVector lse{address(8)}, d{address(9)};

  // q = k = v (self-attention on one tensor) launches.
  REQUIRE(messageOf(attentionForward(p, q, q, q, o, lse)) == "no error");
  CHECK(launches().size() == 1);

  // o == k, through the C++ API and the C API: refused naming both, no launch.
  CHECK_THAT(messageOf(attentionForward(p, q, k, v, k, lse)),
             Catch::StartsWith("flashbob: o overlaps k: an output must not share memory"));
  flashbob_problem cp = cProblem(p);
  CHECK(flashbob_forward(&cp, cTensor(q), cTensor(k), cTensor(v), cTensor(k),
                         reinterpret_cast<float *>(lse.data), nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps k"));
  // dQ over dK's last row (the backward's two kernels: neither launched).
  Tensor dK = p.contiguous(address(6), p.seqK), dV = p.contiguous(address(6) + kBytes, p.seqK);
  Tensor dQ = p.contiguous(address(6) + kBytes - 128, p.seqQ);
  CHECK(flashbob_backward(&cp, cTensor(q), cTensor(k), cTensor(v), cTensor(o), cTensor(dO),
                          reinterpret_cast<float *>(lse.data), cTensor(dQ), cTensor(dK),
                          cTensor(dV), reinterpret_cast<float *>(d.data),
                          nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: dQ overlaps dK"));
  CHECK(launches().empty());

  // Outputs end to end launch.
  dQ = p.contiguous(address(6) + 2 * kBytes, p.seqQ);
  REQUIRE(messageOf(attentionBackward(p, q, k, v, o, dO, lse, dQ, dK, dV, d)) == "no error");
  CHECK(launches().size() == 2);
}

TEST_CASE("the largest valid sizes launch their whole grid, untruncated", "[fake]") {
  useFakeDriver();
  AttentionProblem p = problem();
  p.batch = 5;
  p.heads = 13107; // batch * heads = 65535, the grid's y limit
  p.seqQ = 256;
  p.seqK = 256;
  Tensor q = p.contiguous(address(0), p.seqQ);
  REQUIRE(messageOf(attentionForward(p, q, q, q, p.contiguous(address(1), p.seqQ),
                                     RowVector{address(2)})) == "no error");
  std::vector<fake_cuda_launch_record> wide = launches();
  REQUIRE(wide.size() == 1);
  checkLaunch(wide[0], p, Kind::fwd);

  p = problem();
  p.batch = p.heads = 1;
  p.seqQ = p.seqK = jit::kMaxSequence; // 2^31 - 256 rows: 2^25 - 4 blocks of 64
  q = p.contiguous(address(0), p.seqQ); // 256 GiB: o and lse 4 and 8 addresses further
  REQUIRE(messageOf(attentionForward(p, q, q, q, p.contiguous(address(4), p.seqQ),
                                     RowVector{address(8)})) == "no error");
  std::vector<fake_cuda_launch_record> tall = launches();
  REQUIRE(tall.size() == 1);
  checkLaunch(tall[0], p, Kind::fwd);
}

TEST_CASE("a failing driver call is a CudaCallError naming it, FLASHBOB_ERROR_CUDA in C",
          "[fake]") {
  useFakeDriver();
  const AttentionProblem p = problem();
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK),
         o = p.contiguous(address(3), p.seqQ);
  ::setenv("FAKE_CUDA_FAIL", "cuLaunchKernel:CUDA_ERROR_LAUNCH_FAILED", 1);
  std::string call;
  llvm::Error rest = llvm::handleErrors(attentionForward(p, q, k, k, o, RowVector{address(2)}),
                                        [&](const support::CudaCallError &c) { call = c.call(); });
  CHECK(messageOf(std::move(rest)) == "no error");
  CHECK(call == "cuLaunchKernel");

  // The same through the C API: the status from the class, the message naming the call.
  flashbob_problem cp = cProblem(p);
  CHECK(flashbob_forward(&cp, cTensor(q), cTensor(k), cTensor(k), cTensor(o),
                         reinterpret_cast<float *>(address(2)), nullptr) == FLASHBOB_ERROR_CUDA);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED"));
  ::unsetenv("FAKE_CUDA_FAIL");
  CHECK(launches().empty()); // a failed launch is not recorded

  // Loading a module (a kernel not loaded before: causal) fails the same way, named.
  ::setenv("FAKE_CUDA_FAIL", "cuModuleLoadDataEx:CUDA_ERROR_NO_BINARY_FOR_GPU", 1);
  cp.causal = 1;
  CHECK(flashbob_forward(&cp, cTensor(q), cTensor(k), cTensor(k), cTensor(o),
                         reinterpret_cast<float *>(address(2)), nullptr) == FLASHBOB_ERROR_CUDA);
  CHECK_THAT(flashbob_last_error(),
             Catch::StartsWith("cuModuleLoadDataEx: CUDA_ERROR_NO_BINARY_FOR_GPU"));
  ::unsetenv("FAKE_CUDA_FAIL");
}

TEST_CASE("the softmax scale is a launch argument: a new scale runs the same kernel", "[fake]") {
  useFakeDriver();
  AttentionProblem p = problem();
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK);
  std::vector<std::string> entries;
  for (double scale : {0.5, 0.3, 1e-3}) {
    p.scale = scale;
    REQUIRE(messageOf(attentionForward(p, q, k, k, p.contiguous(address(12), p.seqQ),
                                       RowVector{address(2)})) == "no error");
    std::vector<fake_cuda_launch_record> fwd = launches();
    REQUIRE(fwd.size() == 1);
    checkLaunch(fwd[0], p, Kind::fwd);
    // fwd takes s log2(e) alone, rounded to f32 once from the double product.
    REQUIRE(fwd[0].scalarCount == 1);
    CHECK(fwd[0].scalars[0] == scalarBits(kernels::Scalar::scaleLog2e, scale));
    entries.push_back(fwd[0].entry);
  }
  // One kernel for every scale but the default, which reads it from its argument.
  CHECK(entries[0] == entries[1]);
  CHECK(entries[1] == entries[2]);
  CHECK(entries[0].find("_scalearg_") != std::string::npos);

  // The default, 1/sqrt(d) = 0.125, however it is given (no scale, the double, a double that
  // rounds to the same f32 values), runs the kernel with its values compiled in; the launch
  // passes both scalars of the backward all the same.
  Tensor v = p.contiguous(address(3), p.seqK), o = p.contiguous(address(4), p.seqQ),
         dO = p.contiguous(address(5), p.seqQ), dQ = p.contiguous(address(6), p.seqQ),
         dK = p.contiguous(address(7), p.seqK), dV = p.contiguous(address(8), p.seqK);
  for (std::optional<double> scale : {std::optional<double>(), std::optional<double>(0.125),
                                      std::optional<double>(0.125 * (1 + 1e-12))}) {
    p.scale = scale;
    CHECK(kernels::isDefaultScale(p.effectiveScale(), p.headDim));
    REQUIRE(messageOf(attentionBackward(p, q, k, v, o, dO, RowVector{address(2)}, dQ, dK, dV,
                                        RowVector{address(9)})) == "no error");
    std::vector<fake_cuda_launch_record> bwd = launches();
    REQUIRE(bwd.size() == 2);
    for (const fake_cuda_launch_record &r : bwd) {
      checkLaunch(r, p, std::string(r.entry).rfind("bwd_q_", 0) == 0 ? Kind::bwd_q : Kind::bwd_kv);
      CHECK(std::string(r.entry).find("scalearg") == std::string::npos);
      REQUIRE(r.scalarCount == 2);
      CHECK(r.scalars[0] == scalarBits(kernels::Scalar::scale, 0.125));
      CHECK(r.scalars[1] == scalarBits(kernels::Scalar::scaleLog2e, 0.125));
    }
  }
  // One f32 step away is another scale.
  CHECK_FALSE(kernels::isDefaultScale(std::nextafter(0.125f, 1.0f), 64));
  CHECK_FALSE(kernels::isDefaultScale(0.125, 128));
}

TEST_CASE("a launch over the same tensors as an earlier one reuses its tensor maps; a moved "
          "tensor's maps are encoded again",
          "[fake]") {
  // Encoding a map is a driver call per map per launch; a loop's launches see the same tensors
  // again, so the maps are kept by their parameters (runtime/launch/TensorMaps.cpp). Counted here
  // from the fake's call log; the launch records show the maps the kernel got either way.
  useFakeDriver();
  const AttentionProblem p = problem();
  // Addresses no other test uses: the kept maps outlive a test case.
  auto far = [](int i) { return CUdeviceptr(0x7000000000ull) + CUdeviceptr(i) * 0x100000000ull; };
  Tensor q = p.contiguous(far(0), p.seqQ), k = p.contiguous(far(1), p.seqK),
         v = p.contiguous(far(2), p.seqK), o = p.contiguous(far(3), p.seqQ);
  const RowVector lse{far(4)};
  llvm::SmallString<128> log;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("fake-cuda-calls", "log", log));
  ::setenv("FAKE_CUDA_LOG", log.c_str(), 1);
  auto encodes = [&] { // encodes logged since the last look
    auto text = llvm::MemoryBuffer::getFile(log);
    REQUIRE(static_cast<bool>(text));
    int n = 0;
    for (llvm::StringRef rest = (*text)->getBuffer(); !rest.empty();) {
      auto [line, tail] = rest.split('\n');
      n += line == "cuTensorMapEncodeTiled";
      rest = tail;
    }
    REQUIRE(::truncate(log.c_str(), 0) == 0);
    return n;
  };
  auto forward = [&](const Tensor &query) {
    REQUIRE(messageOf(attentionForward(p, query, k, v, o, lse)) == "no error");
    std::vector<fake_cuda_launch_record> fwd = launches();
    REQUIRE(fwd.size() == 1);
    return fwd[0];
  };
  const fake_cuda_launch_record first = forward(q);
  const int maps = int(first.tensorMaps);
  REQUIRE(maps > 0);
  CHECK(encodes() == maps);
  const fake_cuda_launch_record again = forward(q);
  CHECK(encodes() == 0);
  REQUIRE(again.tensorMaps == first.tensorMaps);
  for (int i = 0; i < maps; ++i) {
    CHECK(again.maps[i].address == first.maps[i].address);
    CHECK(again.maps[i].rows == first.maps[i].rows);
    CHECK(again.maps[i].box[0] == first.maps[i].box[0]);
    CHECK(again.maps[i].box[1] == first.maps[i].box[1]);
    CHECK(again.maps[i].swizzle == first.maps[i].swizzle);
  }
  // q elsewhere: its maps are encoded over the new address, the others are kept.
  const fake_cuda_launch_record moved = forward(p.contiguous(far(5), p.seqQ));
  int overQ = 0;
  for (int i = 0; i < maps; ++i) {
    if (first.maps[i].address == far(0)) {
      ++overQ;
      CHECK(moved.maps[i].address == far(5));
    } else {
      CHECK(moved.maps[i].address == first.maps[i].address);
    }
  }
  CHECK(overQ > 0);
  CHECK(encodes() == overQ);
  ::unsetenv("FAKE_CUDA_LOG");
  llvm::sys::fs::remove(log);
}

TEST_CASE("while a stream is captured into a CUDA graph, a call is its launches and nothing else",
          "[fake]") {
  // The fake refuses stream and event synchronization while capturing, as CUDA does; a launch
  // synchronizes nothing and allocates nothing (its tensor maps travel by value), and with
  // autotuning on the kernel is not tuned (that times candidates with events).
  useFakeDriver();
  ::setenv("FAKE_CUDA_CAPTURING", "1", 1);
  jit::setAutotune(true);
  AttentionProblem p = problem();
  p.seqQ = 4000; // a shape no other test launched
  p.scale = 0.2;
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK),
         v = p.contiguous(address(2), p.seqK), o = p.contiguous(address(3), p.seqQ);
  const std::string result = messageOf(attentionForward(p, q, k, v, o, RowVector{address(4)}));
  jit::setAutotune(false);
  ::unsetenv("FAKE_CUDA_CAPTURING");
  REQUIRE(result == "no error");
  std::vector<fake_cuda_launch_record> fwd = launches();
  REQUIRE(fwd.size() == 1);
  checkLaunch(fwd[0], p, Kind::fwd);
}

TEST_CASE("a launch that does not pass the kernel's parameters is refused", "[fake]") {
  useFakeDriver();
  const AttentionProblem p = problem();
  auto cache = jit::KernelCache::get();
  REQUIRE(static_cast<bool>(cache));
  auto fwd = (*cache)->kernel(jit::defaultSpec(p, Kind::fwd, (*cache)->arch()));
  REQUIRE(static_cast<bool>(fwd));
  const runtime::LoadedKernel &kernel = *(*fwd)->loaded;
  Tensor t = p.contiguous(address(0), p.seqQ);
  jit::Bindings bindings;
  for (kernels::Operand o : {kernels::Operand::q, kernels::Operand::k, kernels::Operand::v,
                             kernels::Operand::o, kernels::Operand::dO, kernels::Operand::dQ})
    bindings.bind(o, t);
  for (kernels::Operand o : {kernels::Operand::lse, kernels::Operand::D})
    bindings.bind(o, RowVector{address(1)});

  // bwd_q's arguments for the forward kernel: the launcher compares them with the parameters
  // the driver says the kernel takes (cuFuncGetParamInfo) and launches nothing.
  runtime::KernelArgs wrong;
  jit::pack(Kind::bwd_q, p, bindings, wrong);
  std::string message = messageOf(runtime::launch((*cache)->driver(), kernel,
                                                  jit::gridFor((*fwd)->spec, p), wrong));
  CHECK_THAT(message, Catch::StartsWith(kernel.entry() + " takes ") &&
                          Catch::Contains("a kernel compiled for another calling convention"));
  CHECK(launches().empty());

  // The fake itself refuses a tensor-map parameter that is not an encoded map, as a kernel
  // would read garbage from it.
  runtime::KernelArgs args;
  jit::pack(Kind::fwd, p, bindings, args);
  llvm::MutableArrayRef<CUtensorMap> maps = args.tensorMaps(kernel.tensorMaps().size());
  REQUIRE(maps.size() == kernel.tensorMaps().size());
  std::memset(maps.data(), 0, maps.size() * sizeof(CUtensorMap));
  llvm::SmallVector<void *, 160> params = args.pointers();
  CHECK(params.size() == kernel.paramSizes().size());
  CHECK((*cache)->driver().api().cuLaunchKernel(kernel.function(), 1, 1, 1, kernel.threads(), 1,
                                                1, kernel.sharedBytes(), nullptr, params.data(),
                                                nullptr) == CUDA_ERROR_INVALID_VALUE);
  CHECK(launches().empty());
}

namespace {
// The disk-cache entry of `spec` under the cache directory `dir`.
std::string entryDirOf(llvm::StringRef dir, const compiler::KernelSpec &spec) {
  const std::string key = runtime::DiskCache::keyFor(jit::KernelKey(spec).text());
  return (dir + "/" + key.substr(0, 2) + "/" + key).str();
}

std::string readBytes(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  REQUIRE(buffer);
  return (*buffer)->getBuffer().str();
}

void writeBytes(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  REQUIRE(!ec);
  os << bytes;
}

llvm::json::Object readJson(const std::string &path) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(readBytes(path));
  REQUIRE(static_cast<bool>(value));
  REQUIRE(value->getAsObject());
  return std::move(*value->getAsObject());
}

void writeJson(const std::string &path, llvm::json::Object object) {
  writeBytes(path, llvm::formatv("{0:2}", llvm::json::Value(std::move(object))).str());
}

// Replaces the entry's file `name` with `bytes` and records their size and SHA-256 in its
// metadata.json, as a valid entry would: only the contents are wrong.
void replaceFile(const std::string &entry, llvm::StringRef name, llvm::StringRef bytes) {
  writeBytes(entry + "/" + name.str(), bytes);
  llvm::json::Object meta = readJson(entry + "/metadata.json");
  bool found = false;
  for (llvm::json::Value &f : *meta.getArray("files")) {
    llvm::json::Object &record = *f.getAsObject();
    if (record.getString("name") != name)
      continue;
    found = true;
    record["size"] = int64_t(bytes.size());
    record["sha256"] = llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)),
                                   /*LowerCase=*/true);
  }
  REQUIRE(found);
  writeJson(entry + "/metadata.json", std::move(meta));
}

// A new context made current: its kernel cache (jit::KernelCache, one per context) starts
// empty, as in a new process, so the next call looks the disk cache up again.
void useFreshContext() {
  static int contexts[64];
  static size_t used = 0;
  REQUIRE(used < std::size(contexts));
  auto driver = runtime::CudaDriver::get();
  REQUIRE(static_cast<bool>(driver));
  REQUIRE(driver->api().cuCtxSetCurrent(reinterpret_cast<CUcontext>(&contexts[used++])) ==
          CUDA_SUCCESS);
}

// `r` launched what `expected` did: the same kernel, block, shared memory, parameters and
// tensor maps (each one's tensor, bound, box and swizzle, as the fake's encoder got them).
void checkSameLaunch(const fake_cuda_launch_record &r, const fake_cuda_launch_record &expected) {
  CHECK(std::string(r.entry) == expected.entry);
  CHECK(r.block[0] == expected.block[0]);
  CHECK(r.sharedBytes == expected.sharedBytes);
  CHECK(r.params == expected.params);
  CHECK(r.tensorMaps == expected.tensorMaps);
  for (unsigned i = 0; i < std::min({r.tensorMaps, expected.tensorMaps, unsigned(std::size(r.maps))});
       ++i) {
    INFO("tensor map " << i);
    CHECK(r.maps[i].address == expected.maps[i].address);
    CHECK(r.maps[i].rows == expected.maps[i].rows);
    CHECK(r.maps[i].box[0] == expected.maps[i].box[0]);
    CHECK(r.maps[i].box[1] == expected.maps[i].box[1]);
    CHECK(r.maps[i].swizzle == expected.maps[i].swizzle);
  }
}

// `ptx` with the last parameter of its kernel removed: a kernel of another calling convention.
std::string withoutLastParam(std::string ptx) {
  const size_t entry = ptx.find(".entry ");
  REQUIRE(entry != std::string::npos);
  const size_t close = ptx.find(')', entry);
  const size_t comma = ptx.rfind(',', close);
  REQUIRE((comma != std::string::npos && comma > entry));
  return ptx.erase(comma, close - comma);
}
} // namespace

TEST_CASE("a cache entry whose launch facts or cubin are not its spec's is recompiled in the call "
          "that finds it, and the launch uses the facts derived from the spec",
          "[.cached-metadata]") {
  // Hidden from the default run: a process of its own (CTest fake_driver_cached_metadata) with a
  // fresh disk cache directory (fixed at its first use in a process), whose entries it edits.
  useFakeDriver();
  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("flashbob-cached-metadata", dir));
  support::setOverride(support::Knob::CacheDir, dir);
  std::vector<std::string> warnings, compiled;
  support::setLogSink([&](support::LogLevel level, llvm::StringRef message) {
    if (level == support::LogLevel::Warning)
      warnings.push_back(message.str());
  });
  support::setProgressSink([&](const support::Progress &p) {
    if (llvm::StringRef(p.task).starts_with("compiling "))
      compiled.push_back(p.detail);
  });

  const AttentionProblem p = problem();
  const Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK),
               v = p.contiguous(address(2), p.seqK), o = p.contiguous(address(3), p.seqQ);
  // One forward in a fresh context: its launch, or none when the call failed.
  auto forward = [&](const AttentionProblem &problem) -> std::optional<fake_cuda_launch_record> {
    useFreshContext();
    warnings.clear();
    compiled.clear();
    const std::string result = messageOf(attentionForward(problem, q, k, v, o, RowVector{address(4)}));
    std::vector<fake_cuda_launch_record> all = launches();
    CHECK(result == "no error");
    if (result != "no error" || all.size() != 1)
      return std::nullopt;
    return all[0];
  };

  const compiler::KernelSpec spec = jit::defaultSpec(p, Kind::fwd, bob::Arch::sm_90a);
  std::optional<fake_cuda_launch_record> clean = forward(p); // compiled and stored
  REQUIRE(clean);
  CHECK(compiled == std::vector<std::string>{spec.name()});
  checkLaunch(*clean, p, Kind::fwd);
  // Maps over k and v differ in their tensor: a swap shows in the launch.
  REQUIRE(clean->tensorMaps >= 3);
  const std::string entry = entryDirOf(dir, spec), metaPath = entry + "/metadata.json";
  const llvm::json::Object stored = readJson(metaPath);
  const std::string cubin = readBytes(entry + "/kernel.cubin");
  REQUIRE(forward(p)); // a hit: nothing compiled, nothing said
  CHECK(compiled.empty());
  CHECK(warnings.empty());

  // After each edit the next call warns, recompiles, launches what the spec derives and leaves
  // the compiler's entry behind.
  auto recompiledOnce = [&](const std::string &reason) {
    std::optional<fake_cuda_launch_record> r = forward(p);
    if (r)
      checkSameLaunch(*r, *clean);
    CHECK(compiled == std::vector<std::string>{spec.name()});
    CHECK(warnings.size() == 1);
    for (const std::string &warning : warnings)
      CHECK_THAT(warning, Catch::Contains("kernel cache entry " + entry + " not used (") &&
                              Catch::Contains(reason) && Catch::Contains("recompiled"));
    const llvm::json::Object now = readJson(metaPath);
    CHECK(*now.getObject("metadata") == *stored.getObject("metadata"));
    CHECK(readBytes(entry + "/kernel.cubin") == cubin);
    // and the next call is a hit again
    CHECK(forward(p));
    CHECK(compiled.empty());
    CHECK(warnings.empty());
  };

  using Maps = llvm::json::Array;
  struct Edit {
    const char *what;
    std::function<void(llvm::json::Object &)> apply; // to metadata.json's "metadata"
    std::string reason;
  };
  auto mapOver = [](Maps &maps, int64_t tensor) -> llvm::json::Value & {
    for (llvm::json::Value &m : maps)
      if ((*m.getAsArray())[0].getAsInteger() == tensor)
        return m;
    FAIL("no tensor map over memref " << tensor);
    return maps[0];
  };
  const Edit edits[] = {
      {"shared_bytes lowered", [](llvm::json::Object &m) { m["shared_bytes"] = 1024; },
       "shared_bytes = 1024, but " + spec.name() + " uses " + std::to_string(clean->sharedBytes)},
      {"threads lowered", [](llvm::json::Object &m) { m["threads"] = 128; }, "threads = 128"},
      {"the K and V maps swapped",
       [&](llvm::json::Object &m) {
         Maps &maps = *m.getArray("tensor_maps");
         std::swap(mapOver(maps, 1), mapOver(maps, 2));
       },
       "tensor_maps["},
      {"box rows halved",
       [](llvm::json::Object &m) {
         llvm::json::Array &first = *(*m.getArray("tensor_maps"))[0].getAsArray();
         first[2] = *first[2].getAsInteger() / 2;
       },
       "tensor_maps[0] = "},
      {"a map repeated",
       [](llvm::json::Object &m) {
         Maps &maps = *m.getArray("tensor_maps");
         maps[1] = maps[0];
       },
       "tensor_maps[1] = "},
      {"a map dropped", [](llvm::json::Object &m) { m.getArray("tensor_maps")->pop_back(); },
       std::to_string(clean->tensorMaps - 1) + " tensor maps, but " + spec.name() + " takes " +
           std::to_string(clean->tensorMaps)},
  };
  for (const Edit &edit : edits) {
    INFO(edit.what);
    // The entry as it is now (a recompile leaves another ptxas.log, its checksum with it).
    llvm::json::Object meta = readJson(metaPath);
    edit.apply(*meta.getObject("metadata"));
    writeJson(metaPath, std::move(meta));
    recompiledOnce(edit.reason);
  }

  // A cubin that is not this kernel, its checksum made right: another kernel's (the causal
  // forward's) ...
  AttentionProblem causal = p;
  causal.causal = true;
  REQUIRE(forward(causal));
  const compiler::KernelSpec causalSpec = jit::defaultSpec(causal, Kind::fwd, bob::Arch::sm_90a);
  {
    INFO("another kernel's cubin");
    replaceFile(entry, "kernel.cubin", readBytes(entryDirOf(dir, causalSpec) + "/kernel.cubin"));
    recompiledOnce("the cubin has no kernel " + spec.name());
  }
  // ... or this kernel in another calling convention: one parameter fewer than a launch passes.
  {
    INFO("a cubin of another calling convention");
    replaceFile(entry, "kernel.cubin", withoutLastParam(readBytes(entry + "/kernel.ptx")));
    recompiledOnce(spec.name() + " takes " + std::to_string(clean->params - 1) +
                   " parameters, the launch passes " + std::to_string(clean->params));
  }

  support::setLogSink(nullptr);
  support::setProgressSink(nullptr);
  llvm::sys::fs::remove_directories(dir);
}

// Run by CTest with FAKE_CUDA_CC=75 and =100 (hidden from a plain run: the device's compute
// capability is fixed for a process).
TEST_CASE("an unsupported GPU is FLASHBOB_ERROR_UNSUPPORTED_DEVICE, nothing compiled or launched",
          "[.unsupported]") {
  useFakeDriver();
  const std::string cc = std::getenv("FAKE_CUDA_CC") ? std::getenv("FAKE_CUDA_CC") : "";
  REQUIRE((cc == "75" || cc == "100"));
  const AttentionProblem p = problem();
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK);
  flashbob_problem cp = cProblem(p);
  CHECK(flashbob_forward(&cp, cTensor(q), cTensor(k), cTensor(k),
                         cTensor(p.contiguous(address(3), p.seqQ)),
                         reinterpret_cast<float *>(address(2)), nullptr) ==
        FLASHBOB_ERROR_UNSUPPORTED_DEVICE);
  const std::string device = cc == "75" ? "sm_75" : "sm_100";
  CHECK_THAT(flashbob_last_error(),
             Catch::StartsWith("this GPU (" + device + ") is not supported: "));
  CHECK(launches().empty());
}

TEST_CASE("precompiling where no thread can be started compiles on the calling thread and "
          "never ends the process",
          "[.threadlimit]") {
  // Hidden from the default run (CTest fake_driver_thread_limit): the child gives up root to
  // be held to a limit of one process or thread for its user (RLIMIT_NPROC; root is exempt).
  test::ChildResult child = test::runInChild(
      [] {
        useFakeDriver();
        llvm::SmallString<128> dir;
        if (llvm::sys::fs::createUniqueDirectory("flashbob-thread-limit", dir) ||
            ::chown(dir.c_str(), 65534, 65534) != 0)
          return 10;
        support::setOverride(support::Knob::CacheDir, dir);
        // The driver's JIT: under the limit ptxas could not be started either.
        support::setOverride(support::Knob::Assembler, "driver");
        std::set<std::thread::id> threads;
        size_t compiled = 0;
        support::setProgressSink([&](const support::Progress &p) {
          if (llvm::StringRef(p.task).starts_with("compiling ")) {
            ++compiled;
            threads.insert(std::this_thread::get_id());
          }
        });
        const rlimit one{1, 1};
        if (::setgid(65534) != 0 || ::setuid(65534) != 0 || ::setrlimit(RLIMIT_NPROC, &one) != 0)
          return 11;
        try { // the limit holds: no thread starts
          std::thread([] {}).join();
          return 12;
        } catch (const std::system_error &) {
        }
        AttentionProblem p = problem();
        flashbob_problem cp = cProblem(p);
        const flashbob_op step[] = {FLASHBOB_OP_FORWARD, FLASHBOB_OP_BACKWARD, FLASHBOB_OP_BOB,
                                    FLASHBOB_OP_FORWARD_JVP};
        if (flashbob_precompile_ops(&cp, step, 4) != FLASHBOB_OK) {
          std::fprintf(stderr, "precompile: %s\n", flashbob_last_error());
          return 13;
        }
        const bool here = threads.size() == 1 && *threads.begin() == std::this_thread::get_id();
        return compiled == 6 && here ? 0 : 14;
      },
      std::chrono::seconds(300));
  INFO(child.describe() << " (10: setup, 11: dropping root or the limit, 12: a thread started "
                           "anyway, 13: precompile failed, 14: not six kernels on this thread)");
  CHECK(child.succeeded());
}

TEST_CASE("precompiling the operations of an HVP step compiles their kernels at once, one "
          "thread each; later calls compile nothing",
          "[.parallel]") {
  // Hidden from the default run: a process of its own (CTest fake_driver_parallel_compile) whose
  // disk cache is a fresh directory, so that every kernel compiles. (The disk cache's directory
  // is fixed at its first use in a process.)
  useFakeDriver();
  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("flashbob-parallel-compile", dir));
  support::setOverride(support::Knob::CacheDir, dir);
  struct Compiled {
    std::string kernel;
    size_t step, total;
    std::thread::id thread;
  };
  std::mutex mutex;
  std::vector<Compiled> compiled;
  support::setProgressSink([&](const support::Progress &p) {
    std::lock_guard<std::mutex> lock(mutex);
    if (llvm::StringRef(p.task).starts_with("compiling "))
      compiled.push_back({p.detail, p.step, p.total, std::this_thread::get_id()});
  });

  AttentionProblem p = problem();
  p.causal = true;
  flashbob_problem cp = cProblem(p);
  const flashbob_op step[] = {FLASHBOB_OP_FORWARD, FLASHBOB_OP_BACKWARD, FLASHBOB_OP_BOB,
                              FLASHBOB_OP_FORWARD_JVP};
  REQUIRE(flashbob_precompile_ops(&cp, step, 4) == FLASHBOB_OK);
  // fwd, bwd_q, bwd_kv, bob_q, bob_kv, fwd_jvp: six kernels, each on a thread of its own (none
  // on the caller's), each reported with its place among the six.
  REQUIRE(compiled.size() == 6);
  std::set<std::thread::id> threads;
  std::set<size_t> steps;
  const char *kinds[] = {"fwd_", "bwd_q_", "bwd_kv_", "bob_q_", "bob_kv_", "fwd_jvp_"};
  for (const Compiled &c : compiled) {
    INFO(c.kernel << " (" << c.step << "/" << c.total << ")");
    CHECK(c.total == 6);
    REQUIRE((c.step >= 1 && c.step <= 6));
    CHECK(llvm::StringRef(c.kernel).starts_with(kinds[c.step - 1]));
    CHECK(c.thread != std::this_thread::get_id());
    threads.insert(c.thread);
    steps.insert(c.step);
  }
  CHECK(threads.size() == 6);
  CHECK(steps.size() == 6);

  // Loaded: the operations' calls (and a second precompile) compile nothing more.
  compiled.clear();
  REQUIRE(flashbob_precompile_ops(&cp, step, 4) == FLASHBOB_OK);
  Tensor q = p.contiguous(address(0), p.seqQ), k = p.contiguous(address(1), p.seqK);
  REQUIRE(!attentionForward(p, q, k, k, p.contiguous(address(3), p.seqQ), RowVector{address(2)}));
  for (const Compiled &c : compiled)
    UNSCOPED_INFO("compiled again: " << c.kernel);
  CHECK(compiled.empty());
  CHECK(launches().size() == 1);

  // Bad lists name the argument; nothing compiled.
  const flashbob_op bad[] = {FLASHBOB_OP_FORWARD, FLASHBOB_OP_BOB, static_cast<flashbob_op>(9)};
  CHECK(flashbob_precompile_ops(&cp, bad, 3) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("ops[2]"));
  CHECK(flashbob_precompile_ops(&cp, step, 0) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("count"));
  CHECK(flashbob_precompile_ops(&cp, nullptr, 2) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("ops"));
  CHECK(compiled.empty());
  support::setProgressSink(nullptr);
  llvm::sys::fs::remove_directories(dir);
}

namespace {

// A memref argument as a launch passed it (the fake keeps the 8-byte parameters in order).
struct LaunchedMemRef {
  uint64_t data = 0;
  int64_t sizes[4] = {0, 0, 0, 0}, strides[4] = {0, 0, 0, 0};
};

// The memref arguments of launch `r` of `kind`, by operand.
std::map<kernels::Operand, LaunchedMemRef> memrefsOf(const fake_cuda_launch_record &r, Kind kind,
                                                      const AttentionProblem &p) {
  std::map<kernels::Operand, LaunchedMemRef> out;
  size_t w = 0;
  for (const kernels::Param &param : kernels::signature(kind, p.varlen, p.ringStep)) {
    if (param.isScalar)
      continue;
    size_t rank = 4;
    switch (kernels::operandInfo(param.operand).layout) {
    case kernels::Layout::tensor: rank = 4; break;
    case kernels::Layout::sums: rank = 4; break;     // the fused backward's dQaccum
    case kernels::Layout::rows: rank = 3; break;
    case kernels::Layout::counters: rank = 3; break; // its dQsemaphores
    case kernels::Layout::offsets: rank = 1; break;
    }
    REQUIRE(w + 3 + 2 * rank <= r.wordCount);
    LaunchedMemRef m;
    CHECK(r.words[w + 2] == 0); // the offset: the aligned pointer is the data
    m.data = r.words[w + 1];
    for (size_t i = 0; i < rank; ++i) {
      m.sizes[i] = int64_t(r.words[w + 3 + i]);
      m.strides[i] = int64_t(r.words[w + 3 + rank + i]);
    }
    out[param.operand] = m;
    w += 3 + 2 * rank;
  }
  return out;
}

// Host memory standing in for device memory (the fake's device memory is the host's).
class HostMemory {
public:
  explicit HostMemory(size_t bytes)
      : bytes_((bytes + 255) / 256 * 256),
        data_(static_cast<unsigned char *>(std::aligned_alloc(256, bytes_))) {}
  ~HostMemory() { std::free(data_); }
  HostMemory(const HostMemory &) = delete;
  CUdeviceptr address() const { return reinterpret_cast<CUdeviceptr>(data_); }

private:
  size_t bytes_;
  unsigned char *data_;
};

constexpr uint16_t kSentinel = 0xDEAD;

// A caller's tensor of the padded-copy test: (batch, seq, heads + 1, d + gap) memory, `gap`
// unused elements after each row and an unused head's row after each sequence position (they
// must never be written), inputs filled with values that differ by place, outputs with the
// sentinel. Element bytes 2, or 4 for a ring step's f32 outputs (then
// each element is two 16-bit halves).
struct CallerTensor {
  int64_t extents[3]; // batch, heads, rows
  int64_t d, gap, elementBytes;
  std::unique_ptr<HostMemory> memory;
  Tensor tensor() const {
    Tensor t;
    t.data = memory->address();
    t.stride[1] = d + gap;
    t.stride[2] = (extents[1] + 1) * (d + gap);
    t.stride[0] = extents[2] * t.stride[2];
    return t;
  }
  uint16_t *at(int64_t b, int64_t h, int64_t r, int64_t c, int64_t half = 0) const {
    const Tensor t = tensor();
    const int64_t element = b * t.stride[0] + h * t.stride[1] + r * t.stride[2] + c;
    return reinterpret_cast<uint16_t *>(t.data) + element * (elementBytes / 2) + half;
  }
};

CallerTensor callerTensor(int64_t batch, int64_t heads, int64_t rows, int64_t d, int64_t gap,
                          int64_t elementBytes, bool input, uint32_t seed) {
  CallerTensor t{{batch, heads, rows}, d, gap, elementBytes, nullptr};
  const size_t elements = size_t(batch * rows * (heads + 1) * (d + gap));
  t.memory = std::make_unique<HostMemory>(elements * size_t(elementBytes));
  auto *words = reinterpret_cast<uint16_t *>(t.memory->address());
  for (size_t i = 0; i < elements * size_t(elementBytes / 2); ++i)
    words[i] = kSentinel;
  if (input)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < d; ++c)
            *t.at(b, h, r, c) = uint16_t(1 + ((seed * 7919u + uint32_t(((b * heads + h) * rows + r) * d + c) * 2654435761u) >> 17) % 60000);
  return t;
}

// The caller's tensors of one call and what the kernels must have seen of them: each padded
// tensor as wide as jit::paddedProblem's head dim (kernelHeadDim(d), or of the wider of d and
// d_v), 16-byte aligned; an input's first columns (its own width) its values and the rest
// zeros; an output's first columns copied back where the caller's are, nothing else of the
// caller's memory written.
void checkPaddedCall(const std::vector<fake_cuda_launch_record> &records,
                     llvm::ArrayRef<Kind> kinds, const AttentionProblem &p,
                     const std::map<kernels::Operand, const CallerTensor *> &caller) {
  REQUIRE(records.size() == kinds.size());
  const int64_t width = jit::paddedProblem(p).headDim;
  for (size_t i = 0; i < kinds.size(); ++i) {
    INFO(records[i].entry);
    for (const kernels::Param &param : kernels::signature(kinds[i], p.varlen, p.ringStep)) {
      if (param.isScalar || kernels::operandInfo(param.operand).layout != kernels::Layout::tensor)
        continue;
      INFO(kernels::operandInfo(param.operand).name.str());
      const LaunchedMemRef m = memrefsOf(records[i], kinds[i], p).at(param.operand);
      const CallerTensor &t = *caller.at(param.operand);
      CHECK(m.sizes[0] == t.extents[0]);
      CHECK(m.sizes[1] == t.extents[1]);
      CHECK(m.sizes[2] == t.extents[2]);
      CHECK(m.sizes[3] == width);
      CHECK(m.strides[3] == 1);
      CHECK(m.data % 16 == 0);
      for (int k = p.varlen ? 1 : 0; k < 3; ++k)
        CHECK(m.strides[k] * t.elementBytes % 16 == 0);
      auto padded = [&](int64_t b, int64_t h, int64_t r, int64_t c, int64_t half) {
        const int64_t element = b * m.strides[0] + h * m.strides[1] + r * m.strides[2] + c;
        return reinterpret_cast<const uint16_t *>(m.data)[element * (t.elementBytes / 2) + half];
      };
      int64_t wrong = 0, written = 0;
      for (int64_t b = 0; b < t.extents[0]; ++b)
        for (int64_t h = 0; h < t.extents[1]; ++h)
          for (int64_t r = 0; r < t.extents[2]; ++r) {
            for (int64_t c = 0; c < width; ++c)
              for (int64_t half = 0; half < t.elementBytes / 2; ++half) {
                const uint16_t seen = padded(b, h, r, c, half);
                if (!param.output)
                  wrong += seen != (c < t.d ? *t.at(b, h, r, c) : 0);
                else if (c < t.d)
                  wrong += seen != *t.at(b, h, r, c, half);
              }
            for (int64_t c = t.d; c < t.d + t.gap; ++c)
              for (int64_t half = 0; half < t.elementBytes / 2; ++half)
                written += *t.at(b, h, r, c, half) != kSentinel;
          }
      CHECK(wrong == 0);
      CHECK(written == 0);
    }
  }
}

} // namespace

TEST_CASE("a head dim the kernels take through zero-padded copies: the copies, the kernels, the "
          "scale 1/sqrt(d)",
          "[fake]") {
  // d = 100 (no multiple of 8): every tensor of every operation is copied into zero-padded
  // memory 112 wide (one stream-ordered allocation, one memset of the inputs' padding columns,
  // one copy per tensor for this layout with gaps: a 3D copy of the query side's heads and
  // rows, a 2D copy of the key side's rows, whose one head is no dimension),
  // the kernels of d = 112 run on it with the scale 1/sqrt(100) as their argument, and the
  // outputs' first 100 columns come back. The fake's device memory is the host's: the scratch
  // memory is read back as the kernels would have read it. Grouped heads (3 query heads, 1 key
  // and value head), both dtypes' element size the same.
  useFakeDriver();
  AttentionProblem p = problem();
  p.batch = 2;
  p.heads = 3;
  p.headsKv = 1;
  p.seqQ = 300;
  p.seqK = 200;
  p.headDim = 100;
  REQUIRE(jit::headDimPadding(p) == jit::HeadDimPadding::copy);
  const int64_t gap = 3; // rows 103 elements apart: only element-aligned
  auto querySide = [&](bool input, uint32_t seed, int64_t bytes = 2) {
    return callerTensor(p.batch, p.heads, p.seqQ, p.headDim, gap, bytes, input, seed);
  };
  auto keySide = [&](bool input, uint32_t seed, int64_t bytes = 2) {
    return callerTensor(p.batch, p.keyValueHeads(), p.seqK, p.headDim, gap, bytes, input, seed);
  };
  CallerTensor q = querySide(true, 1), k = keySide(true, 2), v = keySide(true, 3),
               o = querySide(true, 4), dO = querySide(true, 5), uQ = querySide(true, 6),
               uK = keySide(true, 7), uV = keySide(true, 8);
  HostMemory rows(size_t(p.batch * p.heads * p.seqQ) * 4 * 4);
  const RowVector lse{rows.address()}, dRow{rows.address() + size_t(p.batch * p.heads * p.seqQ) * 4},
      cRow{dRow.data + size_t(p.batch * p.heads * p.seqQ) * 4},
      bRow{cRow.data + size_t(p.batch * p.heads * p.seqQ) * 4};
  using kernels::Operand;
  auto expectCopies = [&](int querySide, int keySide) {
    CHECK(callCount("cuMemAllocAsync") == 1);
    CHECK(callCount("cuMemsetD2D8Async") == 1);
    CHECK(callCount("cuMemcpy3DAsync") == querySide);
    CHECK(callCount("cuMemcpy2DAsync") == keySide);
    CHECK(callCount("cuMemFreeAsync") == 1);
    CHECK(callCount("cuStreamSynchronize") == 0);
  };
  auto checkScale = [&](const std::vector<fake_cuda_launch_record> &records) {
    for (const fake_cuda_launch_record &r : records) {
      INFO(r.entry);
      CHECK(std::string(r.entry).find("_d112_") != std::string::npos);
      CHECK(std::string(r.entry).find("_scalearg_") != std::string::npos);
      REQUIRE(r.scalarCount >= 1);
      // The last scalar is s log2(e) of s = 1/sqrt(100) = 0.1, not 1/sqrt(112).
      CHECK(r.scalars[r.scalarCount - 1] == scalarBits(kernels::Scalar::scaleLog2e, 0.1));
    }
  };

  SECTION("forward") {
    CallerTensor out = querySide(false, 0);
    REQUIRE(messageOf(attentionForward(p, q.tensor(), k.tensor(), v.tensor(), out.tensor(), lse)) ==
            "no error");
    const std::vector<fake_cuda_launch_record> records = recordedLaunches();
    expectCopies(2, 2); // q, o; k, v
    checkScale(records);
    for (const fake_cuda_launch_record &r : records)
      checkLaunch(r, p, Kind::fwd);
    checkPaddedCall(records, {Kind::fwd}, p,
                    {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &out}});
    resetFake();
  }
  SECTION("backward, BoB and the forward's JVP") {
    CallerTensor dQ = querySide(false, 0), dK = keySide(false, 0), dV = keySide(false, 0);
    REQUIRE(messageOf(attentionBackward(p, q.tensor(), k.tensor(), v.tensor(), o.tensor(),
                                        dO.tensor(), lse, dQ.tensor(), dK.tensor(), dV.tensor(),
                                        dRow)) == "no error");
    std::vector<fake_cuda_launch_record> records = recordedLaunches();
    expectCopies(4, 4); // q, o, dO, dQ; k, v, dK, dV
    checkScale(records);
    checkPaddedCall(records, {Kind::bwd_q, Kind::bwd_kv}, p,
                    {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &o},
                     {Operand::dO, &dO}, {Operand::dQ, &dQ}, {Operand::dK, &dK},
                     {Operand::dV, &dV}});
    resetFake();

    CallerTensor gQ = querySide(false, 0), gK = keySide(false, 0), gV = keySide(false, 0),
                 gdO = querySide(false, 0);
    BobInputs in{q.tensor(), k.tensor(), v.tensor(), o.tensor(), dO.tensor(), lse,
                 uQ.tensor(), uK.tensor(), uV.tensor()};
    REQUIRE(messageOf(attentionBob(p, in, {gQ.tensor(), gK.tensor(), gV.tensor(), gdO.tensor(),
                                           dRow, cRow, bRow})) == "no error");
    records = recordedLaunches();
    expectCopies(6, 6); // q, o, dO, uQ, gQ, gdO; k, v, uK, uV, gK, gV
    checkScale(records);
    checkPaddedCall(records, {Kind::bob_q, Kind::bob_kv}, p,
                    {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &o},
                     {Operand::dO, &dO}, {Operand::uQ, &uQ}, {Operand::uK, &uK},
                     {Operand::uV, &uV}, {Operand::gQ, &gQ}, {Operand::gK, &gK},
                     {Operand::gV, &gV}, {Operand::gdO, &gdO}});
    resetFake();

    // The JVP along tangents bound to the same memory as q, k and v: one copy each serves both.
    CallerTensor tO = querySide(false, 0);
    REQUIRE(messageOf(attentionForwardJvp(p, q.tensor(), k.tensor(), v.tensor(), o.tensor(), lse,
                                          q.tensor(), k.tensor(), v.tensor(), tO.tensor())) ==
            "no error");
    records = recordedLaunches();
    expectCopies(3, 2); // q, o, tO; k, v
    checkScale(records);
    checkPaddedCall(records, {Kind::fwd_jvp}, p,
                    {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &o},
                     {Operand::tQ, &q}, {Operand::tK, &k}, {Operand::tV, &v},
                     {Operand::tO, &tO}});
    const std::map<Operand, LaunchedMemRef> jvp = memrefsOf(records[0], Kind::fwd_jvp, p);
    CHECK(jvp.at(Operand::tQ).data == jvp.at(Operand::q).data);
    resetFake();
  }
  SECTION("a ring step's float32 outputs") {
    AttentionProblem ring = p;
    ring.ringStep = true;
    CallerTensor x[4] = {querySide(false, 0, 4), querySide(false, 0, 4), querySide(false, 0, 4),
                         querySide(false, 0, 4)};
    BobInputs in{q.tensor(), k.tensor(), v.tensor(), o.tensor(), dO.tensor(), lse,
                 uQ.tensor(), uK.tensor(), uV.tensor()};
    REQUIRE(messageOf(attentionBobPass1(ring, in, {x[0].tensor(), x[1].tensor(), x[2].tensor(),
                                                   x[3].tensor(), dRow, cRow, bRow})) ==
            "no error");
    const std::vector<fake_cuda_launch_record> records = recordedLaunches();
    expectCopies(8, 4); // q, o, dO, uQ, X1..X4; k, v, uK, uV
    checkScale(records);
    checkPaddedCall(records, {Kind::bob_q}, ring,
                    {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &o},
                     {Operand::dO, &dO}, {Operand::uQ, &uQ}, {Operand::uK, &uK},
                     {Operand::uV, &uV}, {Operand::X1, &x[0]}, {Operand::X2, &x[1]},
                     {Operand::X3, &x[2]}, {Operand::X4, &x[3]}});
    resetFake();
  }
  SECTION("a device without memory pools allocates, waits for the stream and frees; refuses "
          "capture") {
    ::setenv("FAKE_CUDA_MEMORY_POOLS", "0", 1);
    CallerTensor out = querySide(false, 0);
    const std::string plain =
        messageOf(attentionForward(p, q.tensor(), k.tensor(), v.tensor(), out.tensor(), lse));
    CHECK(callCount("cuMemAllocAsync") == 0);
    CHECK(callCount("cuMemAlloc") == 1);
    CHECK(callCount("cuStreamSynchronize") == 1);
    CHECK(callCount("cuMemFree") == 1);
    CHECK(recordedLaunches().size() == 1);
    resetFake();
    ::setenv("FAKE_CUDA_CAPTURING", "1", 1);
    llvm::Error captured =
        attentionForward(p, q.tensor(), k.tensor(), v.tensor(), out.tensor(), lse);
    ::unsetenv("FAKE_CUDA_CAPTURING");
    ::unsetenv("FAKE_CUDA_MEMORY_POOLS");
    CHECK(plain == "no error");
    const std::string message = messageOf(std::move(captured));
    CHECK_THAT(message, Catch::Contains("head_dim 100 is copied into zero-padded memory"));
    CHECK(launches().empty());
  }
}

TEST_CASE("q and k of one head dim, v of another: each tensor copied at its own width",
          "[fake]") {
  // Multi-head latent attention's widths (q, k 192; v and its kin 128), and a pair where v is
  // the wider and neither a tile width (40 and 72: both run 80 wide). Every tensor is copied
  // into memory of the padded width, from its own: q and its kin from d, v and its kin from d_v;
  // the inputs' padding zeroed by one memset per width narrower than the padded one; the
  // kernels run at that width with the scale 1/sqrt(d) (q's and k's, never v's or the padded
  // width's): compiled in where the width is d, else their argument.
  useFakeDriver();
  using kernels::Operand;
  for (auto [d, dv] : {std::pair<int64_t, int64_t>{192, 128}, {40, 72}}) {
    AttentionProblem p = problem();
    p.batch = 1;
    p.heads = 2;
    p.headsKv = 1;
    p.seqQ = 70;
    p.seqK = 50;
    p.headDim = d;
    p.headDimV = dv;
    INFO("d = " << d << ", d_v = " << dv);
    REQUIRE(jit::headDimPadding(p) == jit::HeadDimPadding::copy);
    const AttentionProblem padded = jit::paddedProblem(p);
    const int64_t width = bob::kernelHeadDim(std::max(d, dv));
    REQUIRE(padded.headDim == width);
    REQUIRE(padded.valueDim() == width);
    const int64_t gap = 2;
    auto tensor = [&](bool query, bool values, bool input, uint32_t seed) {
      return callerTensor(p.batch, query ? p.heads : p.keyValueHeads(), query ? p.seqQ : p.seqK,
                          values ? dv : d, gap, 2, input, seed);
    };
    CallerTensor q = tensor(true, false, true, 1), k = tensor(false, false, true, 2),
                 v = tensor(false, true, true, 3), o = tensor(true, true, true, 4),
                 dO = tensor(true, true, true, 5), uQ = tensor(true, false, true, 6),
                 uK = tensor(false, false, true, 7), uV = tensor(false, true, true, 8);
    HostMemory rows(size_t(p.batch * p.heads * p.seqQ) * 4 * 4);
    const size_t rowBytes = size_t(p.batch * p.heads * p.seqQ) * 4;
    const RowVector lse{rows.address()}, dRow{rows.address() + rowBytes},
        cRow{rows.address() + 2 * rowBytes}, bRow{rows.address() + 3 * rowBytes};
    // One memset per input width below the padded one.
    const int memsets = (d < width) + (dv < width);
    auto check = [&](llvm::ArrayRef<Kind> kinds,
                     const std::map<Operand, const CallerTensor *> &caller) {
      CHECK(callCount("cuMemAllocAsync") == 1);
      CHECK(callCount("cuMemsetD2D8Async") == memsets);
      CHECK(callCount("cuMemFreeAsync") == 1);
      const std::vector<fake_cuda_launch_record> records = recordedLaunches();
      REQUIRE(records.size() == kinds.size());
      for (size_t i = 0; i < records.size(); ++i) {
        INFO(records[i].entry);
        checkLaunch(records[i], padded, kinds[i]);
        // At d = 192 the kernels' width is d: its default scale is compiled in.
        const bool scaleArgument = width != d;
        CHECK((std::string(records[i].entry).find("_scalearg_") != std::string::npos) ==
              scaleArgument);
        if (!scaleArgument)
          continue;
        REQUIRE(records[i].scalarCount >= 1);
        CHECK(records[i].scalars[records[i].scalarCount - 1] ==
              scalarBits(kernels::Scalar::scaleLog2e, 1 / std::sqrt(double(d))));
      }
      checkPaddedCall(records, kinds, p, caller);
      resetFake();
    };

    CallerTensor out = tensor(true, true, false, 0);
    REQUIRE(messageOf(attentionForward(p, q.tensor(), k.tensor(), v.tensor(), out.tensor(),
                                       lse)) == "no error");
    check({Kind::fwd}, {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &out}});

    CallerTensor dQ = tensor(true, false, false, 0), dK = tensor(false, false, false, 0),
                 dV = tensor(false, true, false, 0);
    REQUIRE(messageOf(attentionBackward(p, q.tensor(), k.tensor(), v.tensor(), o.tensor(),
                                        dO.tensor(), lse, dQ.tensor(), dK.tensor(), dV.tensor(),
                                        dRow)) == "no error");
    check({Kind::bwd_q, Kind::bwd_kv},
          {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &o},
           {Operand::dO, &dO}, {Operand::dQ, &dQ}, {Operand::dK, &dK}, {Operand::dV, &dV}});

    CallerTensor gQ = tensor(true, false, false, 0), gK = tensor(false, false, false, 0),
                 gV = tensor(false, true, false, 0), gdO = tensor(true, true, false, 0);
    BobInputs in{q.tensor(),  k.tensor(),  v.tensor(),  o.tensor(), dO.tensor(), lse,
                 uQ.tensor(), uK.tensor(), uV.tensor()};
    REQUIRE(messageOf(attentionBob(p, in, {gQ.tensor(), gK.tensor(), gV.tensor(), gdO.tensor(),
                                           dRow, cRow, bRow})) == "no error");
    check({Kind::bob_q, Kind::bob_kv},
          {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v}, {Operand::o, &o},
           {Operand::dO, &dO}, {Operand::uQ, &uQ}, {Operand::uK, &uK}, {Operand::uV, &uV},
           {Operand::gQ, &gQ}, {Operand::gK, &gK}, {Operand::gV, &gV}, {Operand::gdO, &gdO}});

    CallerTensor tO = tensor(true, true, false, 0), o2 = tensor(true, true, false, 0);
    REQUIRE(messageOf(attentionForwardDual(p, q.tensor(), k.tensor(), v.tensor(), uQ.tensor(),
                                           uK.tensor(), uV.tensor(), o2.tensor(), lse,
                                           tO.tensor())) == "no error");
    check({Kind::fwd_dual}, {{Operand::q, &q}, {Operand::k, &k}, {Operand::v, &v},
                             {Operand::tQ, &uQ}, {Operand::tK, &uK}, {Operand::tV, &uV},
                             {Operand::o, &o2}, {Operand::tO, &tO}});
  }
}

TEST_CASE("head dims: what 40, 72 and 100 launch, and invalid ones launch nothing", "[fake]") {
  useFakeDriver();
  for (int64_t d : {40, 72, 100}) {
    AttentionProblem p = problem();
    p.headDim = d;
    INFO("d = " << d);
    const bool copied = jit::headDimPadding(p) == jit::HeadDimPadding::copy;
    // Contiguous tensors in host memory (the copies read and write them).
    std::vector<std::unique_ptr<HostMemory>> memory;
    auto tensor = [&](int, int64_t rows, int64_t heads) {
      memory.push_back(std::make_unique<HostMemory>(size_t(p.batch * heads * rows * d) * 2));
      return p.contiguous(memory.back()->address(), rows, heads);
    };
    HostMemory rows(size_t(p.batch * p.heads * p.seqQ) * 4 * 4);
    const int64_t rowBytes = p.batch * p.heads * p.seqQ * 4;
    Tensor q = tensor(0, p.seqQ, p.heads), k = tensor(1, p.seqK, p.heads),
           v = tensor(2, p.seqK, p.heads), o = tensor(3, p.seqQ, p.heads),
           dO = tensor(4, p.seqQ, p.heads);
    RowVector lse{rows.address()}, dRow{rows.address() + rowBytes},
        cRow{rows.address() + 2 * rowBytes}, bRow{rows.address() + 3 * rowBytes};
    REQUIRE(messageOf(attentionForward(p, q, k, v, o, lse)) == "no error");
    REQUIRE(messageOf(attentionBackward(p, q, k, v, o, dO, lse, tensor(5, p.seqQ, p.heads),
                                        tensor(6, p.seqK, p.heads), tensor(7, p.seqK, p.heads),
                                        dRow)) == "no error");
    BobInputs in{q, k, v, o, dO, lse, tensor(8, p.seqQ, p.heads), tensor(9, p.seqK, p.heads),
                 tensor(10, p.seqK, p.heads)};
    BobOutputs out{tensor(11, p.seqQ, p.heads), tensor(12, p.seqK, p.heads),
                   tensor(13, p.seqK, p.heads), tensor(14, p.seqQ, p.heads), dRow, cRow, bRow};
    REQUIRE(messageOf(attentionBob(p, in, out)) == "no error");
    REQUIRE(messageOf(attentionForwardJvp(p, q, k, v, o, lse, in.uQ, in.uK, in.uV,
                                          tensor(15, p.seqQ, p.heads))) == "no error");
    REQUIRE(messageOf(attentionForwardDual(p, q, k, v, in.uQ, in.uK, in.uV,
                                           tensor(16, p.seqQ, p.heads), lse,
                                           tensor(17, p.seqQ, p.heads))) == "no error");
    // Five calls: one allocation, one memset and one copy per tensor each (contiguous tensors:
    // one 2D copy of every row), or none at all.
    const int tensors = (3 + 1) + (5 + 3) + (8 + 4) + (7 + 1) + (6 + 2);
    CHECK(callCount("cuMemAllocAsync") == (copied ? 5 : 0));
    CHECK(callCount("cuMemsetD2D8Async") == (copied ? 5 : 0));
    CHECK(callCount("cuMemcpy2DAsync") == (copied ? tensors : 0));
    CHECK(callCount("cuMemcpy3DAsync") == 0);
    CHECK(callCount("cuMemFreeAsync") == (copied ? 5 : 0));
    std::vector<fake_cuda_launch_record> all = launches();
    REQUIRE(all.size() == 7);
    const Kind kinds[] = {Kind::fwd, Kind::bwd_q, Kind::bwd_kv, Kind::bob_q, Kind::bob_kv,
                          Kind::fwd_jvp, Kind::fwd_dual};
    const std::string width = "_d" + std::to_string(bob::kernelHeadDim(d)) + "_";
    for (size_t i = 0; i < all.size(); ++i) {
      INFO(all[i].entry);
      checkLaunch(all[i], p, kinds[i]);
      const std::string entry = all[i].entry;
      CHECK(entry.find(width) != std::string::npos);
      // The default scale 1/sqrt(d): compiled in only where the kernel knows d.
      CHECK((entry.find("_scalearg_") != std::string::npos) == copied);
      CHECK((entry.find("_t" + std::to_string(d) + "_") != std::string::npos) == !copied);
      // Padded in the kernel: the caller's tensors, d wide, are its memrefs and its tensor
      // maps' width (TMA reads the columns past d as zeros and clips its stores there).
      if (copied)
        continue;
      for (const auto &[operand, m] : memrefsOf(all[i], kinds[i], p))
        if (kernels::operandInfo(operand).layout == kernels::Layout::tensor)
          CHECK(m.sizes[3] == d);
      REQUIRE(all[i].tensorMaps > 0);
      for (unsigned j = 0; j < all[i].tensorMaps && j < 16; ++j)
        CHECK(all[i].maps[j].cols == uint64_t(d));
    }
  }
  // Nothing launched, allocated or copied for a head dim the library does not take.
  for (int64_t d : {0, 7, 257}) {
    AttentionProblem p = problem();
    p.headDim = d;
    INFO("d = " << d);
    HostMemory memory(1 << 20);
    Tensor t = p.contiguous(memory.address(), 1);
    llvm::Error e = attentionForward(p, t, t, t, t, RowVector{memory.address()});
    CHECK_THAT(messageOf(std::move(e)), Catch::Contains("head_dim " + std::to_string(d)));
    CHECK(callCount("cuMemAllocAsync") == 0);
    CHECK(launches().empty());
  }
}
