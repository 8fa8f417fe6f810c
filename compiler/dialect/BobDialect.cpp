// The `bob` dialect: registration, custom syntax and the verifiers that reject what the
// lowering cannot do, with a message that says why.
#include "compiler/dialect/BobDialect.h"
#include "compiler/dialect/Target.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace flashbob::bob;

#include "compiler/dialect/BobDialect.cpp.inc"
#include "compiler/dialect/BobEnums.cpp.inc"

// The spec's optional fields, each printed only when it differs from its default:
// `, warp_cols = N` and `, producer = true` (two optional groups that both begin with a comma
// are ambiguous to the declarative format, hence this directive).
static ParseResult parseSpecTail(AsmParser &parser, int64_t &warpCols, bool &producer,
                                 bool &registerA, int64_t &tensorDim) {
  warpCols = 1;
  producer = false;
  registerA = false;
  tensorDim = 0;
  auto parseFlag = [&](StringRef key, bool &flag) -> ParseResult {
    StringRef value;
    llvm::SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&value) || (value != "true" && value != "false"))
      return parser.emitError(at, key) << " must be true or false";
    flag = value == "true";
    return success();
  };
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    llvm::SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    if (key == "warp_cols") {
      int64_t value;
      if (parser.parseInteger(value))
        return failure();
      warpCols = value;
    } else if (key == "producer") {
      if (parseFlag(key, producer))
        return failure();
    } else if (key == "register_a") {
      if (parseFlag(key, registerA))
        return failure();
    } else if (key == "tensor_dim") {
      if (parser.parseInteger(tensorDim))
        return failure();
    } else {
      return parser.emitError(at, "unknown spec field '") << key << "'";
    }
  }
  return success();
}

static void printSpecTail(AsmPrinter &printer, int64_t warpCols, bool producer, bool registerA,
                          int64_t tensorDim) {
  if (warpCols != 1)
    printer << ", warp_cols = " << warpCols;
  if (producer)
    printer << ", producer = true";
  if (registerA)
    printer << ", register_a = true";
  if (tensorDim != 0)
    printer << ", tensor_dim = " << tensorDim;
}

#define GET_ATTRDEF_CLASSES
#include "compiler/dialect/BobAttrs.cpp.inc"

// `64x128xbf16`: rows x cols, then the element type (the builtin shaped-type spelling).
static ParseResult parseTileShape(AsmParser &parser, int64_t &rows, int64_t &cols,
                                  Type &elementType) {
  SmallVector<int64_t, 2> dims;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseDimensionList(dims, /*allowDynamic=*/false, /*withTrailingX=*/true))
    return failure();
  if (dims.size() != 2)
    return parser.emitError(loc, "a tile has two dimensions (rows x cols), got ") << dims.size();
  rows = dims[0];
  cols = dims[1];
  return parser.parseType(elementType);
}

static void printTileShape(AsmPrinter &printer, int64_t rows, int64_t cols, Type elementType) {
  printer << rows << "x" << cols << "x";
  printer.printType(elementType);
}

#define GET_TYPEDEF_CLASSES
#include "compiler/dialect/BobTypes.cpp.inc"

#define GET_OP_CLASSES
#include "compiler/dialect/BobOps.cpp.inc"

void BobDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "compiler/dialect/BobAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "compiler/dialect/BobTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "compiler/dialect/BobOps.cpp.inc"
      >();
}

namespace flashbob::bob {
SpecAttr getEnclosingSpec(Operation *op) {
  for (Operation *p = op; p; p = p->getParentOp()) {
    if (auto kernel = dyn_cast<KernelOp>(p))
      return kernel.getSpec();
    if (auto spec = p->getAttrOfType<SpecAttr>(kSpecAttrName))
      return spec;
  }
  return {};
}
} // namespace flashbob::bob

//===-- Attributes and types ----------------------------------------------------------------===//

