// Picks the fastest of a list of candidate configurations by timing each on the real problem,
// and remembers the winner on disk so later runs and other processes reuse it without timing.
//
// Knows nothing of what a candidate is: the caller names candidates and measures one run of
// candidate i (e.g. a kernel launch between CUDA events). A candidate whose measurement fails
// scores as unusable; tuning fails only when every candidate does.
//
// Progress goes to the log sink (support/Log.h): one Info line when tuning starts; each
// candidate's time, reuse of a record and the choice at Info level when
// FLASHBOB_PRINT_AUTOTUNING is on (stderr by default), else at Debug level (log callbacks only).
#pragma once

#include "runtime/cache/TrustedDirectory.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace flashbob::runtime {

struct TuneResult {
  std::string winner;
  std::vector<std::pair<std::string, double>> medianMs; // empty when reused from disk
  bool reused = false;
};

class Autotuner {
public:
  // `storeDir` holds one JSON file per tuning key (empty: remember in memory only). A record
  // chooses which kernels run, so the directory is trusted like the kernel cache it lives in:
  // its parent (the cache directory) is opened and checked as the cache's
  // (TrustedDirectory::open), and `storeDir`, created 0700, is opened inside it, never through
  // a link, and used only if this user owns it and nobody else can write it (else one warning,
  // and records stay in memory). Opened once, on first use; records are read and written
  // through that descriptor, never through the path again.
  explicit Autotuner(std::string storeDir);

  // `key` names everything the winner depends on (problem class, GPU, compiler build). The
  // candidate list is part of the stored key: adding a candidate re-tunes instead of reusing a
  // winner chosen without it. `measureMs(i)` runs candidate i once and returns its time.
  // `label` names the tuning in log lines and errors (default: the key, which may span lines).
  static constexpr int kRepeats = 5;
  llvm::Expected<TuneResult> tune(llvm::StringRef key, llvm::ArrayRef<std::string> candidates,
                                  const std::function<llvm::Expected<double>(size_t)> &measureMs,
                                  int repeats = kRepeats, llvm::StringRef label = {});

  std::string recordPath(llvm::StringRef key, llvm::ArrayRef<std::string> candidates) const;

  // Removes the records in `storeDir` (<64 hex>.json and leftover temporaries of their writes),
  // then the directory if nothing else is left; other files stay. `storeDir` is opened as the
  // tuner opens it: one that is a symbolic link, another user's or writable by others is left
  // alone (said in `failures`); a missing one, or a file in its place, has nothing to clear.
  // Returns how many records it removed; appends "<call>(<path>): <reason>" for each thing it
  // could not remove.
  static size_t clearRecords(llvm::StringRef storeDir, std::vector<std::string> &failures);

private:
  // Whether storeDir_ may be read and written; decided (and opened) on first use.
  bool storeUsableLocked();

  std::string storeDir_;
  enum class Store { Unknown, Usable, Unusable } state_ = Store::Unknown;
  TrustedDirectory store_; // open while state_ is Usable
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> memory_; // record path -> winner
};

} // namespace flashbob::runtime
