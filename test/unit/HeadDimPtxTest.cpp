// The kernels of head dims that are no multiple of 16, as the launcher picks them (jit::
// defaultSpec), through ptxas on sm_90a and sm_80: d = 8, 40, 72, 120 pad inside the kernel
// (tile width d + 8, tensors d wide: #bob.spec tensor_dim, kernels named _t<d>, the default scale
// 1/sqrt(d) compiled in), d = 100 runs the d = 112 kernels on padded copies with the scale as an
// argument. Every kind, bf16, causal and not. ptxas must accept each, and the padding must not
// change how the kernels move data: on sm_90a the same TMA copies and tensor maps (the maps' width
// is the launch's business: the fake driver's tests), on sm_80 cp.async. CPU only, about a
// minute (ptx_matrix_test covers d = 64 and 128).
#include "compiler/dialect/Target.h"
#include "jit/Compile.h"
#include "jit/HeadDims.h"
#include "jit/Launch.h"
#include "kernels/Signature.h"
#include "support/Knobs.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

using namespace flashbob;

namespace {
const bool kPtxasJudge = [] {
  support::setOverride(support::Knob::Assembler, "ptxas");
  return true;
}();

// Not the fused backward's kinds (bwd_dot, bwd_fused, bwd_dq): they run only at head dims that
// need no padding (jit::runsFusedBackward; their spec refuses tensor_dim), and the backward of a
// padded head dim runs bwd_q and bwd_kv.
const bob::KernelKind kKinds[] = {bob::KernelKind::fwd,     bob::KernelKind::bwd_q,
                                  bob::KernelKind::bwd_kv,  bob::KernelKind::bob_q,
                                  bob::KernelKind::bob_kv,  bob::KernelKind::fwd_jvp,
                                  bob::KernelKind::fwd_dual};

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}
} // namespace

TEST_CASE("head dims that are no multiple of 16: the launcher's kernels assemble", "[compiler]") {
  for (int64_t d : {8, 40, 72, 100, 120})
    for (bob::Arch arch : {bob::Arch::sm_90a, bob::Arch::sm_80})
      for (bool causal : {false, true})
        for (bob::KernelKind kind : kKinds) {
          AttentionProblem p;
          p.headDim = d;
          p.causal = causal;
          const bool inKernel = jit::headDimPadding(p) == jit::HeadDimPadding::inKernel;
          CHECK(inKernel == (d % 8 == 0));
          // A padded-copy call's kernels run on the padded problem.
          const compiler::KernelSpec spec =
              jit::defaultSpec(inKernel ? p : jit::paddedProblem(p), kind, arch);
          INFO(spec.name());
          CHECK(spec.headDim == bob::kernelHeadDim(d));
          CHECK(spec.tensorDim == (inKernel ? d : 0));
          // The default scale is 1/sqrt(d): compiled in where the kernel knows d.
          CHECK(spec.scaleArgument == !inKernel);
          auto artifacts = jit::compileKernel(spec, /*assemble=*/true);
          if (!artifacts)
            FAIL(llvm::toString(artifacts.takeError()));
          const std::string &ptx = artifacts->ptx;
          CHECK(artifacts->cubin.compare(0, 4, "\x7f" "ELF") == 0);
          if (arch == bob::Arch::sm_90a) {
            CHECK(ptx.find("cp.async.bulk.tensor.4d") != std::string::npos);
            CHECK(ptx.find("cp.async.cg") == std::string::npos);
            CHECK(!artifacts->tensorMaps.empty());
            CHECK(artifacts->ptxasLog.find("is injected") == std::string::npos);
          } else {
            CHECK(ptx.find("cp.async.cg.shared.global") != std::string::npos);
            CHECK(artifacts->tensorMaps.empty());
          }
          // The parameters are the signature's, as for any other head dim.
          CHECK(occurrences(ptx, ".param .u64 .ptr ") == 2 * kernels::operandCount(kind, false));
          std::printf("%-64s regs %3d spill %5d B\n", spec.name().c_str(), artifacts->registers,
                      artifacts->spillBytes);
        }
}