LogicalResult SpecAttr::verify(function_ref<InFlightDiagnostic()> emitError, KernelKind kind,
                               int64_t headDim, int64_t blockM, int64_t blockN, int64_t warps,
                               int64_t stages, ElemType, bool, Arch arch,
                               int64_t warpCols, bool producer, bool registerA,
                               int64_t tensorDim) {
  if (!isKernelHeadDim(headDim))
    return emitError() << "head_dim " << headDim << " is unsupported: it must be a multiple of "
                       << kTileHeadDimMultiple << " in [" << kTileHeadDimMultiple << ", "
                       << kMaxHeadDim << "] (the tiles' width; other head dims run zero-padded "
                       << "to the next multiple)";
  // Tensors narrower than the tiles: whole 16-byte pieces per row, less than one fragment of
  // padding (0: as wide as the tiles).
  if (tensorDim != 0 && (tensorDim == headDim || !isKernelTensorDim(tensorDim, headDim)))
    return emitError() << "tensor_dim " << tensorDim << " is unsupported with head_dim "
                       << headDim << ": it must be a multiple of " << kTensorDimMultiple
                       << " in (" << headDim - kTileHeadDimMultiple << ", " << headDim
                       << ") (or 0, the tiles' width)";
  if (blockM <= 0 || blockM % 16 != 0)
    return emitError() << "block_m " << blockM << " must be a positive multiple of 16";
  if (blockN <= 0 || blockN % 16 != 0)
    return emitError() << "block_n " << blockN << " must be a positive multiple of 16";
  // 12: three warpgroups of 64 rows each, FlashAttention-3's forward at d = 64 (192-row tiles).
  if (warps != 1 && warps != 2 && warps != 4 && warps != 8 && warps != 12)
    return emitError() << "warps " << warps << " must be 1, 2, 4, 8 or 12";
  if (warpCols != 1 && warpCols != 2 && warpCols != 4)
    return emitError() << "warp_cols " << warpCols << " must be 1, 2 or 4";
  if (warps % warpCols != 0)
    return emitError() << "warp_cols " << warpCols << " must divide warps " << warps;
  // The block owns the rows of its own sequence: query rows in query-major kernels, key rows
  // in key-major kernels; each warp of a column group owns a multiple of 16 of them (one mma
  // row fragment).
  bool keyMajor = isKeyMajor(kind);
  int64_t ownRows = keyMajor ? blockN : blockM;
  int64_t rowWarps = warps / warpCols;
  if (ownRows % (16 * rowWarps) != 0)
    return emitError() << (keyMajor ? "block_n " : "block_m ") << ownRows
                       << " must be a multiple of 16 * warps" << (warpCols > 1 ? " / warp_cols" : "")
                       << " = " << 16 * rowWarps << " (each warp owns whole 16-row mma fragments)";
  // Every register tile's columns (head_dim for accumulators, the other block size for scores)
  // split into whole 16-column operand fragments per group.
  int64_t otherCols = keyMajor ? blockM : blockN;
  if (warpCols > 1 && (headDim % (16 * warpCols) != 0 || otherCols % (16 * warpCols) != 0))
    return emitError() << "warp_cols " << warpCols << " needs head_dim and "
                       << (keyMajor ? "block_m" : "block_n") << " to be multiples of "
                       << 16 * warpCols;
  if (stages < 1 || stages > 2)
    return emitError() << "stages " << stages
                       << " must be 1 (synchronous copies) or 2 (the next block's tiles load "
                          "while this one computes)";
  // The producer issues TMA loads into the second stage's buffers and gives its registers to
  // the consumers (setmaxnreg): both are sm_90a features.
  if (producer && (!hasHopperFeatures(arch) || stages != 2))
    return emitError() << "producer needs arch sm_90a and stages 2 (it issues the TMA loads of "
                          "the next block while the consumers compute), not "
                       << stringifyArch(arch) << " with stages " << stages;
  // Column groups with a producer gave illegal addresses on the H200 (bob_q and bwd_q at
  // d = 64, 64 x 32 tiles; commit 70ad0b2), cause not found: not offered until it is.
  if (producer && warpCols != 1)
    return emitError() << "producer with warp_cols " << warpCols
                       << " is unsupported (only warp_cols 1)";
  // The fused backward adds dQ's parts by bulk reductions (sm_90a), and each key block's
  // part (block_m query rows) is one wgmma accumulator: one 16-row fragment per warp.
  if (isFusedBackwardKind(kind) && !hasHopperFeatures(arch))
    return emitError() << stringifyKernelKind(kind)
                       << " needs arch sm_90a (the fused backward), not " << stringifyArch(arch);
  // Its workspace's dQ sum is as wide as the tiles and its kernels read no narrower tensors: a
  // head dim that needs padding keeps bwd_q and bwd_kv (jit::runsFusedBackward).
  if (isFusedBackwardKind(kind) && tensorDim != 0)
    return emitError() << stringifyKernelKind(kind) << " takes no tensor_dim (the fused backward "
                       << "runs at head dims that are a multiple of " << kTileHeadDimMultiple
                       << "), got " << tensorDim;
  if (kind == KernelKind::bwd_fused && (warpCols != 1 || blockM != 16 * warps))
    return emitError() << "bwd_fused needs block_m = 16 * warps = " << 16 * warps
                       << " and warp_cols 1 (dQ's part of a block: one 16-row fragment per "
                          "warp), got block_m "
                       << blockM << ", warp_cols " << warpCols;
  // Register-A products are wgmma's (sm_90a); elsewhere a register A operand is mma.sync's
  // anyway, so the flag would only rename the kernel.
  if (registerA && !hasHopperFeatures(arch))
    return emitError() << "register_a needs arch sm_90a (wgmma), not " << stringifyArch(arch);
  return success();
}

LogicalResult TensorMapAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t map,
                                    int64_t tensor, int64_t rowsOf, int64_t boxRows,
                                    int64_t boxCols, int64_t swizzle, int64_t elementBytes) {
  if (map < 0 || tensor < 0 || rowsOf < 0)
    return emitError() << "tensor_map argument indices must be non-negative";
  // TMA's limits: a box dimension within kTmaMaxBoxDim, the inner one the swizzle's span.
  if (boxRows <= 0 || boxRows > kTmaMaxBoxDim || boxCols <= 0 || boxCols > kTmaMaxBoxDim)
    return emitError() << "tensor_map box " << boxRows << "x" << boxCols << " must be within 1.."
                       << kTmaMaxBoxDim << " in each dimension";
  if (swizzle != 32 && swizzle != 64 && swizzle != 128)
    return emitError() << "tensor_map swizzle " << swizzle << " must be 32, 64 or 128 bytes";
  if (elementBytes != 2)
    return emitError() << "tensor_map element_bytes " << elementBytes
                       << " must be 2 (bf16 or f16 tiles)";
  if (boxCols * elementBytes != swizzle)
    return emitError() << "tensor_map box_cols " << boxCols << " x " << elementBytes
                       << " bytes must span the swizzle of " << swizzle << " bytes";
  return success();
}

static bool isTensorCoreInput(Type t) { return t.isBF16() || t.isF16(); }

