// Running a tool of the CUDA toolkit (ptxas) as a child process, with a time limit.
//
// Not llvm::sys::ExecuteAndWait's SecondsToWait: for the limit it sets the process-wide SIGALRM
// handler and alarm(), which cancels an alarm of the host's own and may be delivered to another
// of its threads (the wait is then never interrupted, and the limit never applies); after the
// kill it reaps with wait(), which takes whichever child of the host ends first. Here the child
// is polled with waitpid on its own pid, and nothing of the host's is touched.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <chrono>
#include <optional>
#include <string>

namespace flashbob::compiler {

struct ChildExit {
  enum class How { exited, signaled, timedOut, notStarted, lost };
  How how = How::notStarted;
  int code = -1;       // the exit status when `exited`
  std::string message; // why it did not start or could not be waited for, or the signal's name
};

// Runs `program` with `args` (args[0] is its name), stdin/stdout/stderr redirected as
// llvm::sys::ExecuteNoWait's `redirects` say, and waits for it at most `limit` (zero: no limit);
// past the limit it is killed (SIGKILL) and reaped.
ChildExit runWithTimeLimit(llvm::StringRef program, llvm::ArrayRef<llvm::StringRef> args,
                           llvm::ArrayRef<std::optional<llvm::StringRef>> redirects,
                           std::chrono::seconds limit);

} // namespace flashbob::compiler
