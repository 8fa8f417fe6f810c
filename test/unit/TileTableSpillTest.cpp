// No kernel of the tile table spills: every kernel the JIT builds by default (kernels/TileTable.cpp
// for each kind at head dims 32 .. 256, sm_90a with register-A products and sm_80, causal or not,
// bf16 and fp16), assembled by ptxas, must keep its state in registers: no spill stores or
// loads. A kernel that spills runs its inner loop through local memory (the L1 at best), which
// at the tensor cores' rate is never free. Registers and spill bytes are printed for every
// kernel; the test fails naming each one that spills, but for the few listed in kKnownSpills
// with the reason no tiles avoid it. CPU only.
//
// The specs are those jit::defaultSpec gives a plain problem (the default scale, no window,
// groups or packing, a sweep shorter than a long one), so the flags are the launcher's; the
// producer and long-sweep knobs are left to the code (unset here, whatever the environment says)
// and register-A products are on, as the JIT builds sm_90a kernels. One test case per kind,
// tagged with it: CTest runs each kind as its own entry (test/CMakeLists.txt), in parallel.
#include "compiler/dialect/Target.h"
#include "compiler/pipeline/Ptxas.h"
#include "jit/Compile.h"
#include "jit/Launch.h"
#include "kernels/TileTable.h"
#include "support/Knobs.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

using namespace flashbob;

namespace {
// The judge is the toolkit's ptxas binary, as in ptx_matrix_test; warp specialization and long
// sweeps as the launcher decides them; register-A products on (sm_90a only, jit::defaultSpec).
const bool kSettings = [] {
  support::setOverride(support::Knob::Assembler, "ptxas");
  support::setOverride(support::Knob::Producer, "");
  support::setOverride(support::Knob::LongSweep, "");
  support::setOverride(support::Knob::RegisterA, "1");
  return true;
}();

// The head dims the table's rows cover, each row's own and one below it.
const int64_t kHeadDims[] = {32, 64, 96, 128, 256};

// Kernels known to spill whatever their tiles, each with its reason (kernels/TileTable.cpp):
// printed, not failed, and failed once they no longer spill (take them off this list then).
struct KnownSpill {
  bob::KernelKind kind;
  int64_t headDim;
  const char *why;
};
const KnownSpill kKnownSpills[] = {
    {bob::KernelKind::bob_q, 256,
     "four d = 256 accumulators are 128 floats a thread even in four column groups (sm_90a: "
     "about 80 B of spills); sm_80's shared memory does not fit four groups"},
};
const KnownSpill *knownSpill(const compiler::KernelSpec &spec) {
  for (const KnownSpill &known : kKnownSpills)
    if (known.kind == spec.kind && known.headDim == spec.headDim)
      return &known;
  return nullptr;
}

std::vector<compiler::KernelSpec> tableSpecs(bob::KernelKind kind) {
  std::vector<compiler::KernelSpec> specs;
  for (int64_t d : kHeadDims)
    for (bob::Arch arch : {bob::Arch::sm_90a, bob::Arch::sm_80})
      for (bool causal : {false, true})
        for (DType dtype : {DType::bf16, DType::fp16}) {
          AttentionProblem p;
          p.heads = 16;
          p.seqQ = p.seqK = 16384;
          p.headDim = d;
          p.dtype = dtype;
          p.causal = causal;
          specs.push_back(jit::defaultSpec(p, kind, arch));
        }
  return specs;
}

void checkKind(bob::KernelKind kind) {
  std::vector<std::string> spilling;
  int checked = 0;
  for (const compiler::KernelSpec &spec : tableSpecs(kind)) {
    INFO(spec.name());
    const bool hopper = spec.arch == bob::Arch::sm_90a;
    CHECK(spec.registerA == hopper);
    CHECK_FALSE(spec.longSweep);
    CHECK_FALSE(spec.scaleArgument);
    CHECK(spec.tiles == kernels::defaultTiles(kind, spec.headDim, spec.arch));
    auto artifacts = jit::compileKernel(spec, /*assemble=*/true);
    if (!artifacts)
      FAIL(llvm::toString(artifacts.takeError()));
    compiler::Cubin report;
    report.log = artifacts->ptxasLog;
    compiler::parsePtxasReport(report);
    const bool spills = report.spillStoreBytes + report.spillLoadBytes > 0;
    const KnownSpill *known = knownSpill(spec);
    std::printf("%-60s regs %3d spill stores %5d B loads %5d B%s\n", spec.name().c_str(),
                report.registers, report.spillStoreBytes, report.spillLoadBytes,
                spills ? (known ? "  SPILLS (known)" : "  SPILLS") : "");
    std::fflush(stdout);
    if (known) {
      INFO("known to spill (" << known->why << "), and no longer does: take it off kKnownSpills");
      CHECK(spills);
    } else if (spills) {
      spilling.push_back(spec.name() + " (" + std::to_string(report.registers) + " registers, " +
                         std::to_string(report.spillStoreBytes) + " B spill stores, " +
                         std::to_string(report.spillLoadBytes) + " B spill loads)");
    }
    ++checked;
  }
  CHECK(checked == int(std::size(kHeadDims)) * 2 * 2 * 2);
  std::string list;
  for (const std::string &name : spilling)
    list += "\n  " + name;
  INFO("kernels of the tile table that spill:" << list);
  CHECK(spilling.empty());
}
} // namespace

#define SPILL_CASE(kind)                                                                         \
  TEST_CASE("no kernel of the tile table spills (" #kind ")", "[compiler][ptx][" #kind "]") {    \
    checkKind(bob::KernelKind::kind);                                                            \
  }
SPILL_CASE(fwd)
SPILL_CASE(bwd_q)
SPILL_CASE(bwd_kv)
SPILL_CASE(bob_q)
SPILL_CASE(bob_kv)
SPILL_CASE(fwd_jvp)
SPILL_CASE(fwd_dual)