LogicalResult SharedTileType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t rows,
                                     int64_t cols, Type elementType) {
  if (!isTensorCoreInput(elementType) && !elementType.isF32())
    return emitError() << "shared tiles hold bf16, f16 or f32, not " << elementType;
  if (rows <= 0 || rows % 16 != 0 || cols <= 0 || cols % 16 != 0)
    return emitError() << "shared tile " << rows << "x" << cols
                       << " must have rows and cols that are positive multiples of 16";
  return success();
}

LogicalResult RegTileType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t rows,
                                  int64_t cols, Type elementType) {
  if (!elementType.isF32() && !isTensorCoreInput(elementType))
    return emitError() << "register tiles hold f32, bf16 or f16, not " << elementType;
  if (rows <= 0 || rows % 16 != 0)
    return emitError() << "register tile rows " << rows << " must be a positive multiple of 16";
  int64_t colMultiple = elementType.isF32() ? 8 : 16;
  if (cols <= 0 || cols % colMultiple != 0)
    return emitError() << "register tile cols " << cols << " must be a positive multiple of "
                       << colMultiple << " for " << elementType;
  return success();
}

LogicalResult LocalTileType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t rows,
                                    int64_t cols, Type elementType) {
  if (!elementType.isF32())
    return emitError() << "local tiles hold f32 (reserves of accumulators), not " << elementType;
  return RegTileType::verify(emitError, rows, cols, elementType);
}

//===-- Kernel ------------------------------------------------------------------------------===//

void KernelOp::build(OpBuilder &builder, OperationState &state, StringRef name, FunctionType type,
                     SpecAttr spec) {
  state.addAttribute(SymbolTable::getSymbolAttrName(), builder.getStringAttr(name));
  state.addAttribute(getFunctionTypeAttrName(state.name), TypeAttr::get(type));
  state.addAttribute(getSpecAttrName(state.name), spec);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Type t : type.getInputs())
    block->addArgument(t, state.location);
}

ParseResult KernelOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildType = [](Builder &b, ArrayRef<Type> in, ArrayRef<Type> out,
                      function_interface_impl::VariadicFlag, std::string &) {
    return b.getFunctionType(in, out);
  };
  if (function_interface_impl::parseFunctionOp(
          parser, result, /*allowVariadic=*/false, getFunctionTypeAttrName(result.name), buildType,
          getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name)))
    return failure();
  KernelOp::ensureTerminator(*result.regions.front(), parser.getBuilder(), result.location);
  return success();
}

void KernelOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(p, *this, /*isVariadic=*/false,
                                           getFunctionTypeAttrName(), getArgAttrsAttrName(),
                                           getResAttrsAttrName());
}

LogicalResult KernelOp::verify() {
  if (!getResultTypes().empty())
    return emitOpError("kernels return nothing; outputs are memref arguments");
  // f32 scalars are values the launcher computes (the softmax scale); pointers are the tensor
  // maps bob-use-tma adds for TMA loads.
  for (auto [i, t] : llvm::enumerate(getArgumentTypes()))
    if (!isa<MemRefType, LLVM::LLVMPointerType>(t) && !t.isF32())
      return emitOpError("argument #") << i << " is " << t
                                       << "; kernel arguments are memrefs, f32 scalars and "
                                          "tensor-map pointers";
  return success();
}

int64_t KernelOp::getSharedBytes() {
  if (auto bytes = (*this)->getAttrOfType<IntegerAttr>(kSharedBytesAttrName))
    return bytes.getInt();
  return 0;
}

//===-- Helpers shared by the tile op verifiers ---------------------------------------------===//

// A register tile's rows are split across the warps of a column group in 16-row fragments, its
// columns across the column groups (FragmentLayout.h).
static LogicalResult verifyRowsSplit(Operation *op, RegTileType type) {
  SpecAttr spec = getEnclosingSpec(op);
  if (!spec)
    return op->emitOpError("must be inside a bob.kernel (needs its spec)");
  const int64_t rowWarps = spec.getWarps() / spec.getWarpCols();
  if (type.getRows() % (16 * rowWarps) != 0)
    return op->emitOpError("register tile ")
           << type << " cannot be split across " << rowWarps
           << " warps: rows must be a multiple of " << 16 * rowWarps;
  const int64_t colMultiple = (type.getElementType().isF32() ? 8 : 16) * spec.getWarpCols();
  if (type.getCols() % colMultiple != 0)
    return op->emitOpError("register tile ")
           << type << " cannot be split across " << spec.getWarpCols()
           << " column groups: cols must be a multiple of " << colMultiple;
  return success();
}

static LogicalResult verifyRowsSplit(Operation *op, Type t) {
  if (auto tile = dyn_cast<RegTileType>(t))
    return verifyRowsSplit(op, tile);
  if (!isa<RowVecType, ColVecType>(t))
    return success();
  SpecAttr spec = getEnclosingSpec(op);
  if (!spec)
    return op->emitOpError("must be inside a bob.kernel (needs its spec)");
  if (auto rows = dyn_cast<RowVecType>(t)) {
    const int64_t rowWarps = spec.getWarps() / spec.getWarpCols();
    if (rows.getSize() % (16 * rowWarps) != 0)
      return op->emitOpError("row vector of ")
             << rows.getSize() << " cannot be split across " << rowWarps << " warps";
  }
  if (auto cols = dyn_cast<ColVecType>(t); cols && cols.getSize() % (8 * spec.getWarpCols()) != 0)
    return op->emitOpError("column vector size ")
           << cols.getSize() << " must be a multiple of " << 8 * spec.getWarpCols();
  return success();
}

