// The bob passes (declarations generated from Passes.td).
#pragma once

#include "compiler/dialect/BobDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace flashbob::bob {

#define GEN_PASS_DECL
#include "compiler/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/passes/Passes.h.inc"

// bob-differentiate-score-mod on one op: replaces it by an op with the same captures and body
// and its partial derivatives (DifferentiateScoreMod.cpp), which it returns; an op that already
// has partials is returned as it is. For front ends that differentiate a modification before
// they build the kernels that apply it.
mlir::FailureOr<ScoreModOp> differentiateScoreMod(ScoreModOp op);

} // namespace flashbob::bob
