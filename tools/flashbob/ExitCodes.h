// Exit codes of the flashbob CLI, distinct so scripts can tell "no GPU here" from a failure.
#pragma once

#include "support/Errors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // the command ran and something was wrong (errors, check failed)
  kExitUsage = 2,     // bad arguments; nothing was run
  kExitNoDriver = 3,  // the command needs a GPU and no CUDA driver/device (or no supported
                      // one) was found
};

// The exit code of a failed command, from its error's class.
inline ExitCode exitCodeFor(support::ErrorKind kind) {
  switch (kind) {
  case support::ErrorKind::NoDriver:
  case support::ErrorKind::UnsupportedDevice: // no GPU this command can use
    return kExitNoDriver;
  case support::ErrorKind::InvalidArgument:
    return kExitUsage; // the API's argument validation, before anything ran
  default:
    return kExitFailure;
  }
}

// The one line a command prints when it stops on an error, "flashbob COMMAND: MESSAGE" on
// stderr; returns `code` for main.
inline int reportError(llvm::StringRef command, const llvm::Twine &message, ExitCode code) {
  llvm::errs() << "flashbob " << command << ": " << message << "\n";
  return code;
}
// The same for an error (consumed), prefixed by `context`; the exit code from its class.
inline int reportError(llvm::StringRef command, llvm::Error error,
                       const llvm::Twine &context = "") {
  support::ErrorReport report = support::takeErrorReport(std::move(error));
  return reportError(command, context + report.message, exitCodeFor(report.kind));
}
} // namespace flashbob::tool