// Global tensors: (batch, heads, seq, head_dim) with unit innermost stride for tiles,
// (batch, heads, seq) f32 for row vectors. A tensor may be narrower than its tiles by less than
// one fragment, in whole 16-byte pieces of bf16/f16 (#bob.spec tensor_dim): the columns past it
// read as zeros and are never written.
static LogicalResult verifyTileTensor(Operation *op, Type memrefType, int64_t cols,
                                      StringRef what) {
  auto type = cast<MemRefType>(memrefType);
  if (type.getRank() != 4)
    return op->emitOpError(what) << " must be a rank-4 memref (batch, heads, seq, head_dim), got "
                                 << type;
  if (!type.isDynamicDim(3) && type.getDimSize(3) != cols &&
      !isKernelTensorDim(type.getDimSize(3), cols))
    return op->emitOpError(what) << " has head_dim " << type.getDimSize(3) << " but the tile has "
                                 << cols << " columns (a tensor may be narrower by less than "
                                 << kTileHeadDimMultiple << ", a multiple of "
                                 << kTensorDimMultiple << ")";
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return op->emitOpError(what) << " must have a unit stride along head_dim";
  return success();
}

static LogicalResult verifyVecTensor(Operation *op, Type memrefType, StringRef what) {
  auto type = cast<MemRefType>(memrefType);
  if (type.getRank() != 3 || !type.getElementType().isF32())
    return op->emitOpError(what) << " must be a rank-3 f32 memref (batch, heads, seq), got "
                                 << type;
  return success();
}

//===-- Tile ops ----------------------------------------------------------------------------===//

LogicalResult LoadSharedOp::verify() {
  auto tile = getDst().getType();
  auto src = cast<MemRefType>(getSrc().getType());
  if (src.getElementType() != tile.getElementType())
    return emitOpError("source element type ")
           << src.getElementType() << " differs from the shared tile's " << tile.getElementType();
  return verifyTileTensor(*this, src, tile.getCols(), "source");
}

LogicalResult StoreSharedOp::verify() {
  auto value = getValue().getType();
  auto dst = getDst().getType();
  if (value.getRows() != dst.getRows() || value.getCols() != dst.getCols())
    return emitOpError("register tile ") << value << " and shared tile " << dst
                                         << " differ in shape";
  if (!value.getElementType().isF32())
    return emitOpError("stores f32 register tiles, got ") << value;
  return verifyRowsSplit(*this, value);
}

// A reserve and the register tiles moved into and out of it: the same shape, f32.
static LogicalResult verifyReserve(Operation *op, RegTileType tile, LocalTileType reserve) {
  if (tile.getRows() != reserve.getRows() || tile.getCols() != reserve.getCols() ||
      !tile.getElementType().isF32())
    return op->emitOpError("register tile ")
           << tile << " must be f32 and of the reserve " << reserve << "'s shape";
  return verifyRowsSplit(op, tile);
}

LogicalResult FlushOp::verify() {
  if (failed(verifyReserve(*this, getAcc().getType(), getReserve().getType())))
    return failure();
  std::optional<int64_t> every = getEvery();
  if (!every)
    return success();
  if (*every < 1)
    return emitOpError("flushes every ") << *every << " steps: must be at least 1";
  // Due at the end of a step: what the loop's body yields (bob-chunk-sweeps moves it there).
  if (!isa_and_nonnull<scf::ForOp>((*this)->getParentOp()) || !getResult().hasOneUse() ||
      !isa<scf::YieldOp>(*getResult().getUsers().begin()))
    return emitOpError("with `every`: must be in an scf.for body, yielded by it and used by "
                       "nothing else");
  return success();
}

LogicalResult LoadLocalOp::verify() {
  return verifyReserve(*this, getResult().getType(), getReserve().getType());
}

// Global tensors that register tiles move to and from hold the input types or f32.
static LogicalResult verifyGlobalElement(Operation *op, Type memrefType, StringRef what) {
  Type elem = cast<MemRefType>(memrefType).getElementType();
  if (!elem.isBF16() && !elem.isF16() && !elem.isF32())
    return op->emitOpError(what) << " must hold bf16, f16 or f32, not " << elem;
  return success();
}

LogicalResult LoadTileOp::verify() {
  auto tile = getResult().getType();
  if (!tile.getElementType().isF32())
    return emitOpError("loads into f32 register tiles, got ") << tile;
  if (failed(verifyGlobalElement(*this, getSrc().getType(), "source")))
    return failure();
  if (failed(verifyTileTensor(*this, getSrc().getType(), tile.getCols(), "source")))
    return failure();
  return verifyRowsSplit(*this, tile);
}

LogicalResult StoreTileOp::verify() {
  auto tile = getValue().getType();
  if (!tile.getElementType().isF32())
    return emitOpError("stores f32 register tiles, got ") << tile;
  if (failed(verifyGlobalElement(*this, getDst().getType(), "destination")))
    return failure();
  if (failed(verifyTileTensor(*this, getDst().getType(), tile.getCols(), "destination")))
    return failure();
  if (getTensorMap() && !getStaging())
    return emitOpError("a TMA store needs a staging tile (`through`)");
  if (auto staging = getStaging()) {
    SharedTileType shared = staging.getType();
    if (shared.getRows() != tile.getRows() || shared.getCols() != tile.getCols())
      return emitOpError("staging tile ") << shared << " and register tile " << tile
                                          << " differ in shape";
    Type elem = cast<MemRefType>(getDst().getType()).getElementType();
    if (shared.getElementType() != elem)
      return emitOpError("staging tile element type ")
             << shared.getElementType() << " differs from the destination's " << elem;
  }
  return verifyRowsSplit(*this, tile);
}

LogicalResult LoadVecOp::verify() {
  if (failed(verifyVecTensor(*this, getSrc().getType(), "source")))
    return failure();
  return verifyRowsSplit(*this, getResult().getType());
}

