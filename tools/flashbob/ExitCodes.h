// Exit codes of the flashbob CLI, distinct so scripts can tell "no GPU here" from a failure.
#pragma once

#include "support/Errors.h"

namespace flashbob::tool {
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // the command ran and something was wrong (errors, check failed)
  kExitUsage = 2,     // bad arguments; nothing was run
  kExitNoDriver = 3,  // the command needs a GPU and no CUDA driver/device was found
};

// The exit code of a failed command, from its error's class.
inline ExitCode exitCodeFor(support::ErrorKind kind) {
  switch (kind) {
  case support::ErrorKind::NoDriver:
    return kExitNoDriver;
  case support::ErrorKind::InvalidArgument:
    return kExitUsage; // the API's argument validation, before anything ran
  default:
    return kExitFailure;
  }
}
} // namespace flashbob::tool
