#include "runtime/cache/SafeFile.h"

#include "llvm/ADT/Twine.h"

#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace flashbob::runtime {

namespace {

std::string errnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

llvm::Error callFailure(llvm::StringRef call, llvm::StringRef path, int error) {
  return llvm::createStringError(std::error_code(error, std::generic_category()),
                                 call + "(" + path + "): " + errnoMessage(error));
}

const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "directory";
  if (S_ISFIFO(mode))
    return "FIFO";
  if (S_ISSOCK(mode))
    return "socket";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "device";
  if (S_ISLNK(mode))
    return "symbolic link";
  return "special file";
}

// O_NOFOLLOW: a planted link is refused (ELOOP) instead of read. O_NONBLOCK: opening a FIFO
// with no writer returns at once instead of waiting for one (fstat then refuses it).
int openNoFollow(const std::string &path, int extraFlags) {
  int fd;
  do
    fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | extraFlags);
  while (fd < 0 && errno == EINTR);
  return fd;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

llvm::Expected<std::string> readRegularFile(llvm::StringRef pathRef, uint64_t maxBytes) {
  const std::string path = pathRef.str();
  Fd file{openNoFollow(path, 0)};
  if (file.fd < 0)
    return callFailure("open", path, errno);
  struct stat st;
  if (::fstat(file.fd, &st) != 0)
    return callFailure("fstat", path, errno);
  if (!S_ISREG(st.st_mode))
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   path + ": not a regular file (" + kindOf(st.st_mode) + ")");
  if (uint64_t(st.st_size) > maxBytes)
    return llvm::createStringError(std::make_error_code(std::errc::file_too_large),
                                   path + ": " + llvm::Twine(uint64_t(st.st_size)) +
                                       " B, more than the " + llvm::Twine(maxBytes) +
                                       " B bound");
  std::string bytes;
  bytes.reserve(size_t(st.st_size));
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(file.fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return callFailure("read", path, errno);
    if (n == 0)
      return bytes;
    // A file that grows while it is read (another writer) is still held to the bound.
    if (bytes.size() + size_t(n) > maxBytes)
      return llvm::createStringError(std::make_error_code(std::errc::file_too_large),
                                     path + ": grew past the " + llvm::Twine(maxBytes) +
                                         " B bound while read");
    bytes.append(chunk, size_t(n));
  }
}

bool touchRegularFile(llvm::StringRef pathRef) {
  Fd file{openNoFollow(pathRef.str(), 0)};
  struct stat st;
  if (file.fd < 0 || ::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  // futimens on a read-only descriptor works for the file's owner, which is what we want: in a
  // cache of another user's entries the time stays as it was.
  return ::futimens(file.fd, nullptr) == 0;
}

namespace {

// Works relative to the parent's descriptor (openat/unlinkat), so swapping a directory on the
// way for a link cannot redirect the walk outside the tree.
bool removeAt(int parent, const std::string &name, const std::string &shown,
              std::vector<std::string> &failures) {
  struct stat st;
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT)
      return true;
    failures.push_back("lstat(" + shown + "): " + errnoMessage(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT)
      return true;
    failures.push_back("unlink(" + shown + "): " + errnoMessage(errno));
    return false;
  }
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    failures.push_back("open(" + shown + "): " + errnoMessage(errno));
    return false;
  }
  DIR *dir = ::fdopendir(fd);
  if (!dir) {
    failures.push_back("fdopendir(" + shown + "): " + errnoMessage(errno));
    ::close(fd);
    return false;
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent *d = ::readdir(dir)) {
    llvm::StringRef n(d->d_name);
    if (n != "." && n != "..")
      names.push_back(n.str());
  }
  bool childrenGone = true;
  for (const std::string &n : names)
    childrenGone &= removeAt(::dirfd(dir), n, shown + "/" + n, failures);
  ::closedir(dir);
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
    return true;
  if (childrenGone) // otherwise "not empty" only repeats what was already reported
    failures.push_back("rmdir(" + shown + "): " + errnoMessage(errno));
  return false;
}

} // namespace

bool removeTree(llvm::StringRef path, std::vector<std::string> &failures) {
  return removeAt(AT_FDCWD, path.str(), path.str(), failures);
}

} // namespace flashbob::runtime