LogicalResult StoreVecOp::verify() {
  if (failed(verifyVecTensor(*this, getDst().getType(), "destination")))
    return failure();
  return verifyRowsSplit(*this, getValue().getType());
}

LogicalResult MmaOp::verify() {
  auto acc = getAcc().getType();
  if (!acc.getElementType().isF32())
    return emitOpError("accumulates in f32, got ") << acc;
  int64_t aRows, aCols;
  Type aElem;
  if (auto a = dyn_cast<SharedTileType>(getA().getType())) {
    aRows = getTransposeA() ? a.getCols() : a.getRows();
    aCols = getTransposeA() ? a.getRows() : a.getCols();
    aElem = a.getElementType();
  } else {
    auto r = cast<RegTileType>(getA().getType());
    if (getTransposeA())
      return emitOpError("cannot transpose a register operand (store it to shared memory first)");
    if (r.getElementType().isF32())
      return emitOpError("register operand a must be bf16/f16 (bob.convert it first)");
    aRows = r.getRows();
    aCols = r.getCols();
    aElem = r.getElementType();
  }
  auto b = getB().getType();
  if (!isTensorCoreInput(aElem) || !isTensorCoreInput(b.getElementType()))
    return emitOpError("multiplies bf16/f16 tiles, got ") << aElem << " and "
                                                          << b.getElementType();
  int64_t bRows = getTransposeB() ? b.getCols() : b.getRows();
  int64_t bCols = getTransposeB() ? b.getRows() : b.getCols();
  if (aElem != b.getElementType())
    return emitOpError("operands have different element types: ") << aElem << " and "
                                                                 << b.getElementType();
  if (aRows != acc.getRows() || bCols != acc.getCols() || aCols != bRows)
    return emitOpError("shapes do not compose: op(a) is ")
           << aRows << "x" << aCols << ", op(b) is " << bRows << "x" << bCols << ", acc is "
           << acc.getRows() << "x" << acc.getCols();
  if (aCols % 16 != 0)
    return emitOpError("inner dimension ") << aCols << " must be a multiple of 16";
  if (acc.getCols() % 16 != 0)
    return emitOpError("result cols ") << acc.getCols()
                                       << " must be a multiple of 16 (ldmatrix x4 loads pairs of "
                                          "8-column fragments)";
  return verifyRowsSplit(*this, acc);
}

LogicalResult ProductWaitOp::verify() {
  if (getTiles().empty())
    return emitOpError(
        "passes no tiles through (an untied wait is nvvm.wgmma.wait.group.sync.aligned)");
  if (!llvm::equal(getTiles().getTypes(), getResults().getTypes()))
    return emitOpError("results must be its operands' types, in order");
  return success();
}

LogicalResult SplatOp::verify() {
  if (auto tile = dyn_cast<RegTileType>(getType()); tile && !tile.getElementType().isF32())
    return emitOpError("splats f32 tiles only");
  return verifyRowsSplit(*this, getType());
}

LogicalResult ConvertOp::verify() {
  auto src = getSource().getType();
  auto dst = getResult().getType();
  if (!src.getElementType().isF32() || !isTensorCoreInput(dst.getElementType()))
    return emitOpError("converts f32 tiles to bf16/f16, got ") << src << " -> " << dst;
  if (src.getRows() != dst.getRows() || src.getCols() != dst.getCols())
    return emitOpError("changes the shape: ") << src << " -> " << dst;
  return verifyRowsSplit(*this, src);
}

// rhs may be the same type, a broadcast vector matching the tile, or an f32 scalar.
static LogicalResult verifyBroadcast(Operation *op, Type lhs, Type rhs) {
  if (auto tile = dyn_cast<RegTileType>(lhs); tile && !tile.getElementType().isF32())
    return op->emitOpError("works on f32 tiles, got ") << tile;
  if (lhs == rhs || rhs.isF32())
    return verifyRowsSplit(op, lhs);
  auto tile = dyn_cast<RegTileType>(lhs);
  if (tile) {
    if (auto rows = dyn_cast<RowVecType>(rhs); rows && rows.getSize() == tile.getRows())
      return verifyRowsSplit(op, lhs);
    if (auto cols = dyn_cast<ColVecType>(rhs); cols && cols.getSize() == tile.getCols())
      return verifyRowsSplit(op, lhs);
  }
  return op->emitOpError("cannot broadcast ") << rhs << " onto " << lhs;
}

#define BOB_BINARY_VERIFIER(Op)                                                                   \
  LogicalResult Op::verify() { return verifyBroadcast(*this, getLhs().getType(), getRhs().getType()); }
BOB_BINARY_VERIFIER(AddOp)
BOB_BINARY_VERIFIER(SubOp)
BOB_BINARY_VERIFIER(MulOp)
BOB_BINARY_VERIFIER(DivOp)
BOB_BINARY_VERIFIER(MaxOp)
#undef BOB_BINARY_VERIFIER

static LogicalResult verifyElementwise(Operation *op, Type t) {
  if (auto tile = dyn_cast<RegTileType>(t); tile && !tile.getElementType().isF32())
    return op->emitOpError("works on f32 tiles, got ") << tile;
  return verifyRowsSplit(op, t);
}

