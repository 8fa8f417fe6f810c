// Progress of the work that makes a first call slow: compiling kernels and timing autotuning
// candidates. Each step is one event. By default an event becomes one log message (support/Log.h)
// at the level its reporter chose, "flashbob: compiling bob_q (1/2): <kernel>", so an embedder's
// log callback (Python: the "flashbob" logger) sees it; a tool that draws a progress bar sets
// its own sink instead.
#pragma once

#include "support/Log.h"

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <functional>
#include <string>

namespace flashbob::support {

struct Progress {
  std::string task;   // what is being done: "compiling bob_q", "autotuning bob_q d=64"
  size_t step = 0;    // 1-based; 0 (with total 0) when the count is not known
  size_t total = 0;
  std::string detail; // which one: the kernel's name, the candidate's tiles
  LogLevel level = LogLevel::Info; // of the default sink's message
};

// "compiling bob_q (1/2): bob_q_d64_..." (the count and the detail only when known).
std::string describe(const Progress &p);

using ProgressSink = std::function<void(const Progress &)>;

// Replaces the sink for the whole process (thread safe); an empty sink restores the default
// (a log message). Called with the reporter's locks held, like a log sink (support/Log.h).
void setProgressSink(ProgressSink sink);

void reportProgress(const Progress &p);

// Which kernel of one operation the current thread is working on (1-based, of `total`), so
// that a compilation deep in the JIT can say "(1/2)". The API opens one around each kernel of
// an operation; scopes nest (the inner one wins until it ends).
class KernelStep {
public:
  KernelStep(size_t step, size_t total);
  ~KernelStep();
  KernelStep(const KernelStep &) = delete;
  KernelStep &operator=(const KernelStep &) = delete;

  // {step, total} of the innermost open scope on this thread, {0, 0} outside any.
  static std::pair<size_t, size_t> current();

private:
  std::pair<size_t, size_t> saved_;
};

} // namespace flashbob::support
