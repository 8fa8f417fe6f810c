#include "kernels/common/KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace flashbob::kernels {

KernelBuilder::KernelBuilder(MLIRContext *ctx, const compiler::KernelSpec &spec)
    : spec(spec), module(ModuleOp::create(UnknownLoc::get(ctx))),
      b(UnknownLoc::get(ctx), OpBuilder(ctx)) {
  ctx->loadDialect<bob::BobDialect>();
  b.setInsertionPointToEnd(module->getBody());
}

Type KernelBuilder::elementType() {
  return spec.dtype == bob::ElemType::bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
}

static MemRefType stridedTensor(Type elem, int64_t headDim) {
  int64_t dyn = ShapedType::kDynamic;
  auto layout = StridedLayoutAttr::get(elem.getContext(), 0, {dyn, dyn, dyn, 1});
  return MemRefType::get({dyn, dyn, dyn, headDim}, elem, layout);
}

MemRefType KernelBuilder::tensorType() { return stridedTensor(elementType(), spec.headDim); }
MemRefType KernelBuilder::f32TensorType() { return stridedTensor(b.getF32Type(), spec.headDim); }
MemRefType KernelBuilder::rowsType() {
  int64_t dyn = ShapedType::kDynamic;
  return MemRefType::get({dyn, dyn, dyn}, b.getF32Type());
}

ValueRange KernelBuilder::beginKernel(ArrayRef<Type> arguments) {
  auto kernel = bob::KernelOp::create(b, spec.name(), b.getFunctionType(arguments, {}),
                                      spec.toAttr(b.getContext()));
  Block &body = kernel.getBody().front();
  b.setInsertionPointToStart(&body);
  bob::ReturnOp::create(b);
  b.setInsertionPointToStart(&body);
  return body.getArguments();
}

bob::SharedTileType KernelBuilder::smem(int64_t rows, int64_t cols) {
  return bob::SharedTileType::get(b.getContext(), rows, cols, elementType());
}
bob::RegTileType KernelBuilder::rtile(int64_t rows, int64_t cols) {
  return bob::RegTileType::get(b.getContext(), rows, cols, b.getF32Type());
}
bob::RegTileType KernelBuilder::operandTile(int64_t rows, int64_t cols) {
  return bob::RegTileType::get(b.getContext(), rows, cols, elementType());
}
bob::RowVecType KernelBuilder::rowvec(int64_t size) {
  return bob::RowVecType::get(b.getContext(), size);
}
bob::ColVecType KernelBuilder::colvec(int64_t size) {
  return bob::ColVecType::get(b.getContext(), size);
}

Value KernelBuilder::index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
Value KernelBuilder::f32(double v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(), APFloat(static_cast<float>(v)));
}
Value KernelBuilder::dim(Value memref, int64_t axis) {
  return memref::DimOp::create(b, memref, index(axis));
}

std::pair<Value, Value> KernelBuilder::batchAndHead(Value anyTensor) {
  Value heads = dim(anyTensor, 1);
  Value y = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  return {arith::DivUIOp::create(b, y, heads), arith::RemUIOp::create(b, y, heads)};
}

Value KernelBuilder::blockStart(int64_t rowsPerBlock) {
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  // Causal query-major kernels take their query blocks last first: a later block sees more
  // keys, and the GPU starts blocks in blockIdx order, so the longest now start first and the
  // short ones fill the last wave instead of a few long ones running alone at the end.
  if (spec.causal && !bob::isKeyMajor(spec.kind)) {
    Value last = arith::SubIOp::create(b, gpu::GridDimOp::create(b, gpu::Dimension::x), index(1));
    block = arith::SubIOp::create(b, last, block);
  }
  return arith::MulIOp::create(b, block, index(rowsPerBlock));
}

llvm::SmallVector<Value> KernelBuilder::allocShared(size_t count, int64_t rows) {
  llvm::SmallVector<Value> tiles;
  for (size_t i = 0; i < count; ++i)
    tiles.push_back(bob::AllocSharedOp::create(b, smem(rows, spec.headDim), nullptr));
  return tiles;
}

void KernelBuilder::loadShared(llvm::ArrayRef<Value> tensors, llvm::ArrayRef<Value> tiles,
                               Value batch, Value head, Value row, Value bound) {
  for (auto [tensor, tile] : llvm::zip_equal(tensors, tiles))
    bob::LoadSharedOp::create(b, tensor, batch, head, row, bound, tile, /*tensor_map=*/Value(),
                              /*async=*/false);
}

} // namespace flashbob::kernels
