// spec -> compiled kernel, and what can be known of a spec before compiling it.
#pragma once

#include "compiler/KernelSpec.h"
#include "compiler/pipeline/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace flashbob::jit {

// The compile stages, each a function of the one before, listed once (like Triton's
// compiler stages):
//   build       spec -> bob IR                    (kernels::buildKernel)
//   decide      the passes that decide the launch (compiler::decideLaunchFacts: shared memory
//               facts, on bob IR                   plan, bob-use-tma)
//   lower       -> ... -> PTX                     (compiler::lowerToPtx: the rest of the pass
//                                                  pipeline, LLVM's NVPTX backend)
//   assemble    PTX -> cubin                      (ptxas)
// The front stage is build and decide: milliseconds, so that a disk-cache hit derives the
// launch facts from the spec instead of trusting its metadata (jit/KernelCache); the back stage
// is the rest, continuing from the front stage's module.
struct FrontStage {
  std::unique_ptr<mlir::MLIRContext> context; // declared first: outlives the module
  mlir::OwningOpRef<mlir::ModuleOp> module;   // bob IR after the launch-facts passes
  compiler::KernelArtifacts artifacts;        // its launch facts and bob IR so far
};
llvm::Expected<FrontStage> compileFront(const compiler::KernelSpec &spec);
// The back stage of `front` for `spec`: every stage, and the cubin when `assemble` is set.
llvm::Expected<compiler::KernelArtifacts> compileBack(FrontStage front,
                                                      const compiler::KernelSpec &spec,
                                                      bool assemble);
// Both. Each call uses its own MLIR context, so calls may run on several threads.
llvm::Expected<compiler::KernelArtifacts> compileKernel(const compiler::KernelSpec &spec,
                                                        bool assemble);

// Shared memory per block the kernel for `spec` needs (its dynamic tiles plus the static
// reserve, compiler/passes/SharedLayout.h's blockSharedBytes), from its IR and the passes that
// place shared memory alone (milliseconds, no lowering).
llvm::Expected<int64_t> sharedBytesFor(const compiler::KernelSpec &spec);

// The error compiling `spec` would stop at because its shared tiles exceed what a block of its
// target may use ("shared tiles need ... bytes of shared memory, more than the ..."), found the
// same way, before anything is lowered; success when they fit.
llvm::Error checkSharedMemory(const compiler::KernelSpec &spec);

// Whether `spec` is a kernel the compiler builds (its verifier), whose accumulators stay in
// registers (kernels::checkRegisterFootprint) and whose shared memory fits `maxSharedBytes`.
// False for the first two; an error only when the shared-memory estimate itself fails.
llvm::Expected<bool> runnable(const compiler::KernelSpec &spec, int64_t maxSharedBytes);

// The tiles of `spec`, shrunk until its shared memory fits `maxSharedBytes` (a GPU with less than
// the tile table was made for, kernels::tableSharedBudget: sm_86 and sm_89 have 99 KB): first one
// stage instead of two, then the block dimension the kernel sweeps halved down to 16 (16 per
// column group), then the one it owns halved (with the warps once each owns a single 16-row
// fragment), then the column groups given up. Steps that are not runnable are skipped. The tiles of `spec` when they fit already; an error naming the
// kernel and the limit when the smallest step does not fit either.
llvm::Expected<compiler::TileConfig> fitSharedMemory(const compiler::KernelSpec &spec,
                                                     int64_t maxSharedBytes);

} // namespace flashbob::jit
