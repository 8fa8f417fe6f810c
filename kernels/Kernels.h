// The kernel families: spec -> bob IR, and how each is launched.
#pragma once

#include "compiler/KernelSpec.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/pipeline/Registration.h"
#include "kernels/TileTable.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/Support/Error.h"

namespace flashbob::kernels {

class KernelBuilder;

// Builds the module holding the one bob.kernel for `spec`; errors name an unsupported field.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildKernel(mlir::MLIRContext &ctx,
                                                             const compiler::KernelSpec &spec);

// spec -> every stage (bob IR ... PTX), and the cubin through ptxas when `assemble` is set. Each
// call uses its own MLIR context, so calls may run on several threads.
llvm::Expected<compiler::KernelArtifacts> compileKernel(const compiler::KernelSpec &spec,
                                                      bool assemble);

// Shared memory per block the kernel for `spec` needs (its dynamic tiles, plus on sm_90a the
// static area of its TMA mbarriers), from its IR and bob-allocate-shared alone
// (milliseconds, no lowering): lets the autotuner prune candidates before compiling them.
llvm::Expected<int64_t> sharedBytesFor(const compiler::KernelSpec &spec);

// The tiles of `spec`, shrunk until its shared memory fits `maxSharedBytes` (a GPU with less than
// the tile table was made for, tableSharedBudget: sm_86 and sm_89 have 99 KB): first one stage
// instead of two, then the block dimension the kernel sweeps halved down to 16, then the one it
// owns halved (with the warps once each owns a single 16-row fragment). Steps the compiler rejects or
// that exceed the register budget are skipped. The tiles of `spec` when they fit already; an
// error naming the kernel and the limit when the smallest step does not fit either.
llvm::Expected<TileConfig> fitSharedMemory(const compiler::KernelSpec &spec,
                                           int64_t maxSharedBytes);

// Grid of a kernel for one problem: x over the blocks of the rows the kernel owns (queries for
// query-major kinds, keys for key-major ones), y over batch * heads.
struct Grid {
  unsigned x = 1, y = 1, z = 1;
};
Grid gridFor(const compiler::KernelSpec &spec, int64_t batch, int64_t heads, int64_t seqQ,
             int64_t seqK);

// Families (one file each). Argument order, inputs | outputs:
//   fwd     Q, K, V | O, L                                   (fwd/ForwardKernel.cpp)
//   bwd_q   Q, K, V, O, dO, L | dQ, D                        (bwd/BackwardKernels.cpp)
//   bwd_kv  Q, K, V, dO, L, D | dK, dV
//   bob_q   Q, K, V, O, dO, L, uQ, uK, uV | gQ, gdO, D, c, b (bob/BobQueryKernel.cpp)
//   bob_kv  Q, K, V, dO, L, D, c, b, uQ, uK, uV | gK, gV     (bob/BobKeyKernel.cpp)
// Tensors are (batch, heads, seq, head_dim) in the spec's dtype; L, D, c, b are (batch, heads,
// seq) f32.
void buildForward(KernelBuilder &kb);
void buildBackwardQuery(KernelBuilder &kb);
void buildBackwardKeyValue(KernelBuilder &kb);
void buildBobQuery(KernelBuilder &kb);
void buildBobKeyValue(KernelBuilder &kb);

} // namespace flashbob::kernels
