// Runs a piece of a test in a forked child process, for what a test process cannot survive or
// must not wait on forever: an exit() or abort() the code under test might call, static
// destructors at exit, resource limits, or a call that might hang (bounded by `limit`).
//
// The child runs `body` and then std::exit(body()), so static destructors run as at a normal
// exit (that is where an LLVM stream with an unchecked error aborts). The body reports through
// its return value (0 for success); it must not use Catch's assertions, which would report in
// the child only.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace flashbob::test {

struct ChildResult {
  bool timedOut = false;
  bool exited = false; // then `code` is the exit status, else `signal` ended it
  int code = -1;
  int signal = 0;

  bool succeeded() const { return exited && code == 0; }
  std::string describe() const {
    if (timedOut)
      return "the child did not finish in time and was killed";
    if (exited)
      return "the child exited with " + std::to_string(code);
    return "the child was killed by signal " + std::to_string(signal);
  }
};

inline ChildResult runInChild(const std::function<int()> &body, std::chrono::milliseconds limit) {
  ChildResult result;
  std::fflush(nullptr); // or the child's exit writes what the parent had buffered a second time
  const pid_t pid = ::fork();
  if (pid < 0)
    return result;
  if (pid == 0)
    std::exit(body());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.timedOut = true;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.exited = WIFEXITED(status);
  result.code = result.exited ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return result;
}

} // namespace flashbob::test