LogicalResult Exp2Op::verify() { return verifyElementwise(*this, getType()); }
LogicalResult Log2Op::verify() { return verifyElementwise(*this, getType()); }
LogicalResult ReplaceOp::verify() { return verifyElementwise(*this, getType()); }
// The mask attributes bob.mask and bob.multi_key_rows share.
static LogicalResult verifyWindow(Operation *op, bool causal, IntegerAttr left, IntegerAttr right) {
  for (IntegerAttr side : {left, right})
    if (side && side.getInt() < 0)
      return op->emitOpError("window sizes must be >= 0 (leave a side out for no bound), got ")
             << side.getInt();
  if (causal && right)
    return op->emitOpError(
        "causal already bounds the window on the right (at 0): no window_right");
  return success();
}

LogicalResult MaskOp::verify() {
  if (failed(verifyWindow(*this, getCausal(), getWindowLeftAttr(), getWindowRightAttr())))
    return failure();
  return verifyElementwise(*this, getType());
}

LogicalResult MultiKeyRowsOp::verify() {
  if (failed(verifyWindow(*this, getCausal(), getWindowLeftAttr(), getWindowRightAttr())))
    return failure();
  return verifyRowsSplit(*this, getType());
}

LogicalResult CombineGroupsOp::verify() { return verifyRowsSplit(*this, getSource().getType()); }

LogicalResult ReduceOp::verify() {
  auto tile = getSource().getType();
  if (!tile.getElementType().isF32())
    return emitOpError("reduces f32 tiles, got ") << tile;
  if (getResult().getType().getSize() != tile.getRows())
    return emitOpError("result has ") << getResult().getType().getSize() << " rows, the tile "
                                      << tile.getRows();
  return verifyRowsSplit(*this, tile);
}

//===-- Score modifications and masks -------------------------------------------------------===//

// The scalar types a score modification's or mask's body computes with.
static bool isScalarType(Type t) {
  return t.isF32() || t.isIndex() || t.isSignlessInteger();
}

// Captures: scalars, or memrefs of f32 or signless integers (read with memref.load).
static LogicalResult verifyCaptures(Operation *op, TypeRange captures) {
  for (auto [i, t] : llvm::enumerate(captures)) {
    if (isScalarType(t))
      continue;
    auto memref = dyn_cast<MemRefType>(t);
    if (memref && (memref.getElementType().isF32() || memref.getElementType().isSignlessInteger()))
      continue;
    return op->emitOpError("capture #")
           << i << " is " << t
           << "; captures are f32, index or signless integer scalars, or memrefs of f32 or "
              "signless integers";
  }
  return success();
}

// The closed set of ops a body may hold (BobOps.td lists it); bob-differentiate-score-mod
// writes its derivatives with the same ops.
static bool isAllowedInScoreMod(Operation *op) {
  return isa<arith::ConstantOp, arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, arith::CmpFOp,
             arith::SelectOp, arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::DivSIOp,
             arith::RemSIOp, arith::MaxSIOp, arith::MinSIOp, arith::CmpIOp, arith::AndIOp,
             arith::OrIOp, arith::XOrIOp, arith::SIToFPOp, arith::FPToSIOp,
             arith::IndexCastOp, math::TanhOp, math::ExpOp, math::LogOp, math::AbsFOp,
             math::AbsIOp, memref::LoadOp, YieldOp>(op);
}

static std::string typeList(TypeRange types) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "(";
  llvm::interleaveComma(types, os);
  os << ")";
  return text;
}

// One region of a bob.score_mod or bob.score_mask: its signature (`leading`, then the
// captures' types), the ops it may hold, and that it ends in a bob.yield (returned).
static FailureOr<YieldOp> verifyModRegion(Operation *op, Region &region, ArrayRef<Type> leading,
                                          StringRef what) {
  Block &block = region.front();
  SmallVector<Type> expected(leading);
  llvm::append_range(expected, op->getOperandTypes());
  if (block.getArgumentTypes() != TypeRange(expected))
    return op->emitOpError(what) << " must take " << typeList(expected)
                                 << " (then one argument per capture), got "
                                 << typeList(block.getArgumentTypes());
  // The only memrefs in the region are the captures' block arguments (the region is isolated
  // and no allowed op makes one), so every memref.load reads a capture.
  for (Operation &inner : block) {
    if (!isAllowedInScoreMod(&inner))
      return inner.emitOpError("is not allowed in ")
             << op->getName()
             << ": its body is straight-line arith, math and memref.load ops (BobOps.td)";
    for (Type t : inner.getResultTypes())
      if (!isScalarType(t))
        return inner.emitOpError("computes ")
               << t << " in " << op->getName() << ": only f32, index and signless integers";
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError(what) << " must end in bob.yield";
  return yield;
}

// The tag of a partial as printed: `score` or `capture N`, comma-separated.
static void printPartialKey(OpAsmPrinter &p, ArrayRef<int64_t> key) {
  p << "d(";
  llvm::interleaveComma(key, p, [&](int64_t item) {
    if (item == ScoreModOp::kScore)
      p << "score";
    else
      p << "capture " << item;
  });
  p << ")";
}

static ParseResult parseCaptures(OpAsmParser &parser, OperationState &result) {
  if (failed(parser.parseOptionalKeyword("captures")))
    return success();
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  SmallVector<Type> types;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLParen() || parser.parseOperandList(operands) || parser.parseColonTypeList(types) ||
      parser.parseRParen())
    return failure();
  return parser.resolveOperands(operands, types, loc, result.operands);
}

static void printCaptures(OpAsmPrinter &p, OperandRange captures) {
  if (captures.empty())
    return;
  p << " captures(" << captures << " : ";
  llvm::interleaveComma(captures.getTypes(), p);
  p << ")";
}

