// flashbob: one CLI for the whole system. `flashbob <command> --help` lists each command's flags.
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/OptionCategories.h"
#include "tools/flashbob/RepeatedOptions.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace flashbob::tool;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "flashbob " << FLASHBOB_VERSION << "\n"; });
  // The linked LLVM libraries register hundreds of flags (every backend's); --help of flashbob
  // and of each command lists ours only. Hidden flags still parse (for LLVM debugging).
  for (llvm::cl::SubCommand *sub : llvm::cl::getRegisteredSubcommands())
    llvm::cl::HideUnrelatedOptions(toolCategories(), *sub);
  if (!llvm::cl::ParseCommandLineOptions(argc, argv,
                                         "FlashBoB: exact backward-over-backward attention, JIT "
                                         "compiled\n",
                                         &llvm::errs()))
    return kExitUsage;
  if (llvm::Error e = checkRepeatedOptions()) {
    llvm::errs() << "flashbob: " << llvm::toString(std::move(e)) << "\n";
    return kExitUsage;
  }

  if (demoCommand)
    return runDemo();
  if (compileCommand)
    return runCompile();
  if (runCommand || tuneCommand)
    return runRun();
  if (benchCommand)
    return runBench();
  if (cacheCommand)
    return runCache();
  if (devicesCommand)
    return runDevices();
  if (envCommand)
    return runEnv();

  llvm::errs() << "flashbob: no command given; try `flashbob --help`\n";
  return kExitUsage;
}
