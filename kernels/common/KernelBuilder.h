// What every kernel family's IR builder needs: the module, a builder positioned in the kernel
// body, the tensor types of the launch ABI, and short names for tile types and constants.
#pragma once

#include "compiler/KernelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OwningOpRef.h"

namespace flashbob::kernels {

class KernelBuilder {
public:
  KernelBuilder(mlir::MLIRContext *ctx, const compiler::KernelSpec &spec);

  const compiler::KernelSpec &spec;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::ImplicitLocOpBuilder b;

  // (batch, heads, seq, head_dim) inputs/outputs in the spec's dtype, or in f32; unit stride
  // along head_dim, any other strides.
  mlir::MemRefType tensorType();
  mlir::MemRefType f32TensorType();
  // (batch, heads, seq) f32 row vectors (L, D, c, b), contiguous.
  mlir::MemRefType rowsType();

  // Creates the bob.kernel (named spec.name()) and moves the builder into its body; returns the
  // arguments.
  mlir::ValueRange beginKernel(llvm::ArrayRef<mlir::Type> arguments);

  mlir::Type elementType();
  bob::SharedTileType smem(int64_t rows, int64_t cols);
  bob::RegTileType rtile(int64_t rows, int64_t cols);          // f32
  bob::RegTileType operandTile(int64_t rows, int64_t cols);    // spec dtype
  bob::RowVecType rowvec(int64_t size);
  bob::ColVecType colvec(int64_t size);

  mlir::Value index(int64_t v);
  mlir::Value f32(double v);
  mlir::Value dim(mlir::Value memref, int64_t axis);

  // (batch, head) of this block from blockIdx.y = batch * heads + head.
  std::pair<mlir::Value, mlir::Value> batchAndHead(mlir::Value anyTensor);

  // First row this block owns: blockIdx.x * rowsPerBlock (causal query-major kernels count
  // blocks from the last: gridDim.x - 1 - blockIdx.x).
  mlir::Value blockStart(int64_t rowsPerBlock);

  // One shared tile of rows x head_dim per tensor (allocated in order).
  llvm::SmallVector<mlir::Value> allocShared(size_t count, int64_t rows);
  // Copies rows [row, row + tile rows) of each tensor[batch, head] into its tile (zero past bound).
  void loadShared(llvm::ArrayRef<mlir::Value> tensors, llvm::ArrayRef<mlir::Value> tiles,
                  mlir::Value batch, mlir::Value head, mlir::Value row, mlir::Value bound);
};

} // namespace flashbob::kernels
