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
//
// Stores of register tiles that name a staging tile (bob.store_tile `through`) become TMA stores
// under the same conditions, TMA clipping rows past the map's sequence length as `bound` would:
// each warp stages its own rows and stores them itself (no block-wide meeting point), so the
// box is one warp's band of rows by one column block, and a warp's columns must be whole column
// blocks (column groups narrower than a block keep the direct stores).
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
    // The map of (tensor, rows_of) with boxes of boxRows x one column block of `layout`.
    auto mapFor = [&](unsigned tensor, unsigned rowsOf, int64_t boxRows,
                      const shared::Layout &layout) -> Value {
      Key key{tensor, rowsOf, boxRows, layout.blockCols(), layout.swizzleBytes};
      BlockArgument &map = maps[key];
      if (!map) {
        unsigned index = kernel.getNumArguments();
        if (failed(kernel.insertArgument(index, ptrType, DictionaryAttr(), kernel.getLoc())))
          return Value();
        map = kernel.getArgument(index);
        described.push_back(TensorMapAttr::get(ctx, index, tensor, rowsOf, boxRows,
                                               layout.blockCols(), layout.swizzleBytes,
                                               layout.elemBytes));
      }
      return map;
    };
    WalkResult loads = kernel.walk([&](LoadSharedOp load) {
      if (load.getTensorMap())
        return WalkResult::advance();
      std::optional<unsigned> tensor = kernelArgument(kernel, load.getSrc());
      std::optional<unsigned> rowsOf = sequenceLengthOf(kernel, load.getBound());
      shared::Layout layout = shared::layoutFor(load.getDst().getType(), /*hopper=*/true);
      if (!tensor || !rowsOf || !layout.swizzled() || layout.rows > kTmaMaxBoxDim)
        return WalkResult::advance();
      Value map = mapFor(*tensor, *rowsOf, layout.rows, layout);
      if (!map)
        return WalkResult::interrupt();
      load.getTensorMapMutable().assign(map);
      return WalkResult::advance();
    });
    const SpecAttr spec = kernel.getSpec();
    const int64_t rowWarps = spec.getWarps() / spec.getWarpCols();
    WalkResult stores = kernel.walk([&](StoreTileOp store) {
      if (store.getTensorMap() || !store.getStaging())
        return WalkResult::advance();
      std::optional<unsigned> tensor = kernelArgument(kernel, store.getDst());
      std::optional<unsigned> rowsOf = sequenceLengthOf(kernel, store.getBound());
      shared::Layout layout = shared::layoutFor(store.getStaging().getType(), /*hopper=*/true);
      if (!tensor || !rowsOf || !layout.swizzled())
        return WalkResult::advance();
      // One warp's band: its rows (a multiple of the 8-row swizzle atom, so that the band's
      // first row starts an atom) by its columns (whole column blocks).
      const int64_t bandRows = layout.rows / rowWarps;
      const int64_t bandCols = layout.cols / spec.getWarpCols();
      if (layout.rows % rowWarps != 0 || bandRows % 8 != 0 || bandRows > kTmaMaxBoxDim ||
          layout.cols % spec.getWarpCols() != 0 || bandCols % layout.blockCols() != 0)
        return WalkResult::advance();
      Value map = mapFor(*tensor, *rowsOf, bandRows, layout);
      if (!map)
        return WalkResult::interrupt();
      store.getTensorMapMutable().assign(map);
      return WalkResult::advance();
    });
    if (loads.wasInterrupted() || stores.wasInterrupted())
      return signalPassFailure();
    if (!described.empty())
      kernel->setAttr(kTensorMapsAttrName, b.getArrayAttr(described));
  }
};
} // namespace
} // namespace flashbob::bob
