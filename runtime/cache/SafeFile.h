// Reading, writing and removing files in a directory that another process, a careless script or
// a hostile local user may have touched (the kernel cache, the tuning records): never through a
// symbolic link, never blocking on a FIFO, never reading past a size bound, never leaving a
// directory behind because it holds something other than plain files, never leaving half a file
// behind when a write fails (a full disk).
//
// Everything works relative to an open directory descriptor (TrustedDirectory), so that a
// directory checked once is the one used afterwards: no path is resolved again, and renaming or
// replacing a directory on the way cannot redirect anything. `shown` is the path messages name.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace flashbob::runtime {

// Owns a file descriptor: closed when it goes.
class ScopedFd {
public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ScopedFd &operator=(ScopedFd &&other) noexcept;
  ScopedFd(const ScopedFd &) = delete;
  ScopedFd &operator=(const ScopedFd &) = delete;
  ~ScopedFd();

  int get() const { return fd_; }
  // Gives up ownership: the caller closes it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

private:
  int fd_ = -1;
};

// The directory `name` in `dirFd`, opened without following a link and without blocking. On
// failure the descriptor is invalid and errno says why: ENOENT (nothing there), ENOTDIR (a file,
// FIFO, socket, device or symbolic link is there), or another error.
ScopedFd openDirectoryAt(int dirFd, llvm::StringRef name);

// The names in the directory `dirFd` ("." and ".." left out), read through a descriptor of its
// own so `dirFd`'s position is untouched.
std::error_code readDirectoryAt(int dirFd, std::vector<std::string> &names);

// The bytes of `name` in `dirFd` when it is a regular file (not a link, FIFO, socket or device)
// of at most `maxBytes` bytes. The error names the call and the path: "open(<shown>): ...",
// "<shown>: not a regular file (FIFO)", "<shown>: 300000000 B, more than the 268435456 B bound".
llvm::Expected<std::string> readRegularFileAt(int dirFd, llvm::StringRef name, uint64_t maxBytes,
                                              llvm::StringRef shown);

// Creates `name` in `dirFd` (it must not exist: never through a link, never over another file),
// mode 0666 less the umask, and writes `bytes` to it. Every write and the close are checked: on
// any failure (a full disk, a file size limit) the partial file is removed and the error names
// the call, "write(<shown>): No space left on device".
llvm::Error writeNewFileAt(int dirFd, llvm::StringRef name, llvm::StringRef bytes,
                           llvm::StringRef shown);

// `prefix` followed by 8 random hex digits: a name for a temporary that no other process picks.
std::string randomName(llvm::StringRef prefix);

// Creates a new directory (0700) in `dirFd` named randomName(prefix); its name, or the error.
llvm::Expected<std::string> makeUniqueDirectoryAt(int dirFd, llvm::StringRef prefix,
                                                  llvm::StringRef shownDir);

// writeNewFileAt under a new name randomName(prefix); its name, or the error (nothing left).
llvm::Expected<std::string> writeUniqueFileAt(int dirFd, llvm::StringRef prefix,
                                              llvm::StringRef bytes, llvm::StringRef shownDir);

// Sets the modification time of `name` in `dirFd` to now if it is a regular file (not through a
// link, without blocking on a FIFO). Best effort: false when it could not.
bool touchRegularFileAt(int dirFd, llvm::StringRef name);

// Removes `name` in `dirFd`, and everything under it when it is a directory (a link is removed
// itself, never followed; FIFOs, sockets and devices are unlinked like files). Each thing it
// could not remove is appended to `failures` as "<call>(<path>): <reason>", paths shown under
// `shown`. True when it is gone.
bool removeTreeAt(int dirFd, llvm::StringRef name, llvm::StringRef shown,
                  std::vector<std::string> &failures);

} // namespace flashbob::runtime
