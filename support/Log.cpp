#include "support/Log.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <mutex>

namespace flashbob::support {

namespace {

struct SinkState {
  std::mutex mutex;
  std::shared_ptr<const LogSink> sink; // null: the default (stderr, Info and above)
};

SinkState &sinkState() {
  static SinkState s; // function-local: logging may happen during other statics' initialization
  return s;
}

std::shared_ptr<const LogSink> currentSink() {
  SinkState &s = sinkState();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.sink;
}

} // namespace

void setLogSink(LogSink sink) {
  SinkState &s = sinkState();
  std::shared_ptr<const LogSink> next =
      sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sink = std::move(next);
}

bool logs(LogLevel level) { return level != LogLevel::Debug || currentSink() != nullptr; }

void log(LogLevel level, const llvm::Twine &message) {
  // A copy of the pointer, called without the lock: a sink that logs or swaps the sink must not
  // deadlock, and one being replaced meanwhile stays alive until this call returns.
  std::shared_ptr<const LogSink> sink = currentSink();
  llvm::SmallString<256> text;
  llvm::StringRef line = message.toStringRef(text);
  if (sink) {
    (*sink)(level, line);
    return;
  }
  if (level == LogLevel::Debug)
    return;
  // One write per line so lines of concurrent threads do not interleave mid-line.
  llvm::errs() << (line + "\n").str();
}

} // namespace flashbob::support
