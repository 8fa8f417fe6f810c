// What `run`, `tune` and `bench` show while they work: the library's progress events (kernels
// compiling, autotuning candidates; support/Progress.h) and the tool's own timed runs, as a
// progress bar redrawn in place on a terminal, as one line per event, or not at all.
#pragma once

#include "support/Progress.h"

#include "llvm/Support/raw_ostream.h"

#include <mutex>
#include <string>

namespace flashbob::tool {

enum class ProgressStyle {
  automatic, // a bar when stderr is a terminal, else none
  bar,
  lines,
  none,      // nothing, not even the library's default message per kernel compiled
};

// While alive, the process's progress sink: every event is drawn on `os` in `style`. Ends a
// bar's line when destroyed, so the report that follows starts on a fresh line.
class ProgressDisplay {
public:
  explicit ProgressDisplay(ProgressStyle style, llvm::raw_ostream &os = llvm::errs());
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay &) = delete;
  ProgressDisplay &operator=(const ProgressDisplay &) = delete;

private:
  void show(const support::Progress &p);
  void endLine();

  ProgressStyle style_;
  llvm::raw_ostream &os_;
  std::mutex mutex_;
  size_t drawnWidth_ = 0; // characters of the bar on the current line (0: none drawn)
};

} // namespace flashbob::tool
