#include "compiler/pipeline/Subprocess.h"

#include "llvm/Support/Program.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include <sys/wait.h>

namespace flashbob::compiler {

namespace {
// Beyond this a limit is no limit (and the deadline below cannot overflow the clock).
constexpr std::chrono::seconds kLongestLimit = std::chrono::hours(24 * 365);

ChildExit decode(int status) {
  ChildExit out;
  if (WIFEXITED(status)) {
    out.how = ChildExit::How::exited;
    out.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    out.how = ChildExit::How::signaled;
    out.message = ::strsignal(WTERMSIG(status));
  } else {
    out.how = ChildExit::How::lost;
    out.message = "an unknown wait status";
  }
  return out;
}

ChildExit lost() {
  ChildExit out;
  out.how = ChildExit::How::lost;
  out.message = std::string("waitpid: ") + std::strerror(errno);
  return out;
}
} // namespace

ChildExit runWithTimeLimit(llvm::StringRef program, llvm::ArrayRef<llvm::StringRef> args,
                           llvm::ArrayRef<std::optional<llvm::StringRef>> redirects,
                           std::chrono::seconds limit) {
  std::string error;
  bool failed = false;
  llvm::sys::ProcessInfo child =
      llvm::sys::ExecuteNoWait(program, args, std::nullopt, redirects, 0, &error, &failed);
  if (failed || child.Pid <= 0) {
    ChildExit out;
    out.message = error.empty() ? "could not start " + program.str() : error;
    return out;
  }
  const pid_t pid = child.Pid;
  int status = 0;
  if (limit <= std::chrono::seconds::zero() || limit > kLongestLimit) {
    while (::waitpid(pid, &status, 0) < 0)
      if (errno != EINTR)
        return lost();
    return decode(status);
  }
  // Polled, from a millisecond (most runs of ptxas end within a second) up to 25 ms apart.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::chrono::milliseconds pause(1);
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      return decode(status);
    if (done < 0 && errno != EINTR)
      return lost();
    if (std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(25));
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ChildExit out;
  out.how = ChildExit::How::timedOut;
  return out;
}

} // namespace flashbob::compiler