ParseResult ScoreModOp::parse(OpAsmParser &parser, OperationState &result) {
  if (parseCaptures(parser, result) || parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  if (parser.parseRegion(*result.addRegion()))
    return failure();
  SmallVector<Attribute> keys;
  while (succeeded(parser.parseOptionalKeyword("d"))) {
    SmallVector<int64_t, 2> key;
    auto parseItem = [&]() -> ParseResult {
      if (succeeded(parser.parseOptionalKeyword("score"))) {
        key.push_back(kScore);
        return success();
      }
      int64_t capture;
      if (parser.parseKeyword("capture", " or 'score' in a partial's tag") ||
          parser.parseInteger(capture))
        return failure();
      key.push_back(capture);
      return success();
    };
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseItem) ||
        parser.parseRegion(*result.addRegion()))
      return failure();
    keys.push_back(parser.getBuilder().getDenseI64ArrayAttr(key));
  }
  StringAttr partialsName = getPartialsAttrName(result.name);
  if (!keys.empty()) {
    if (result.attributes.get(partialsName))
      return parser.emitError(parser.getCurrentLocation(),
                              "partials are given either as d(...) regions or as an attribute");
    result.addAttribute(partialsName, parser.getBuilder().getArrayAttr(keys));
  }
  result.addTypes(ScoreFnType::get(parser.getContext()));
  return success();
}

void ScoreModOp::print(OpAsmPrinter &p) {
  printCaptures(p, getCaptures());
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(), {getPartialsAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/true);
  for (auto [key, region] : llvm::zip_equal(getPartialKeys(), getDerivatives())) {
    p << ' ';
    printPartialKey(p, key);
    p << ' ';
    p.printRegion(region, /*printEntryBlockArgs=*/true);
  }
}

SmallVector<SmallVector<int64_t, 2>> ScoreModOp::getPartialKeys() {
  SmallVector<SmallVector<int64_t, 2>> keys;
  if (std::optional<ArrayAttr> partials = getPartials())
    for (Attribute key : *partials)
      if (auto items = dyn_cast<DenseI64ArrayAttr>(key))
        keys.emplace_back(items.asArrayRef());
  return keys;
}

bool ScoreModOp::isDifferentiable(int64_t capture) {
  if (capture < 0 || capture >= static_cast<int64_t>(getCaptures().size()))
    return false;
  Type t = getCaptures()[capture].getType();
  if (auto memref = dyn_cast<MemRefType>(t))
    return memref.getElementType().isF32();
  return t.isF32();
}

Region *ScoreModOp::getPartial(ArrayRef<int64_t> key) {
  for (auto [k, region] : llvm::zip(getPartialKeys(), getDerivatives()))
    if (ArrayRef<int64_t>(k) == key)
      return &region;
  return nullptr;
}

std::optional<double> ScoreModOp::getConstantPartial(ArrayRef<int64_t> key) {
  Region *region = getPartial(key);
  if (!region) {
    // A differentiated op lists every partial but the parameters' zero ones.
    bool byParameter = llvm::any_of(key, [](int64_t item) { return item != kScore; });
    if (byParameter && getPartial({kScore}))
      return 0.0;
    return std::nullopt;
  }
  auto yield = cast<YieldOp>(region->front().getTerminator());
  if (yield.getValues().size() != 1)
    return std::nullopt;
  auto constant = yield.getValues()[0].getDefiningOp<arith::ConstantOp>();
  if (!constant)
    return std::nullopt;
  if (auto value = dyn_cast<FloatAttr>(constant.getValue()))
    return value.getValueAsDouble();
  return std::nullopt;
}

// A partial's yield: groups of an f32 coefficient and the indices of each memref capture in
// the tag; exactly one group (the value) when the tag names no memref.
static LogicalResult verifyPartialYield(ScoreModOp op, ArrayRef<int64_t> key, YieldOp yield) {
  int64_t indices = 0;
  bool memrefs = false;
  for (int64_t item : key)
    if (item != ScoreModOp::kScore)
      if (auto memref = dyn_cast<MemRefType>(op.getCaptures()[item].getType())) {
        indices += memref.getRank();
        memrefs = true;
      }
  const int64_t group = 1 + indices;
  TypeRange types = yield.getValues().getTypes();
  const int64_t n = static_cast<int64_t>(types.size());
  if (memrefs ? n % group != 0 : n != 1)
    return yield.emitOpError("yields ")
           << n << " values; a partial "
           << (memrefs ? "by memref captures yields groups of " + std::to_string(group) +
                             " (an f32 coefficient and " + std::to_string(indices) + " indices)"
                       : std::string("by the score and scalars yields one f32"));
  for (int64_t i = 0; i < n; ++i) {
    bool coefficient = i % group == 0;
    if (coefficient ? !types[i].isF32() : !types[i].isIndex())
      return yield.emitOpError("value #")
             << i << " is " << types[i] << ", expected " << (coefficient ? "f32" : "index")
             << (coefficient ? " (a coefficient)" : " (a load index)");
  }
  return success();
}

