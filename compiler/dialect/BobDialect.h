// The `bob` dialect: C++ declarations generated from BobBase/BobAttrs/BobTypes/BobOps.td.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"

#include <limits>
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "compiler/dialect/BobDialect.h.inc"
#include "compiler/dialect/BobEnums.h"
#include "compiler/dialect/Target.h"

#define GET_ATTRDEF_CLASSES
#include "compiler/dialect/BobAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "compiler/dialect/BobTypes.h.inc"

#define GET_OP_CLASSES
#include "compiler/dialect/BobOps.h.inc"

namespace flashbob::bob {

// Name of the attribute that carries the spec on a gpu.func once bob.kernel is lowered.
inline constexpr llvm::StringLiteral kSpecAttrName = "bob.spec";
// Name of the attribute holding the dynamic shared memory size in bytes (set by
// bob-allocate-shared on bob.kernel, carried onto the gpu.func).
inline constexpr llvm::StringLiteral kSharedBytesAttrName = "bob.shared_bytes";
// Name of the attribute listing the tensor maps a kernel takes (bob-use-tma, on bob.kernel and
// carried onto the gpu.func): one #bob.tensor_map per tensor-map argument, in argument order.
inline constexpr llvm::StringLiteral kTensorMapsAttrName = "bob.tensor_maps";

// The spec of the kernel that encloses `op` (a bob.kernel, or a function carrying bob.spec),
// or null when there is none (e.g. a tile op outside any kernel, rejected by verifiers).
SpecAttr getEnclosingSpec(mlir::Operation *op);

// Null specs (ops outside a kernel) have none (the Arch overload: Target.h).
inline bool hasHopperFeatures(SpecAttr spec) { return spec && hasHopperFeatures(spec.getArch()); }

} // namespace flashbob::bob
