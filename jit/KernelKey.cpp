#include "jit/KernelKey.h"

#include "CompilerHash.h"
#include "compiler/pipeline/Assembler.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FormatVariadic.h"

namespace flashbob::jit {

KernelKey::KernelKey(const compiler::KernelSpec &spec) : spec(spec) { target.arch = spec.arch; }

std::string KernelKey::text() const {
  // The assembler and its version decide the machine code as much as the PTX does.
  auto assembler = compiler::chosenAssembler();
  std::string assemblerText =
      assembler ? assembler->identity : llvm::toString(assembler.takeError());
  return llvm::formatv("flashbob kernel\nspec {0}\noptions O{1} {2}\n"
                       "flashbob {3}\ncompiler {4}\nllvm {5}\nassembler {6}\narch {7}\n",
                       spec.name(), target.optLevel, target.ptxFeatures(),
                       FLASHBOB_VERSION, FLASHBOB_COMPILER_HASH, LLVM_VERSION_STRING,
                       assemblerText,
                       bob::stringifyArch(target.arch))
      .str();
}

bool sameSpec(const compiler::KernelSpec &a, const compiler::KernelSpec &b) {
  return a.kind == b.kind && a.headDim == b.headDim && a.tiles == b.tiles && a.dtype == b.dtype &&
         a.causal == b.causal && a.arch == b.arch && a.scaleArgument == b.scaleArgument &&
         a.grouped == b.grouped && a.windowLeft == b.windowLeft && a.windowRight == b.windowRight &&
         a.varlen == b.varlen;
}

size_t SpecHash::operator()(const compiler::KernelSpec &s) const {
  const compiler::TileConfig &t = s.tiles;
  return llvm::hash_combine(s.kind, s.headDim, t.blockM, t.blockN, t.warps, t.stages, t.warpCols,
                            t.producer, s.dtype, s.causal, s.arch, s.scaleArgument,
                            s.grouped, s.windowLeft, s.windowRight, s.varlen);
}

} // namespace flashbob::jit
