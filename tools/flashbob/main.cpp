// flashbob: one CLI for the whole system. `flashbob <command> --help` lists each command's flags.
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace flashbob::tool;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "flashbob " << FLASHBOB_VERSION << "\n"; });
  if (!llvm::cl::ParseCommandLineOptions(argc, argv,
                                         "FlashBoB: exact backward-over-backward attention, JIT "
                                         "compiled\n",
                                         &llvm::errs()))
    return kExitUsage;

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
