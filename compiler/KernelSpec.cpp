#include "compiler/KernelSpec.h"

#include "compiler/dialect/BobDialect.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

namespace flashbob::compiler {

std::string TileConfig::name() const {
  std::string warpText = std::to_string(warps);
  if (warpCols != 1)
    warpText += "c" + std::to_string(warpCols);
  if (producer)
    warpText += "p";
  return llvm::formatv("m{0}_n{1}_w{2}_s{3}", blockM, blockN, warpText, stages).str();
}

std::optional<TileConfig> TileConfig::parse(llvm::StringRef text) {
  TileConfig t;
  auto number = [](llvm::StringRef &rest, llvm::StringRef prefix, int64_t &out) {
    if (!rest.consume_front(prefix) || rest.consumeInteger(10, out) || out <= 0)
      return false;
    return true;
  };
  llvm::StringRef rest = text;
  if (!number(rest, "m", t.blockM) || !number(rest, "_n", t.blockN) ||
      !number(rest, "_w", t.warps))
    return std::nullopt;
  if (rest.starts_with("c") && !number(rest, "c", t.warpCols))
    return std::nullopt;
  t.producer = rest.consume_front("p");
  if (!number(rest, "_s", t.stages) || !rest.empty())
    return std::nullopt;
  return t;
}

std::string KernelSpec::name() const {
  std::string window;
  if (windowLeft >= 0)
    window += "_wl" + std::to_string(windowLeft);
  if (windowRight >= 0)
    window += "_wr" + std::to_string(windowRight);
  const std::string tensor = tensorDim ? "_t" + std::to_string(tensorDim) : "";
  return llvm::formatv("{0}_d{1}_{2}_{3}{13}{4}{5}{6}{7}{8}{9}{10}{11}_{12}",
                       bob::stringifyKernelKind(kind), headDim, tiles.name(),
                       bob::stringifyElemType(dtype), scaleArgument ? "_scalearg" : "",
                       grouped ? "_gqa" : "", varlen ? "_varlen" : "", longSweep ? "_long" : "",
                       partial ? "_part" : "", registerA ? "_rega" : "", window,
                       causal ? "_causal" : "", bob::stringifyArch(arch), tensor)
      .str();
}

bool KernelSpec::operator==(const KernelSpec &o) const {
  return kind == o.kind && headDim == o.headDim && tensorDim == o.tensorDim && tiles == o.tiles &&
         dtype == o.dtype &&
         causal == o.causal && arch == o.arch && scaleArgument == o.scaleArgument &&
         grouped == o.grouped && windowLeft == o.windowLeft && windowRight == o.windowRight &&
         varlen == o.varlen && longSweep == o.longSweep && partial == o.partial &&
         registerA == o.registerA;
}

llvm::hash_code hash_value(const KernelSpec &s) {
  const TileConfig &t = s.tiles;
  return llvm::hash_combine(s.kind, s.headDim, s.tensorDim, t.blockM, t.blockN, t.warps, t.stages,
                            t.warpCols,
                            t.producer, s.dtype, s.causal, s.arch, s.scaleArgument, s.grouped,
                            s.windowLeft, s.windowRight, s.varlen, s.longSweep, s.partial,
                            s.registerA);
}

bob::SpecAttr KernelSpec::toAttr(mlir::MLIRContext *ctx) const {
  return bob::SpecAttr::get(ctx, kind, headDim, tiles.blockM, tiles.blockN, tiles.warps,
                            tiles.stages, dtype, causal, arch, tiles.warpCols, tiles.producer,
                            registerA, tensorDim);
}

llvm::Error validate(const KernelSpec &spec, mlir::MLIRContext *ctx) {
  std::string message;
  auto emitError = [&]() {
    return mlir::emitError(mlir::UnknownLoc::get(ctx));
  };
  mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  const TileConfig &t = spec.tiles;
  if (mlir::failed(bob::SpecAttr::verify(
          emitError, spec.kind, spec.headDim, t.blockM, t.blockN, t.warps, t.stages, spec.dtype,
          spec.causal, spec.arch, t.warpCols, t.producer, spec.registerA, spec.tensorDim)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "invalid kernel spec: " + message);
  if (spec.windowLeft < -1 || spec.windowRight < -1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid kernel spec: window sizes must be -1 (unbounded) or "
                                   ">= 0, got (" + std::to_string(spec.windowLeft) + ", " +
                                       std::to_string(spec.windowRight) + ")");
  if (spec.longSweep && !bob::isLongSweepKind(spec.kind))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid kernel spec: only the backward's and BoB's kernels "
                                   "have long sweeps (their accumulators flush), not " +
                                       bob::stringifyKernelKind(spec.kind).str());
  if (spec.partial && !bob::hasPartialForm(spec.kind))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        !bob::isFusedBackwardKind(spec.kind)
            ? "invalid kernel spec: the forward's JVP has no partial (ring step) form (" +
                  bob::stringifyKernelKind(spec.kind).str() + ")"
            : "invalid kernel spec: " + bob::stringifyKernelKind(spec.kind).str() +
                  " has no partial (ring step) form (a ring step's backward runs bwd_q and "
                  "bwd_kv)");
  if (spec.causal && spec.windowRight >= 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid kernel spec: a causal kernel's right window is 0 "
                                   "(leave windowRight at -1)");
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

std::optional<bob::Arch> parseArch(llvm::StringRef text) { return bob::symbolizeArch(text); }

} // namespace flashbob::compiler
