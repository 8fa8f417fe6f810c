// The flashbob command line as a function: the `flashbob` executable's main and libflashbob.so's
// flashbob_cli_main (the wheel's `flashbob` command, `python -m flashbob`) both run it.
#include "tools/flashbob/Cli.h"

#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/OptionCategories.h"
#include "tools/flashbob/RepeatedOptions.h"

#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {

namespace {
int dispatch(int argc, char **argv) {
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

// The standard streams before exit. LLVM's keep a failed write's error and, when destroyed
// after main, report it with "LLVM ERROR: IO failure on output stream" and exit(1): a usage
// error (2) with stderr on a full disk exited 1, and a report lost to a full stdout said
// nothing about it. A failed stdout is the command's failure, said in one line (if stderr
// still takes it); a failed stderr leaves nowhere to say anything, and the exit code stands.
int finish(int code) {
  llvm::raw_fd_ostream &out = llvm::outs(), &err = llvm::errs();
  out.flush();
  if (out.has_error()) {
    const std::error_code ec = out.error();
    out.clear_error();
    err << "flashbob: cannot write standard output: " << ec.message() << "\n";
    if (code == kExitOk)
      code = kExitFailure;
  }
  err.flush();
  err.clear_error();
  return code;
}
} // namespace

int cliMain(int argc, char **argv) { return finish(dispatch(argc, argv)); }

} // namespace flashbob::tool

