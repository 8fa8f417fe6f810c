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

} // namespace flashbob::jit
