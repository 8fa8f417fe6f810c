#include "runtime/cache/SafeFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

namespace {

std::string errnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

llvm::Error callFailure(llvm::StringRef call, const llvm::Twine &path, int error) {
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

// O_NOFOLLOW: a planted link is refused instead of followed. O_NONBLOCK: opening a FIFO with no
// writer returns at once instead of waiting for one (fstat then refuses it).
ScopedFd openNoFollowAt(int dirFd, llvm::StringRef name, int flags) {
  const std::string n = name.str();
  int fd;
  do
    fd = ::openat(dirFd, n.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
  while (fd < 0 && errno == EINTR);
  return ScopedFd(fd);
}

} // namespace

ScopedFd &ScopedFd::operator=(ScopedFd &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0)
    ::close(fd_);
}

ScopedFd openDirectoryAt(int dirFd, llvm::StringRef name) {
  // With O_DIRECTORY, a link (O_NOFOLLOW), file or FIFO there fails with ENOTDIR.
  return openNoFollowAt(dirFd, name, O_RDONLY | O_DIRECTORY);
}

std::error_code readDirectoryAt(int dirFd, std::vector<std::string> &names) {
  // "." relative to the descriptor is the directory itself, opened anew with its own position.
  int fd = ::openat(dirFd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return std::error_code(errno, std::generic_category());
  DIR *dir = ::fdopendir(fd);
  if (!dir) {
    std::error_code ec(errno, std::generic_category());
    ::close(fd);
    return ec;
  }
  errno = 0;
  while (const dirent *d = ::readdir(dir)) {
    llvm::StringRef n(d->d_name);
    if (n != "." && n != "..")
      names.push_back(n.str());
  }
  std::error_code ec(errno, std::generic_category());
  ::closedir(dir);
  return ec;
}

llvm::Expected<std::string> readRegularFileAt(int dirFd, llvm::StringRef name, uint64_t maxBytes,
                                              llvm::StringRef shownRef) {
  const std::string path = shownRef.str();
  ScopedFd file = openNoFollowAt(dirFd, name, O_RDONLY);
  if (!file)
    return callFailure("open", path, errno);
  struct stat st;
  if (::fstat(file.get(), &st) != 0)
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
    ssize_t n = ::read(file.get(), chunk, sizeof(chunk));
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

namespace {

// writeNewFileAt's work: 0, or the errno of the call named in `call` (the partial file removed).
int writeNewFile(int dirFd, llvm::StringRef name, llvm::StringRef bytes, const char *&call) {
  // O_EXCL: a name someone planted (a link, a FIFO, a file) is an error, never written through.
  call = "open";
  ScopedFd file = openNoFollowAt(dirFd, name, O_WRONLY | O_CREAT | O_EXCL);
  if (!file)
    return errno;
  // Checked to the last byte: a full disk or a file size limit shows as a failed or short write
  // (or only at close, on some file systems), and then the partial file must not stay behind.
  auto fail = [&](const char *failedCall, int error) {
    call = failedCall;
    file = ScopedFd();
    (void)::unlinkat(dirFd, name.str().c_str(), 0);
    return error;
  };
  const char *data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(file.get(), data, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail("write", errno);
    if (n == 0)
      return fail("write", ENOSPC);
    data += n;
    left -= size_t(n);
  }
  // No fsync: a file cut short by a power loss fails its checksum (a cache entry) or its parse
  // (a tuning record) and is dropped.
  if (::close(file.release()) != 0)
    return fail("close", errno);
  return 0;
}

} // namespace

llvm::Error writeNewFileAt(int dirFd, llvm::StringRef name, llvm::StringRef bytes,
                           llvm::StringRef shown) {
  const char *call = nullptr;
  if (int error = writeNewFile(dirFd, name, bytes, call))
    return callFailure(call, shown, error);
  return llvm::Error::success();
}

std::string randomName(llvm::StringRef prefix) {
  // random_device, not rand(): a library must not disturb its host's rand() sequence.
  std::random_device random;
  return prefix.str() + llvm::utohexstr(random() & 0xffffffffu, /*LowerCase=*/true, /*Width=*/8);
}

// A random name is taken again only by chance (or by someone planting names): a few more tries.
constexpr int kUniqueNameAttempts = 100;

llvm::Expected<std::string> makeUniqueDirectoryAt(int dirFd, llvm::StringRef prefix,
                                                  llvm::StringRef shownDir) {
  for (int attempt = 1;; ++attempt) {
    std::string name = randomName(prefix);
    if (::mkdirat(dirFd, name.c_str(), 0700) == 0)
      return name;
    if (errno != EEXIST || attempt == kUniqueNameAttempts)
      return callFailure("mkdir", shownDir + "/" + name, errno);
  }
}

llvm::Expected<std::string> writeUniqueFileAt(int dirFd, llvm::StringRef prefix,
                                              llvm::StringRef bytes, llvm::StringRef shownDir) {
  for (int attempt = 1;; ++attempt) {
    std::string name = randomName(prefix);
    const char *call = nullptr;
    int error = writeNewFile(dirFd, name, bytes, call);
    if (error == 0)
      return name;
    if (error != EEXIST || attempt == kUniqueNameAttempts)
      return callFailure(call, shownDir + "/" + name, error);
  }
}

bool touchRegularFileAt(int dirFd, llvm::StringRef name) {
  ScopedFd file = openNoFollowAt(dirFd, name, O_RDONLY);
  struct stat st;
  if (!file || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  // futimens on a read-only descriptor works for the file's owner, which is what we want: in a
  // cache of another user's entries the time stays as it was.
  return ::futimens(file.get(), nullptr) == 0;
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
  ScopedFd dir = openDirectoryAt(parent, name);
  if (!dir) {
    failures.push_back("open(" + shown + "): " + errnoMessage(errno));
    return false;
  }
  std::vector<std::string> names;
  if (std::error_code ec = readDirectoryAt(dir.get(), names)) {
    failures.push_back("read directory(" + shown + "): " + ec.message());
    return false;
  }
  bool childrenGone = true;
  for (const std::string &n : names)
    childrenGone &= removeAt(dir.get(), n, shown + "/" + n, failures);
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
    return true;
  if (childrenGone) // otherwise "not empty" only repeats what was already reported
    failures.push_back("rmdir(" + shown + "): " + errnoMessage(errno));
  return false;
}

} // namespace

bool removeTreeAt(int dirFd, llvm::StringRef name, llvm::StringRef shown,
                  std::vector<std::string> &failures) {
  return removeAt(dirFd, name.str(), shown.str(), failures);
}

} // namespace flashbob::runtime
