// Register-A products (KernelSpec::registerA, FLASHBOB_REGISTER_A) in every kernel of the sm_90a
// tile table, checked by ptxas and against the same kernel without them (its twin): ptxas
// assembles it without adding wgmma waits of its own, the products that take a converted
// register tile read it from registers in the number of k16 slices the kernel's equations give,
// their waits pass the registers through, and the scratch tiles they no longer need are gone.
// Kernels whose register tiles are split by column groups are unchanged. CPU only, about 10 s
// (ptx_matrix_test covers the whole matrix without register-A, in minutes).
#include "compiler/dialect/Target.h"
#include "jit/Compile.h"
#include "kernels/TileTable.h"
#include "support/Knobs.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <vector>

using namespace flashbob;

namespace {
// The judge is the toolkit's ptxas binary, as in ptx_matrix_test.
const bool kPtxasJudge = [] {
  support::setOverride(support::Knob::Assembler, "ptxas");
  return true;
}();

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// wgmma statements whose A operand is four registers ("{d...}, {a0, a1, a2, a3}, descB"),
// not a descriptor ("{d...}, descA, descB").
size_t registerASlices(const std::string &ptx) {
  size_t n = 0;
  for (size_t at = ptx.find("wgmma.mma_async"); at != std::string::npos;
       at = ptx.find("wgmma.mma_async", at + 1)) {
    const size_t end = ptx.find('\n', at);
    if (ptx.substr(at, end - at).find("}, {%r") != std::string::npos)
      ++n;
  }
  return n;
}

// Products of each kernel whose A operand is a converted register tile (kernels/), all of
// them in the layout wgmma takes from registers when the kernel has no column groups:
//   fwd P V; bwd_q dS K; bwd_kv P^T dO, dS^T Q; bob_q dS uK, (P o dP) K, P K, P uV,
//   Sbar-part K, (G o P) V; bob_kv dS^T uQ, dPbar^T dO, Sbar^T Q; fwd_jvp P tV, (P o G) V;
//   fwd_dual P~ V, P~ tV, (P~ o G) V.
int registerTileProducts(bob::KernelKind kind) {
  switch (kind) {
  case bob::KernelKind::fwd: return 1;
  case bob::KernelKind::bwd_q: return 1;
  case bob::KernelKind::bwd_kv: return 2;
  case bob::KernelKind::bob_q: return 6;
  case bob::KernelKind::bob_kv: return 3;
  case bob::KernelKind::fwd_jvp: return 2;
  case bob::KernelKind::fwd_dual: return 3;
  }
  return 0;
}

std::string replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}
} // namespace

struct Variant {
  bob::KernelKind kind;
  int64_t headDim;
  bob::ElemType dtype = bob::ElemType::bf16;
  bool causal = false;
};

TEST_CASE("register-A kernels of the sm_90a tile table assemble and read A from registers",
          "[compiler][ptx][register-a]") {
  std::vector<Variant> variants;
  for (bob::KernelKind kind : {bob::KernelKind::fwd, bob::KernelKind::bwd_q,
                               bob::KernelKind::bwd_kv, bob::KernelKind::bob_q,
                               bob::KernelKind::bob_kv, bob::KernelKind::fwd_jvp,
                               bob::KernelKind::fwd_dual})
    for (int64_t d : {64, 128})
      variants.push_back({kind, d});
  // The masked steps and the other dtype.
  variants.push_back({bob::KernelKind::fwd, 128, bob::ElemType::f16, true});
  variants.push_back({bob::KernelKind::bwd_kv, 64, bob::ElemType::bf16, true});
  int checked = 0;
  for (const Variant &v : variants) {
    compiler::KernelSpec plain;
    plain.kind = v.kind;
    plain.headDim = v.headDim;
    plain.dtype = v.dtype;
    plain.causal = v.causal;
    plain.arch = bob::Arch::sm_90a;
    plain.tiles = kernels::defaultTiles(v.kind, v.headDim, plain.arch);
    compiler::KernelSpec spec = plain;
    spec.registerA = true;
    INFO(spec.name());
    CHECK(spec.name().find("_rega") != std::string::npos);
    auto twin = jit::compileKernel(plain, /*assemble=*/true);
    if (!twin)
      FAIL(llvm::toString(twin.takeError()));
    auto artifacts = jit::compileKernel(spec, /*assemble=*/true);
    if (!artifacts)
      FAIL(llvm::toString(artifacts.takeError()));
    const std::string &ptx = artifacts->ptx;
    CHECK(artifacts->cubin.compare(0, 4, "\x7f" "ELF") == 0);
    // ptxas did not have to serialise the products or add fences and waits of its own
    // (C7515/C7517/C7519): the accumulators and A registers are untouched between a product
    // and its wait.
    CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
    CHECK(artifacts->ptxasLog.find("serialized") == std::string::npos);
    CHECK(registerASlices(twin->ptx) == 0);
    const int64_t inner = bob::isKeyMajor(v.kind) ? spec.tiles.blockM : spec.tiles.blockN;
    const int products = spec.tiles.warpCols == 1 ? registerTileProducts(v.kind) : 0;
    CHECK(registerASlices(ptx) == size_t(products * inner / 16));
    if (products > 0) {
      // Tied waits (inline PTX: no tab after the opcode, unlike the intrinsic's), and the
      // scratch tiles of the staged operands no longer allocated.
      CHECK(occurrences(ptx, "wgmma.wait_group.sync.aligned 0;") >= 1);
      CHECK(artifacts->sharedBytes < twin->sharedBytes);
    } else {
      // Column groups: register_a changes nothing but the kernel's name.
      CHECK(replaceAll(ptx, spec.name(), plain.name()) == twin->ptx);
    }
    std::printf("%-56s regs %3d spill %4d B shared %6lld B (staged: regs %3d spill %4d B "
                "shared %6lld B)\n",
                spec.name().c_str(), artifacts->registers, artifacts->spillBytes,
                static_cast<long long>(artifacts->sharedBytes), twin->registers,
                twin->spillBytes, static_cast<long long>(twin->sharedBytes));
    ++checked;
  }
  CHECK(checked == 16);
}
