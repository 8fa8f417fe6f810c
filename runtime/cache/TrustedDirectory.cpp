#include "runtime/cache/TrustedDirectory.h"
#include "runtime/cache/CacheDirectory.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

namespace {
std::string errnoReason(llvm::StringRef call, int error) {
  return (call + ": " + std::error_code(error, std::generic_category()).message()).str();
}
} // namespace

TrustedDirectory TrustedDirectory::checked(ScopedFd fd, std::string path) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return TrustedDirectory(Status::Unusable, std::move(path), errnoReason("fstat", errno));
  if (std::optional<std::string> why = untrustedReason(st.st_mode, st.st_uid, st.st_gid,
                                                       ::geteuid(), userPrivateGroup()))
    return TrustedDirectory(Status::Untrusted, std::move(path), *why);
  TrustedDirectory opened(Status::Opened, std::move(path), "");
  opened.fd_ = std::move(fd);
  return opened;
}

TrustedDirectory TrustedDirectory::open(llvm::StringRef pathRef, bool create) {
  std::string path = pathRef.str();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error != ENOENT && error != ENOTDIR)
      return TrustedDirectory(Status::Unusable, path, errnoReason("lstat", error));
    if (!create)
      return TrustedDirectory(Status::Missing, path, errnoReason("lstat", error));
    // 0700: entries become GPU code in this process; nobody else needs to read or write them.
    if (std::error_code ec = llvm::sys::fs::create_directories(path, /*IgnoreExisting=*/true,
                                                               llvm::sys::fs::owner_all))
      return TrustedDirectory(Status::Unusable, path, "create_directories: " + ec.message());
    // Looked at again: whatever is there now (made by us or by someone quicker) is checked.
    if (::lstat(path.c_str(), &st) != 0)
      return TrustedDirectory(Status::Unusable, path, errnoReason("lstat", errno));
  }
  int flags = O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC;
  if (S_ISLNK(st.st_mode)) {
    // A link of this user's is their choice (a cache moved to another disk). Another user's is
    // the attack on a name in /tmp: it would point at a directory of this user's to pass the
    // checks, then be swapped for one of theirs.
    if (st.st_uid != ::geteuid())
      return TrustedDirectory(
          Status::Untrusted, path,
          llvm::formatv("a symbolic link owned by uid {0}, not by this user (uid {1})",
                        st.st_uid, ::geteuid())
              .str());
  } else if (!S_ISDIR(st.st_mode)) {
    return TrustedDirectory(Status::NotDirectory, path, "not a directory");
  } else {
    // A directory when looked at: it must still be one when opened, not a link put there since.
    flags |= O_NOFOLLOW;
  }
  ScopedFd fd(::open(path.c_str(), flags));
  if (!fd) {
    const int error = errno;
    return TrustedDirectory(error == ENOTDIR ? Status::NotDirectory : Status::Unusable, path,
                            error == ENOTDIR ? std::string("not a directory")
                                             : errnoReason("open", error));
  }
  return checked(std::move(fd), std::move(path));
}

TrustedDirectory TrustedDirectory::openAt(const TrustedDirectory &parent, llvm::StringRef name,
                                          llvm::StringRef shownRef, bool create) {
  std::string shown = shownRef.str();
  if (!parent.isOpen())
    return TrustedDirectory(parent.status(), shown, parent.path() + ": " + parent.reason());
  if (create && ::mkdirat(parent.fd(), name.str().c_str(), 0700) != 0 && errno != EEXIST)
    return TrustedDirectory(Status::Unusable, shown, errnoReason("mkdir", errno));
  ScopedFd fd = openDirectoryAt(parent.fd(), name);
  if (!fd) {
    const int error = errno;
    if (error == ENOENT)
      return TrustedDirectory(Status::Missing, shown, errnoReason("open", error));
    if (error != ENOTDIR)
      return TrustedDirectory(Status::Unusable, shown, errnoReason("open", error));
    // Inside the cache nothing is followed: what it finds there is its own or nothing.
    struct stat st;
    if (::fstatat(parent.fd(), name.str().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
      return TrustedDirectory(Status::Untrusted, shown, "a symbolic link, not followed");
    return TrustedDirectory(Status::NotDirectory, shown, "not a directory");
  }
  return checked(std::move(fd), std::move(shown));
}

std::error_code TrustedDirectory::writeAccess() const {
  if (!isOpen())
    return std::make_error_code(std::errc::bad_file_descriptor);
  // "." relative to the descriptor: the opened directory itself, not whatever the path names now.
  if (::faccessat(fd(), ".", W_OK, 0) != 0)
    return std::error_code(errno, std::generic_category());
  return {};
}

} // namespace flashbob::runtime
