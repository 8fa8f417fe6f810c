// One function per `flashbob` subcommand; each parses nothing itself (llvm::cl options live
// beside each command, registered on its SubCommand) and returns an ExitCode.
#pragma once

#include "llvm/Support/CommandLine.h"

namespace flashbob::tool {

extern llvm::cl::SubCommand demoCommand;
int runDemo();

extern llvm::cl::SubCommand compileCommand;
int runCompile();

extern llvm::cl::SubCommand runCommand;
extern llvm::cl::SubCommand tuneCommand; // `run` with autotuning on and printed
int runRun();

extern llvm::cl::SubCommand benchCommand;
int runBench();

extern llvm::cl::SubCommand cacheCommand;
int runCache();

extern llvm::cl::SubCommand devicesCommand;
int runDevices();

extern llvm::cl::SubCommand envCommand;
int runEnv();

} // namespace flashbob::tool