LogicalResult ScoreModOp::verifyRegions() {
  if (failed(verifyCaptures(*this, getCaptures().getTypes())))
    return failure();
  Builder b(getContext());
  SmallVector<Type> leading = {b.getF32Type(), b.getIndexType(), b.getIndexType(),
                               b.getIndexType(), b.getIndexType()};
  FailureOr<YieldOp> yield = verifyModRegion(*this, getBody(), leading, "the body");
  if (failed(yield))
    return failure();
  if (yield->getValues().size() != 1 || !yield->getValues()[0].getType().isF32())
    return yield->emitOpError("must yield the modified score, one f32, in the body of ")
           << getOperationName();

  // The partials' tags: one per derivative region, each of one or two items in order (score
  // first, then captures ascending), naming f32 captures, no tag twice.
  size_t tags = 0;
  if (std::optional<ArrayAttr> partials = getPartials()) {
    tags = partials->size();
    for (Attribute key : *partials)
      if (!isa<DenseI64ArrayAttr>(key))
        return emitOpError("partials must be arrays of i64 (a tag per derivative region), got ")
               << key;
  }
  if (tags != getDerivatives().size())
    return emitOpError("has ") << getDerivatives().size() << " derivative regions and " << tags
                               << " tags in `partials`";
  SmallVector<SmallVector<int64_t, 2>> keys = getPartialKeys();
  for (auto [i, key] : llvm::enumerate(keys)) {
    if (key.empty() || key.size() > 2)
      return emitOpError("partial #") << i << " differentiates " << key.size()
                                      << " times; partials are of order 1 or 2";
    if (!llvm::is_sorted(key))
      return emitOpError("partial #") << i << "'s tag must list score first, then captures in "
                                         "ascending order";
    for (int64_t item : key)
      if (item != kScore && !isDifferentiable(item))
        return emitOpError("partial #")
               << i << " differentiates by capture " << item
               << ", which is not an f32 capture (an f32 scalar or a memref of f32)";
    for (size_t j = 0; j < i; ++j)
      if (keys[j] == key)
        return emitOpError("partial #") << i << " repeats the tag of partial #" << j;
  }
  for (auto [key, region] : llvm::zip_equal(keys, getDerivatives())) {
    FailureOr<YieldOp> partialYield = verifyModRegion(*this, region, leading, "a partial");
    if (failed(partialYield) || failed(verifyPartialYield(*this, key, *partialYield)))
      return failure();
  }
  return success();
}

ParseResult ScoreMaskOp::parse(OpAsmParser &parser, OperationState &result) {
  if (parseCaptures(parser, result) || parser.parseOptionalAttrDictWithKeyword(result.attributes) ||
      parser.parseRegion(*result.addRegion()))
    return failure();
  result.addTypes(MaskFnType::get(parser.getContext()));
  return success();
}

void ScoreMaskOp::print(OpAsmPrinter &p) {
  printCaptures(p, getCaptures());
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs());
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/true);
}

LogicalResult ScoreMaskOp::verifyRegions() {
  if (failed(verifyCaptures(*this, getCaptures().getTypes())))
    return failure();
  Builder b(getContext());
  SmallVector<Type> leading(kLeadingArgs, b.getIndexType());
  FailureOr<YieldOp> yield = verifyModRegion(*this, getBody(), leading, "the body");
  if (failed(yield))
    return failure();
  if (yield->getValues().size() != 1 || !yield->getValues()[0].getType().isInteger(1))
    return yield->emitOpError("must yield whether the pair is visible, one i1, in the body of ")
           << getOperationName();
  return success();
}

// Printed block arguments: %score, %b, %h, %q_idx, %kv_idx, then %cap0, %cap1, ...
static void nameModArguments(Region &region, unsigned leading, bool withScore,
                             OpAsmSetValueNameFn setName) {
  static constexpr const char *kNames[] = {"score", "b", "h", "q_idx", "kv_idx"};
  for (BlockArgument arg : region.front().getArguments()) {
    unsigned i = arg.getArgNumber();
    if (i < leading)
      setName(arg, kNames[withScore ? i : i + 1]);
    else
      setName(arg, "cap" + std::to_string(i - leading));
  }
}

void ScoreModOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  nameModArguments(region, kLeadingArgs, /*withScore=*/true, setName);
}

void ScoreModOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getResult(), "score_fn");
}

void ScoreMaskOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  nameModArguments(region, kLeadingArgs, /*withScore=*/false, setName);
}

void ScoreMaskOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getResult(), "mask_fn");
}

//===-- Bulk reductions and semaphores ------------------------------------------------------===//

// They run on the bulk writer warp with sm_90 instructions (cp.reduce.async.bulk, the async
// proxy's fence).
static LogicalResult verifyBulkTarget(Operation *op) {
  SpecAttr spec = getEnclosingSpec(op);
  if (!spec)
    return op->emitOpError("must be inside a bob.kernel (needs its spec)");
  if (!hasHopperFeatures(spec))
    return op->emitOpError("needs arch sm_90a (bulk reductions, the async proxy), not ")
           << stringifyArch(spec.getArch());
  return success();
}

// A counter array: (batch, heads, index) i32.
static LogicalResult verifySemaphores(Operation *op, Type memrefType) {
  auto type = cast<MemRefType>(memrefType);
  if (type.getRank() != 3 || !type.getElementType().isInteger(32))
    return op->emitOpError("semaphores must be a rank-3 i32 memref (batch, heads, index), got ")
           << type;
  return verifyBulkTarget(op);
}

LogicalResult BulkReduceAddOp::verify() {
  SharedTileType src = getSrc().getType();
  if (!src.getElementType().isF32())
    return emitOpError("adds f32 tiles, got ") << src;
  auto dst = cast<MemRefType>(getDst().getType());
  if (!dst.getElementType().isF32())
    return emitOpError("adds into an f32 tensor, got ") << dst;
  if (failed(verifyTileTensor(*this, dst, src.getCols(), "destination")))
    return failure();
  return verifyBulkTarget(*this);
}

LogicalResult BulkWaitOp::verify() { return verifyBulkTarget(*this); }

LogicalResult SemaphoreWaitOp::verify() { return verifySemaphores(*this, getSem().getType()); }

LogicalResult SemaphoreSignalOp::verify() { return verifySemaphores(*this, getSem().getType()); }
