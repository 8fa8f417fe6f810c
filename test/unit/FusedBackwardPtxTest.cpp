// The fused backward's kernels (bwd_dot, bwd_fused, bwd_dq; kernels/bwd/FusedBackwardKernels.cpp)
// through ptxas, in the forms the backward can run them in (jit/FusedBackward.h: sm_90a,
// head_dim <= 128, with a mask, a window, grouped heads, a packed batch, a long sweep,
// register-A products, a producer warpgroup): each assembles without wgmma waits of ptxas's
// own, bwd_fused makes its five products per pair (S^T, dP^T, dV, dK, dQ's part) and adds
// dQ's part in its turn (an acquire poll, the bulk reductions, their complete wait, a release
// increment), and the generic targets refuse the kinds. Prints each kernel's registers and
// spills. CPU only.
#include "compiler/KernelSpec.h"
#include "jit/Compile.h"
#include "jit/FusedBackward.h"
#include "kernels/TileTable.h"
#include "support/Knobs.h"

#include "mlir/IR/MLIRContext.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <vector>

using namespace flashbob;

namespace {
// The judge is the toolkit's ptxas binary, as in ptx_matrix_test; FLASHBOB_FUSED_BACKWARD on
// before anything reads it (it is read once), whatever the environment says.
const bool kSettings = [] {
  support::setOverride(support::Knob::Assembler, "ptxas");
  support::setOverride(support::Knob::FusedBackward, "1");
  return true;
}();

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

compiler::KernelSpec specFor(bob::KernelKind kind, int64_t headDim) {
  compiler::KernelSpec s;
  s.kind = kind;
  s.headDim = headDim;
  s.arch = bob::Arch::sm_90a;
  s.tiles = kernels::defaultTiles(kind, headDim, s.arch);
  return s;
}

compiler::KernelArtifacts compiled(const compiler::KernelSpec &spec) {
  auto artifacts = jit::compileKernel(spec, /*assemble=*/true);
  if (!artifacts)
    FAIL(llvm::toString(artifacts.takeError()));
  CHECK(artifacts->cubin.compare(0, 4, "\x7f" "ELF") == 0);
  // ptxas did not serialise the products or add waits of its own (C7515/C7517/C7519).
  CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
  CHECK(artifacts->ptxasLog.find("serialized") == std::string::npos);
  std::printf("%-64s regs %3d spill %4d B shared %6lld B\n", spec.name().c_str(),
              artifacts->registers, artifacts->spillBytes,
              static_cast<long long>(artifacts->sharedBytes));
  return std::move(*artifacts);
}
} // namespace

TEST_CASE("the fused backward's bwd_fused adds dQ's part in its turn and assembles",
          "[compiler][ptx][fused-backward]") {
  struct Variant {
    int64_t headDim;
    bool causal = false;
    int64_t windowLeft = -1, windowRight = -1;
    bool grouped = false, varlen = false, longSweep = false, registerA = false;
    bob::ElemType dtype = bob::ElemType::bf16;
    bool producer = false;
  };
  const Variant variants[] = {
      {64},
      {128},
      {64, /*causal=*/true},
      {128, /*causal=*/true, -1, -1, false, false, false, false, bob::ElemType::f16},
      {64, false, /*windowLeft=*/100, /*windowRight=*/50},
      {64, false, -1, -1, /*grouped=*/true, /*varlen=*/true},
      {64, true, -1, -1, false, false, /*longSweep=*/true},
      {64, false, -1, -1, false, false, false, /*registerA=*/true},
      {128, true, -1, -1, false, false, false, /*registerA=*/true},
      // FLASHBOB_PRODUCER=1 gives it a producer warpgroup (the writer warp stays a consumer).
      {64, true, -1, -1, false, false, false, false, bob::ElemType::bf16, /*producer=*/true},
  };
  for (const Variant &v : variants) {
    compiler::KernelSpec spec = specFor(bob::KernelKind::bwd_fused, v.headDim);
    spec.causal = v.causal;
    spec.windowLeft = v.windowLeft;
    spec.windowRight = v.windowRight;
    spec.grouped = v.grouped;
    spec.varlen = v.varlen;
    spec.longSweep = v.longSweep;
    spec.registerA = v.registerA;
    spec.dtype = v.dtype;
    spec.tiles.producer = v.producer;
    INFO(spec.name());
    compiler::KernelArtifacts a = compiled(spec);
    const std::string &ptx = a.ptx;
    // Five products per pair, each a wgmma per k16 slice of its inner dimension: S^T = K Q^T and
    // dP^T = V dO^T over d; dV += P^T dO, dK += dS^T Q and dQ's part dS K over block_m, block_m
    // and block_n (a long sweep's chunks nest the one loop body).
    const int64_t bm = spec.tiles.blockM, bn = spec.tiles.blockN, d = spec.headDim;
    const size_t slices = size_t(2 * d / 16 + 2 * bm / 16 + bn / 16);
    CHECK(occurrences(ptx, "wgmma.mma_async") == slices);
    // dQ's part in its turn: the poll, the async proxy fenced after it, one bulk reduction per
    // row (both rounds of 32 rows of a 64-row part), the complete wait (not .read: the next
    // block's turn adds after these additions), the release increment.
    CHECK(occurrences(ptx, "ld.acquire.gpu.global.b32") >= 1);
    CHECK(occurrences(ptx, "fence.proxy.async.global;") >= 1);
    CHECK(occurrences(ptx, "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32") >=
          size_t(bm / 32));
    CHECK(ptx.find("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd") !=
          std::string::npos);
    CHECK(occurrences(ptx, "cp.async.bulk.commit_group;") >= 1);
    CHECK(occurrences(ptx, "cp.async.bulk.wait_group \t0;") +
              occurrences(ptx, "cp.async.bulk.wait_group 0;") >=
          1);
    CHECK(occurrences(ptx, "red.release.gpu.global.add.s32") >= 1);
    // The only f32 tile in shared memory is dQ's staged part: padded rows, d + 4 floats.
    CHECK(a.sharedBytes >= bm * (d + 4) * 4);
  }
}

