// A directory opened once and checked on its descriptor: the kernel cache's root and its
// tuning records' directory. Everything done in it afterwards goes through the descriptor
// (openat, mkdirat, renameat, unlinkat: runtime/cache/SafeFile.h), so the directory checked is
// the directory used: another user who swaps the path for a link (to a directory of their own,
// with a planted kernel in it) after the check redirects nothing.
//
// docs/cache-threat-model.md says what this does and does not cover.
#pragma once

#include "runtime/cache/SafeFile.h"

#include "llvm/ADT/StringRef.h"

#include <string>
#include <system_error>

namespace flashbob::runtime {

class TrustedDirectory {
public:
  enum class Status {
    Opened,       // fd() is the directory
    Missing,      // nothing there, or a component of the path is no directory (not created)
    NotDirectory, // a file, FIFO or other non-directory is there
    Unusable,     // could not be created or opened: reason()
    Untrusted,    // another user's, writable by others, or reached through a link not ours
  };

  // Opens `path`, creating it 0700 (and its missing parents) first when `create`. It must be a
  // directory owned by this user and writable by nobody else (untrustedReason, checked with
  // fstat on the descriptor). The last component may be a symbolic link only when this user
  // owns the link (a cache moved to another disk): in a sticky directory such as /tmp nobody
  // else can replace it, while a link another user planted under the cache's name is refused.
  static TrustedDirectory open(llvm::StringRef path, bool create);

  // Opens `name` inside the opened `parent` (creating it 0700 when `create`), never through a
  // link, with the same checks. `shown` is its path for messages.
  static TrustedDirectory openAt(const TrustedDirectory &parent, llvm::StringRef name,
                                 llvm::StringRef shown, bool create);

  TrustedDirectory() = default; // Missing
  Status status() const { return status_; }
  bool isOpen() const { return status_ == Status::Opened; }
  // The directory's descriptor while isOpen().
  int fd() const { return fd_.get(); }
  // The path it was opened by, for messages only: it is never resolved again.
  const std::string &path() const { return path_; }
  // Why it is not open: "not a directory", "owned by uid 65534, not by this user (uid 1000)",
  // "a symbolic link owned by uid 65534, not by this user (uid 1000)", "create_directories: ...".
  const std::string &reason() const { return reason_; }
  // Whether this process may create and remove names in it: no error, or access's.
  std::error_code writeAccess() const;

private:
  TrustedDirectory(Status status, std::string path, std::string reason)
      : status_(status), path_(std::move(path)), reason_(std::move(reason)) {}
  // The checks on a descriptor just opened.
  static TrustedDirectory checked(ScopedFd fd, std::string path);

  Status status_ = Status::Missing;
  ScopedFd fd_;
  std::string path_;
  std::string reason_;
};

} // namespace flashbob::runtime
