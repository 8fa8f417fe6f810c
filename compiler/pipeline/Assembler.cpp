#include "compiler/pipeline/Assembler.h"

#include "compiler/pipeline/NvJitLink.h"
#include "support/Errors.h"
#include "support/Knobs.h"

#include <optional>

namespace flashbob::compiler {

namespace {
llvm::Expected<AssemblerChoice> tryNvJitLink() {
  auto identity = nvJitLinkIdentity();
  if (!identity)
    return identity.takeError();
  return AssemblerChoice{AssemblerKind::nvJitLink, *identity};
}

// `probe`: only a ptxas that runs counts (the automatic choice); a ptxas the user named is
// used as it is, and its failures are the compile's, with the command that reproduces them.
llvm::Expected<AssemblerChoice> tryPtxas(bool probe) {
  auto path = findPtxas();
  if (!path)
    return path.takeError();
  std::string version = ptxasVersion();
  if (probe && version.empty())
    return support::makeCompileError("ptxas", "ptxas (" + *path + ") does not run");
  return AssemblerChoice{AssemblerKind::ptxas,
                         "ptxas " + (version.empty() ? *path : version)};
}

AssemblerChoice driverJit() {
  return {AssemblerKind::driverJit, "the CUDA driver's PTX JIT"};
}

llvm::Expected<AssemblerChoice> choose() {
  const std::string forced = support::knobs::assembler();
  if (forced == "nvjitlink")
    return tryNvJitLink();
  if (forced == "ptxas" || (forced.empty() && !support::knobs::ptxas().empty()))
    return tryPtxas(/*probe=*/false);
  if (forced == "driver")
    return driverJit();
  if (!forced.empty())
    return support::makeInvalidArgument(
        "FLASHBOB_ASSEMBLER", "FLASHBOB_ASSEMBLER=" + forced + ": must be nvjitlink, ptxas or driver");
  // The first available of the toolkit's ptxas and the driver's JIT (as fast as ptxas on the
  // H200). nvJitLink only when asked for: libnvJitLink 13.0 ignores setmaxnreg in
  // warp-specialized kernels (C7508, assembler_test), which makes the forward and backward
  // 8-29% slower (bench/results/2026-12-01-h200-assemblers.md).
  if (auto choice = tryPtxas(/*probe=*/true))
    return choice;
  else
    llvm::consumeError(choice.takeError());
  return driverJit();
}

// The choice, or why there is none, as plain data: an llvm::Error can be consumed only once.
struct Decision {
  std::optional<AssemblerChoice> choice;
  std::string failure;
};

Decision decide() {
  auto choice = choose();
  if (!choice)
    return {std::nullopt, llvm::toString(choice.takeError())};
  return {*choice, ""};
}
} // namespace

llvm::Expected<AssemblerChoice> chosenAssembler() {
  // Decided once: the knobs are read once too, and a process's kernels share one cache key.
  static const Decision decision = decide();
  if (!decision.choice)
    return support::makeInvalidArgument("FLASHBOB_ASSEMBLER", decision.failure);
  return *decision.choice;
}

llvm::Expected<Cubin> assemble(const std::string &ptx, bob::Arch arch) {
  auto choice = chosenAssembler();
  if (!choice)
    return choice.takeError();
  const std::string target = bob::stringifyArch(arch).str();
  switch (choice->kind) {
  case AssemblerKind::nvJitLink:
    return assembleWithNvJitLink(ptx, target);
  case AssemblerKind::ptxas:
    return assembleWithPtxas(ptx, target);
  case AssemblerKind::driverJit: {
    Cubin out;
    out.binary = ptx;
    out.binary.push_back('\0');
    return out;
  }
  }
  llvm_unreachable("every assembler kind is handled");
}

} // namespace flashbob::compiler
