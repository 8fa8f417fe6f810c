// flashbob: one CLI for the whole system. `flashbob <command> --help` lists each command's flags.
#include "tools/flashbob/Cli.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  return flashbob::tool::cliMain(argc, argv);
}
