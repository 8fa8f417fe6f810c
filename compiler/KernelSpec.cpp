#include "compiler/KernelSpec.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>

namespace flashbob::compiler {

double KernelSpec::effectiveScale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(headDim));
}

std::string KernelSpec::name() const {
  // The scale is spelled by its float32 bits: exact, and a valid PTX identifier.
  float scale32 = static_cast<float>(effectiveScale());
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &scale32, sizeof(scaleBits));
  std::string kindName = bob::stringifyKernelKind(kind).str();
  std::string warpText = std::to_string(warps);
  if (warpCols != 1)
    warpText += "c" + std::to_string(warpCols);
  if (producer)
    warpText += "p";
  return llvm::formatv("{0}_d{1}_m{2}_n{3}_w{4}_s{5}_{6}{7}_sc{8:x-}_{9}", kindName, headDim,
                       blockM, blockN, warpText, stages, bob::stringifyElemType(dtype),
                       causal ? "_causal" : "", scaleBits, arch)
      .str();
}

bob::SpecAttr KernelSpec::toAttr(mlir::MLIRContext *ctx) const {
  mlir::Builder b(ctx);
  return bob::SpecAttr::get(ctx, kind, headDim, blockM, blockN, warps, stages, dtype, causal,
                            b.getF32FloatAttr(static_cast<float>(effectiveScale())),
                            b.getStringAttr(arch), warpCols, producer);
}

llvm::Error validate(const KernelSpec &spec, mlir::MLIRContext *ctx) {
  mlir::Builder b(ctx);
  std::string message;
  auto emitError = [&]() {
    return mlir::emitError(mlir::UnknownLoc::get(ctx));
  };
  mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  if (mlir::failed(bob::SpecAttr::verify(emitError, spec.kind, spec.headDim, spec.blockM,
                                         spec.blockN, spec.warps, spec.stages, spec.dtype,
                                         spec.causal,
                                         b.getF32FloatAttr(static_cast<float>(spec.effectiveScale())),
                                         b.getStringAttr(spec.arch), spec.warpCols,
                                         spec.producer)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "invalid kernel spec: " + message);
  return llvm::Error::success();
}

std::optional<bob::KernelKind> parseKind(llvm::StringRef text) {
  // The CLI spells kinds with dashes (bob-q); the dialect with underscores (bob_q).
  std::string normalized = text.str();
  for (char &c : normalized)
    if (c == '-')
      c = '_';
  return bob::symbolizeKernelKind(normalized);
}

std::optional<bob::ElemType> parseDtype(llvm::StringRef text) {
  if (text == "bf16")
    return bob::ElemType::bf16;
  if (text == "fp16" || text == "f16")
    return bob::ElemType::f16;
  return std::nullopt;
}

} // namespace flashbob::compiler
