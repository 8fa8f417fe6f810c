// bob-use-tma: on sm_90a, shared tiles are filled by the Tensor Memory Accelerator.
//
// A TMA copy needs a CUtensorMap describing the global tensor (address, sizes, strides, box,
// swizzle). The runtime encodes it (the kernel cannot), so each distinct (tensor, bound, box)
// that loads read becomes one extra kernel argument: an !llvm.ptr to the map in global memory,
// listed in the kernel's bob.tensor_maps attribute for the launcher. The loads get `tma`.
//
// TMA zero-fills rows past the tensor map's sequence length, which replaces bob.load_shared's
// `bound` only when the bound is a tensor's sequence length: a memref.dim (axis 2) of a kernel
// argument, recorded as rows_of. Loads whose bound is anything else, whose source is not a
// kernel argument, or whose tile is not swizzled (TMA writes the swizzled layout, not our padded
// one) keep cp.async.
#include "compiler/passes/Passes.h"
#include "compiler/passes/SharedLayout.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <map>
#include <tuple>

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBUSETMA
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

std::optional<unsigned> kernelArgument(KernelOp kernel, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &kernel.getBody().front())
    return std::nullopt;
  return arg.getArgNumber();
}

// The kernel argument whose sequence length `bound` is, if it is one.
std::optional<unsigned> sequenceLengthOf(KernelOp kernel, Value bound) {
  auto dim = bound.getDefiningOp<memref::DimOp>();
  if (!dim)
    return std::nullopt;
  std::optional<int64_t> axis = dim.getConstantIndex();
  if (!axis || *axis != 2)
    return std::nullopt;
  return kernelArgument(kernel, dim.getSource());
}

struct UseTma : impl::BobUseTmaBase<UseTma> {
  void runOnOperation() override {
    KernelOp kernel = getOperation();
    if (!hasHopperFeatures(kernel.getSpec()))
      return;
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    auto ptrType = LLVM::LLVMPointerType::get(ctx);

    // (tensor, rows_of, box rows, box cols, swizzle) -> its map argument.
    using Key = std::tuple<unsigned, unsigned, int64_t, int64_t, int64_t>;
    std::map<Key, BlockArgument> maps;
    SmallVector<Attribute> described;
    kernel.walk([&](LoadSharedOp load) {
      if (load.getTensorMap())
        return;
      std::optional<unsigned> tensor = kernelArgument(kernel, load.getSrc());
      std::optional<unsigned> rowsOf = sequenceLengthOf(kernel, load.getBound());
      shared::Layout layout = shared::layoutFor(load.getDst().getType(), /*hopper=*/true);
      if (!tensor || !rowsOf || !layout.swizzled() || layout.rows > kTmaMaxBoxDim)
        return;
      Key key{*tensor, *rowsOf, layout.rows, layout.blockCols(), layout.swizzleBytes};
      BlockArgument &map = maps[key];
      if (!map) {
        unsigned index = kernel.getNumArguments();
        if (failed(kernel.insertArgument(index, ptrType, DictionaryAttr(), kernel.getLoc())))
          return signalPassFailure();
        map = kernel.getArgument(index);
        described.push_back(TensorMapAttr::get(ctx, index, *tensor, *rowsOf, layout.rows,
                                               layout.blockCols(), layout.swizzleBytes,
                                               layout.elemBytes));
      }
      load.getTensorMapMutable().assign(map);
    });
    if (!described.empty())
      kernel->setAttr(kTensorMapsAttrName, b.getArrayAttr(described));
  }
};
} // namespace
} // namespace flashbob::bob
