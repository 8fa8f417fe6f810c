// The compiler's entry point: a module holding one bob.kernel -> PTX, keeping every stage.
//
//   bob IR --[bob-pipeline-loads, bob-chunk-sweeps, bob-stage-operands, bob-allocate-shared,
//             bob-use-tma (every launch fact is known here: decideLaunchFacts),
//             bob-lower-kernel, bob-lower-tiles]--> lowered IR
//          (gpu, nvgpu, nvvm, vector, arith, memref, scf)
//   --[upstream: nvgpu/vector/scf/arith/index/memref -> LLVM, gpu -> NVVM;
//      bob-join-index-widths, bob-tensor-map-params]--> LLVM dialect
//   --[translate, LLVM O3 for NVPTX]--> LLVM IR --[NVPTX backend]--> PTX
// Each pass is added in one place (Pipeline.cpp): the bob passes up to bob-use-tma in
// buildSharedMemoryPlan and buildLaunchFactsPipeline, the two that lower the dialect in
// buildBobLoweringPipeline, the upstream conversions in buildLoweringPipeline.
#pragma once

#include "compiler/dialect/BobEnums.h"
#include "support/TensorMapSpec.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

// Declared only: what includes this header (the jit, the tools) keeps the plain structs below
// and does not parse MLIR's IR headers for them; the files that build or run a pipeline include
// mlir/IR/BuiltinOps.h, mlir/Pass/PassManager.h and compiler/dialect/BobDialect.h themselves.
namespace mlir {
class ModuleOp;
class OpPassManager;
} // namespace mlir
namespace flashbob::bob {
class SpecAttr;
} // namespace flashbob::bob

namespace flashbob::compiler {

struct TargetOptions {
  bob::Arch arch = bob::Arch::sm_90a;
  unsigned optLevel = 3;
  // PTX ISA the NVPTX backend targets: 8.0 is the first with sm_90a and is read by every
  // CUDA 12+ driver.
  std::string ptxFeatures() const { return "+ptx80"; }
};

// What a launch of a kernel needs besides its cubin. All of it is decided at the bob level, before
// any lowering: the symbol and the block size by the spec, the shared memory by
// bob-allocate-shared, the tensor maps by bob-use-tma (decideLaunchFacts).
struct LaunchFacts {
  std::string entry;        // kernel symbol in PTX and cubin
  int64_t threads = 0;      // threads per block (grid: see the kernel family's launch plan)
  int64_t sharedBytes = 0;  // dynamic shared memory per block
  // sm_90a TMA kernels: the tensor-map arguments after the memrefs (from bob.tensor_maps).
  std::vector<support::TensorMapSpec> tensorMaps;

  bool operator==(const LaunchFacts &o) const {
    return entry == o.entry && threads == o.threads && sharedBytes == o.sharedBytes &&
           tensorMaps == o.tensorMaps;
  }
};

// Every stage of one kernel, like the files Triton keeps per kernel in its cache.
struct KernelArtifacts : LaunchFacts {
  std::string bobIR;        // input, in the bob dialect
  std::string loweredIR;    // after the bob passes (upstream dialects only)
  std::string llvmIR;       // optimized LLVM IR given to the NVPTX backend
  std::string ptx;
  // Filled when the PTX was assembled (ptxas): the cubin and its resource report.
  std::string cubin;
  std::string ptxasLog;
  int registers = -1;
  int spillBytes = 0;
};

// Stage 1: the bob passes (bob IR -> upstream dialects), in two parts: buildLaunchFactsPipeline
// then buildBobLoweringPipeline. Stage 2: upstream conversion to the LLVM dialect inside the
// gpu.module.
void buildBobPipeline(mlir::OpPassManager &pm);
// The bob-level passes that decide shared memory (double buffers, staged operands, placement),
// per bob.kernel: the first part of buildBobPipeline, and what jit::sharedBytesFor runs.
void buildSharedMemoryPlan(mlir::OpPassManager &pm, int64_t maxBytes);
// The shared-memory plan and bob-use-tma: the passes after which every launch fact is decided,
// still on bob.kernel (what decideLaunchFacts runs).
void buildLaunchFactsPipeline(mlir::OpPassManager &pm);
// The rest of stage 1: bob.kernel -> gpu.func, tiles -> upstream dialects.
void buildBobLoweringPipeline(mlir::OpPassManager &pm);
// narrowIndex: arith and index ops lowered with 32-bit index (bob-join-index-widths joins them to
// the 64-bit memory and control flow), what narrowIndexFor(spec) says for the kernel.
void buildLoweringPipeline(mlir::OpPassManager &pm, const TargetOptions &target,
                           bool narrowIndex = false);
// Whether a kernel's index arithmetic is lowered in 32 bits: ptxas then gives every tile-table
// kernel of head dim <= 128 but bob_q as many registers or fewer and no more spills, while bob_q
// and the d = 256 kernels, at 255 registers already, spill more (docs/performance.md, "32-bit index
// arithmetic"). Nor for grouped (`grouped`: KernelSpec::grouped) key-major kernels, whose loop
// may pass 2^31 steps.
bool narrowIndexFor(bob::SpecAttr spec, bool grouped);

// The compile in two steps, so that the launch facts can be had for milliseconds (a disk-cache
// hit checks its metadata against them) and a compile that follows does not redo them:
//   decideLaunchFacts   the launch-facts passes on the module's bob.kernel, its facts read off it;
//                       with `bobIR`, the module's text before them is kept there
//   lowerToPtx          the rest, on the module decideLaunchFacts left; `front` carries its
//                       facts (checked against the lowered function's) and the bob IR
// Failures carry the MLIR diagnostics or the LLVM error, prefixed by the stage that failed.
// `module` is consumed (lowered in place).
llvm::Expected<LaunchFacts> decideLaunchFacts(mlir::ModuleOp module, std::string *bobIR);
llvm::Expected<KernelArtifacts> lowerToPtx(mlir::ModuleOp module, const TargetOptions &target,
                                           KernelArtifacts front);

// Both steps.
llvm::Expected<KernelArtifacts> compileToPtx(mlir::ModuleOp module, const TargetOptions &target);

} // namespace flashbob::compiler
