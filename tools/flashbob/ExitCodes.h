// Exit codes of the flashbob CLI, distinct so scripts can tell "no GPU here" from a failure.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // the command ran and something was wrong (errors, check failed)
  kExitUsage = 2,     // bad arguments; nothing was run
  kExitNoDriver = 3,  // the command needs a GPU and no CUDA driver/device was found
};

// The exit code of a GPU command that stopped on `message`: the runtime's "no CUDA driver
// found", the API's own argument check (its messages start "flashbob: "; it runs before any
// launch), or a failure.
inline ExitCode exitCodeOf(llvm::StringRef message) {
  if (message.starts_with("no CUDA driver found"))
    return kExitNoDriver;
  if (message.starts_with("flashbob: "))
    return kExitUsage;
  return kExitFailure;
}

// The one line a command prints when it stops on an error, "flashbob COMMAND: MESSAGE" on
// stderr; returns `code` for main.
inline int reportError(llvm::StringRef command, const llvm::Twine &message, ExitCode code) {
  llvm::errs() << "flashbob " << command << ": " << message << "\n";
  return code;
}
} // namespace flashbob::tool
