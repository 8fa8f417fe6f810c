// The flashbob command line as a function (Cli.cpp): parses argv (argv[0] the program name),
// runs the command, flushes the standard streams, returns the exit code (ExitCodes.h). Like any
// program's main, --help, --version and option errors may end the process from inside LLVM's
// option parser.
#pragma once

namespace flashbob::tool {
int cliMain(int argc, char **argv);
} // namespace flashbob::tool