TEST_CASE("the fused backward's bwd_dot and bwd_dq assemble", "[compiler][ptx][fused-backward]") {
  for (int64_t d : {64, 128}) {
    for (bob::KernelKind kind : {bob::KernelKind::bwd_dot, bob::KernelKind::bwd_dq}) {
      compiler::KernelSpec spec = specFor(kind, d);
      INFO(spec.name());
      compiler::KernelArtifacts a = compiled(spec);
      CHECK(occurrences(a.ptx, "wgmma") == 0);
      CHECK(a.spillBytes == 0);
    }
    compiler::KernelSpec varlen = specFor(bob::KernelKind::bwd_dq, d);
    varlen.varlen = true;
    compiled(varlen);
  }
}

TEST_CASE("the fused backward's kinds are sm_90a's", "[compiler][fused-backward]") {
  mlir::MLIRContext ctx;
  for (bob::KernelKind kind :
       {bob::KernelKind::bwd_dot, bob::KernelKind::bwd_fused, bob::KernelKind::bwd_dq}) {
    compiler::KernelSpec spec = specFor(kind, 64);
    llvm::Error ok = compiler::validate(spec, &ctx);
    const bool valid = !ok;
    llvm::consumeError(std::move(ok));
    CHECK(valid);
    spec.arch = bob::Arch::sm_90;
    llvm::Error e = compiler::validate(spec, &ctx);
    const bool refused = static_cast<bool>(e);
    const std::string message = llvm::toString(std::move(e));
    REQUIRE(refused);
    CHECK_THAT(message, Catch::Contains("needs arch sm_90a"));
  }
  // dQ's part of a pair is one wgmma accumulator: block_m = 16 * warps.
  compiler::KernelSpec spec = specFor(bob::KernelKind::bwd_fused, 64);
  spec.tiles.blockM = 128;
  llvm::Error e = compiler::validate(spec, &ctx);
  const bool refused = static_cast<bool>(e);
  const std::string message = llvm::toString(std::move(e));
  REQUIRE(refused);
  CHECK_THAT(message, Catch::Contains("block_m = 16 * warps = 64"));
}

TEST_CASE("the backward runs fused only where it can", "[jit][fused-backward]") {
  AttentionProblem p;
  p.seqQ = p.seqK = 256;
  // With the knob on (kSettings; its default, off, is env.test's): sm_90a only, head_dim up to
  // 128, not a ring step. Grouped heads, packed batches and windows run fused.
  CHECK(jit::fusedBackwardEnabled());
  CHECK(jit::runsFusedBackward(p, bob::Arch::sm_90a));
  for (bob::Arch other : {bob::Arch::sm_80, bob::Arch::sm_86, bob::Arch::sm_89, bob::Arch::sm_90})
    CHECK(!jit::runsFusedBackward(p, other));
  p.headDim = 128;
  CHECK(jit::runsFusedBackward(p, bob::Arch::sm_90a));
  p.headDim = 256;
  CHECK(!jit::runsFusedBackward(p, bob::Arch::sm_90a));
  // Head dims that need padding (in the kernel or through copies) keep bwd_q and bwd_kv.
  for (int64_t padded : {8, 40, 72, 100, 120}) {
    p.headDim = padded;
    CHECK(!jit::runsFusedBackward(p, bob::Arch::sm_90a));
  }
  p.headDim = 64;
  p.ringStep = true;
  CHECK(!jit::runsFusedBackward(p, bob::Arch::sm_90a));
  p.ringStep = false;
  p.headsKv = 1;
  p.heads = 4;
  p.varlen = true;
  p.windowLeft = 16;
  CHECK(jit::runsFusedBackward(p, bob::Arch::sm_90a));
  p = AttentionProblem();
  // The workspace: dQaccum (batch, heads, N, d) f32, then one int32 per 16 query rows.
  p.batch = 2;
  p.heads = 3;
  p.seqQ = 1000;
  p.headDim = 64;
  CHECK(jit::fusedBackwardWorkspaceBytes(p) == uint64_t(2 * 3 * 1000 * 64 * 4 + 2 * 3 * 63 * 4));
  // Packed: the sums over every row, the counters per sequence of at most max_seqlen_q rows.
  p.varlen = true;
  p.maxSeqQ = 600;
  CHECK(jit::fusedBackwardWorkspaceBytes(p) == uint64_t(3 * 1000 * 64 * 4 + 2 * 3 * 38 * 4));
}
