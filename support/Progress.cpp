#include "support/Progress.h"

#include "llvm/Support/FormatVariadic.h"

#include <memory>
#include <mutex>

namespace flashbob::support {

namespace {
struct SinkState {
  std::mutex mutex;
  std::shared_ptr<const ProgressSink> sink; // null: the default (a log message)
};

SinkState &sinkState() {
  static SinkState s;
  return s;
}

thread_local std::pair<size_t, size_t> currentStep{0, 0};
} // namespace

std::string describe(const Progress &p) {
  std::string text = p.task;
  if (p.total > 0)
    text += llvm::formatv(" ({0}/{1})", p.step, p.total).str();
  if (!p.detail.empty())
    text += ": " + p.detail;
  return text;
}

void setProgressSink(ProgressSink sink) {
  SinkState &s = sinkState();
  std::shared_ptr<const ProgressSink> next =
      sink ? std::make_shared<const ProgressSink>(std::move(sink)) : nullptr;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sink = std::move(next);
}

void reportProgress(const Progress &p) {
  std::shared_ptr<const ProgressSink> sink;
  {
    SinkState &s = sinkState();
    std::lock_guard<std::mutex> lock(s.mutex);
    sink = s.sink;
  }
  if (sink)
    (*sink)(p);
  else
    log(p.level, "flashbob: " + describe(p));
}

KernelStep::KernelStep(size_t step, size_t total) : saved_(currentStep) {
  currentStep = {step, total};
}
KernelStep::~KernelStep() { currentStep = saved_; }
std::pair<size_t, size_t> KernelStep::current() { return currentStep; }

} // namespace flashbob::support
