// Exit codes of the flashbob CLI, distinct so scripts can tell "no GPU here" from a failure.
#pragma once

namespace flashbob::tool {
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // the command ran and something was wrong (errors, check failed)
  kExitUsage = 2,     // bad arguments; nothing was run
  kExitNoDriver = 3,  // the command needs a GPU and no CUDA driver/device was found
};
} // namespace flashbob::tool
