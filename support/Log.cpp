#include "support/Log.h"

#include "llvm/ADT/SmallString.h"

#include <cerrno>
#include <memory>
#include <mutex>

#include <unistd.h>

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

// The default sink's write. Not llvm::errs(): that stream keeps a failed write's error (stderr
// closed by the host, or a full disk or pipe) and reports it when it is destroyed at exit, with
// "LLVM ERROR: IO failure on output stream" and exit(1). A message that cannot be written is
// lost, as it would be on any stream; the process goes on. One write() for the whole line, so
// lines of concurrent threads do not interleave mid-line.
void writeToStderr(llvm::StringRef text) {
  while (!text.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return;
    text = text.drop_front(static_cast<size_t>(written));
  }
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
  writeToStderr((line + "\n").str());
}

} // namespace flashbob::support
