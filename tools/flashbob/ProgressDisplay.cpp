#include "tools/flashbob/ProgressDisplay.h"

#include "llvm/Support/Process.h"

#include <algorithm>

namespace flashbob::tool {

namespace {
constexpr size_t kBarCells = 24;

// "compiling bob_q [##########..............] 1/2 bob_q_d64_...": the cells filled in
// proportion to the steps done; an event without a count has no bar.
std::string barText(const support::Progress &p) {
  if (p.total == 0)
    return support::describe(p);
  const size_t filled = std::min(kBarCells, p.step * kBarCells / p.total);
  std::string text = p.task + " [" + std::string(filled, '#') +
                     std::string(kBarCells - filled, '.') + "] " + std::to_string(p.step) + "/" +
                     std::to_string(p.total);
  if (!p.detail.empty())
    text += " " + p.detail;
  return text;
}
} // namespace

ProgressDisplay::ProgressDisplay(ProgressStyle style, llvm::raw_ostream &os)
    : style_(style), os_(os) {
  if (style_ == ProgressStyle::automatic)
    style_ = llvm::sys::Process::StandardErrIsDisplayed() ? ProgressStyle::bar
                                                          : ProgressStyle::none;
  // Also for `none`: the events then go nowhere, rather than to the library's default (a log
  // message on stderr for each kernel compiled).
  support::setProgressSink([this](const support::Progress &p) { show(p); });
}

ProgressDisplay::~ProgressDisplay() {
  support::setProgressSink(nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  endLine();
}

void ProgressDisplay::endLine() {
  if (drawnWidth_ > 0)
    os_ << "\n";
  drawnWidth_ = 0;
  os_.flush();
}

void ProgressDisplay::show(const support::Progress &p) {
  if (style_ == ProgressStyle::none)
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (style_ == ProgressStyle::lines) {
    os_ << support::describe(p) << "\n";
    os_.flush();
    return;
  }
  // Redraw in place: back to the line's start, the new text, blanks over what was longer.
  const std::string text = barText(p);
  os_ << "\r" << text;
  if (drawnWidth_ > text.size())
    os_.indent(drawnWidth_ - text.size());
  drawnWidth_ = std::max<size_t>(text.size(), 1);
  // A finished task keeps its line; the next task starts a new one.
  if (p.total > 0 && p.step == p.total)
    endLine();
  else
    os_.flush();
}

} // namespace flashbob::tool
