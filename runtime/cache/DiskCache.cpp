#include "runtime/cache/DiskCache.h"
#include "runtime/cache/CacheDirectory.h"
#include "runtime/cache/SafeFile.h"
#include "runtime/cache/TrustedDirectory.h"

#include "support/Errors.h"
#include "support/Json.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

llvm::Error failure(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

std::string sha256Hex(llvm::StringRef bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)), /*LowerCase=*/true);
}

bool isLowerHex(llvm::StringRef s, size_t length) {
  return s.size() == length &&
         llvm::all_of(s, [](char c) { return llvm::isDigit(c) || (c >= 'a' && c <= 'f'); });
}

// Names come back from metadata.json on lookup too, so this also keeps a damaged or hostile
// metadata file from pointing outside the entry ("../x") or at metadata.json itself.
bool isPlainFileName(llvm::StringRef name) {
  return !name.empty() && !name.starts_with(".") && !name.contains('/') &&
         !name.contains('\0') && name != DiskCache::MetadataFileName;
}

// Bounds on what lookup and list read: a planted link to /dev/zero or a huge file is refused by
// its size, not read until memory runs out. metadata.json holds the key text and a few records;
// a stage file (PTX, LLVM IR of a large kernel) stays far below 256 MiB.
constexpr uint64_t kMaxMetadataBytes = 1 << 20;
constexpr uint64_t kMaxStageFileBytes = uint64_t(256) << 20;

std::string errnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

std::string under(llvm::StringRef dir, llvm::StringRef name) { return (dir + "/" + name).str(); }

// Everything below works on descriptors of directories already opened (`entry`, `shard`);
// the paths passed beside them only name things in messages.

llvm::Expected<llvm::json::Object> readMetadata(int entry, llvm::StringRef entryShown) {
  const std::string metaPath = under(entryShown, DiskCache::MetadataFileName);
  llvm::Expected<std::string> text =
      readRegularFileAt(entry, DiskCache::MetadataFileName, kMaxMetadataBytes, metaPath);
  if (!text)
    return text.takeError();
  llvm::Expected<llvm::json::Value> value = support::parseJson(*text);
  if (!value)
    return failure("parse " + metaPath + ": " + llvm::toString(value.takeError()));
  llvm::json::Object *object = value->getAsObject();
  if (!object)
    return failure(metaPath + " is not a JSON object");
  return std::move(*object);
}

// Reads and verifies one entry directory; any error means "damaged or not this key".
llvm::Expected<CacheEntry> readEntry(int entry, llvm::StringRef entryDir, llvm::StringRef key,
                                     llvm::StringRef keyText) {
  llvm::Expected<llvm::json::Object> meta = readMetadata(entry, entryDir);
  if (!meta)
    return meta.takeError();
  if (meta->getInteger("format") != DiskCache::FormatVersion)
    return failure(entryDir + ": format version is not " + llvm::Twine(DiskCache::FormatVersion));
  if (meta->getString("key") != std::optional<llvm::StringRef>(key))
    return failure(entryDir + ": stored key differs");
  if (meta->getString("keyText") != std::optional<llvm::StringRef>(keyText))
    return failure(entryDir + ": stored key text differs");
  const llvm::json::Array *files = meta->getArray("files");
  const llvm::json::Object *callerMeta = meta->getObject("metadata");
  if (!files || !callerMeta)
    return failure(entryDir + ": metadata.json lacks files or metadata");

  CacheEntry result;
  result.key = key.str();
  result.keyText = keyText.str();
  result.metadata = *callerMeta;
  llvm::StringSet<> seen;
  for (const llvm::json::Value &f : *files) {
    const llvm::json::Object *record = f.getAsObject();
    std::optional<llvm::StringRef> name = record ? record->getString("name") : std::nullopt;
    std::optional<int64_t> size = record ? record->getInteger("size") : std::nullopt;
    std::optional<llvm::StringRef> sha = record ? record->getString("sha256") : std::nullopt;
    if (!name || !size || !sha || !isPlainFileName(*name) || !seen.insert(*name).second)
      return failure(entryDir + ": bad file record in metadata.json");
    const std::string filePath = under(entryDir, *name);
    if (*size < 0 || uint64_t(*size) > kMaxStageFileBytes)
      return failure(filePath + ": size in metadata.json out of range");
    // Bounded by the recorded size: a longer file is damaged, whatever it is.
    llvm::Expected<std::string> bytes = readRegularFileAt(entry, *name, uint64_t(*size), filePath);
    if (!bytes)
      return bytes.takeError();
    if (bytes->size() != uint64_t(*size) || sha256Hex(*bytes) != *sha)
      return failure(filePath + ": SHA-256 differs from metadata.json");
    result.files.push_back({name->str(), std::move(*bytes)});
  }
  return result;
}

// Removes `name` in the shard without ever showing a half-deleted entry: first an atomic rename
// out of the way, then the slow delete. Best effort: a read-only cache keeps its damaged entry
// (still a miss). removeTreeAt never follows a link (a link where an entry belongs is removed
// itself, never what it points to) and unlinks FIFOs and sockets too.
void discard(int shard, llvm::StringRef name, llvm::StringRef shardShown) {
  // The trash name ends in ".trash-..." so list() and lookup never take it for an entry.
  const std::string trash = randomName((name + ".trash-").str());
  const std::string victim =
      ::renameat(shard, name.str().c_str(), shard, trash.c_str()) == 0 ? trash : name.str();
  std::vector<std::string> failures;
  if (!removeTreeAt(shard, victim, under(shardShown, victim), failures))
    support::log(support::LogLevel::Debug, "flashbob cache: could not remove " +
                                               under(shardShown, victim) + ": " +
                                               failures.front());
}

std::string shortKey(llvm::StringRef key) { return key.take_front(16).str(); }

std::string firstLine(llvm::StringRef text) { return text.split('\n').first.rtrim("\r").str(); }

} // namespace

const std::string *CacheEntry::file(llvm::StringRef name) const {
  for (const CacheFile &f : files)
    if (f.name == name)
      return &f.bytes;
  return nullptr;
}

DiskCache::DiskCache(llvm::StringRef directory) {
  llvm::SmallString<256> absolute(directory);
  // A relative FLASHBOB_CACHE_DIR must not change meaning if the process changes directory.
  (void)fs::make_absolute(absolute);
  path::remove_dots(absolute, /*remove_dot_dot=*/true);
  directory_ = absolute.str().str();
  // MiB to bytes, saturating: a bound past 2^64 bytes is no bound.
  const uint64_t mib = support::knobs::cacheMaxMB();
  maxBytes_ = mib > (UINT64_MAX >> 20) ? 0 : mib << 20;
}

std::string DiskCache::defaultDirectory() {
  if (std::string dir = support::knobs::cacheDir(); !dir.empty())
    return dir;
  llvm::SmallString<256> result;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    result = xdg;
    path::append(result, "flashbob");
    return result.str().str();
  }
  const char *home = std::getenv("HOME");
  if (home && *home)
    result = home;
  else if (!path::home_directory(result)) // HOME unset: the password database
    result.clear();
  if (result.empty()) // no home at all (a bare container): a per-user temp directory
    return perUserTempDirectory();
  path::append(result, ".cache", "flashbob");
  return result.str().str();
}

std::string DiskCache::keyFor(llvm::StringRef keyText) { return sha256Hex(keyText); }

std::string DiskCache::shardPath(llvm::StringRef key) const {
  return under(directory_, key.take_front(2));
}

std::string DiskCache::entryPath(llvm::StringRef key) const { return under(shardPath(key), key); }

namespace {
// One line per process, not per cache object or per kernel: a read-only home would otherwise
// print it for every kernel compiled.
// One flag per kind of warning, so one kind never hides another.
void warnOnce(std::atomic<bool> &warned, const std::string &message) {
  if (!warned.exchange(true))
    support::log(support::LogLevel::Warning, message);
}
} // namespace

void DiskCache::degradeLocked(const llvm::Twine &reason) {
  state_ = DirState::Unwritable;
  static std::atomic<bool> warned{false};
  warnOnce(warned, "flashbob: warning: kernel cache directory " + directory_ + " is not writable (" +
           reason.str() + "); caching in memory only");
}

DiskCache::DirState DiskCache::openLocked(bool create) {
  if (state_ != DirState::Unknown)
    return state_;
  return adoptLocked(TrustedDirectory::open(directory_, create));
}

DiskCache::DirState DiskCache::adoptLocked(TrustedDirectory dir) {
  switch (dir.status()) {
  case TrustedDirectory::Status::Missing:
    return DirState::Unknown; // nothing to read; decided when something is stored
  case TrustedDirectory::Status::NotDirectory:
  case TrustedDirectory::Status::Unusable:
    degradeLocked(dir.reason());
    return state_;
  case TrustedDirectory::Status::Untrusted: {
    state_ = DirState::Refused;
    static std::atomic<bool> warned{false};
    warnOnce(warned, "flashbob: warning: kernel cache directory " + directory_ +
                         " is not used: it is " + dir.reason() +
                         "; it must belong to this user and be writable by nobody else (chmod "
                         "700); caching in memory only");
    return state_;
  }
  case TrustedDirectory::Status::Opened:
    break;
  }
  // From here on only this descriptor is used, never the path.
  root_ = std::move(dir);
  if (std::error_code ec = root_.writeAccess()) {
    // Read-only but ours: its entries may still be used.
    degradeLocked("access: " + ec.message());
    state_ = DirState::ReadOnly;
    return state_;
  }
  state_ = DirState::Writable;
  return state_;
}

bool DiskCache::hasMarkerLocked() const {
  struct stat st;
  return root_.isOpen() &&
         ::fstatat(root_.fd(), MarkerFileName.data(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(st.st_mode);
}

std::string DiskCache::unmarkedMessage() const {
  return directory_ + " has no " + MarkerFileName.str() +
         " marker, so flashbob did not write it as a cache; nothing removed (a cache of an older "
         "flashbob gets the marker on its next store)";
}

void DiskCache::markLocked() {
  if (marked_)
    return;
  // The marker tells clear() and prune() that this directory is a cache they may empty: they
  // remove nothing elsewhere. Written on the first store, not on a lookup: looking into a
  // directory does not make it ours. Best effort: without it the cache works, only clear() and
  // prune() refuse.
  struct stat st;
  if (::fstatat(root_.fd(), MarkerFileName.data(), &st, AT_SYMLINK_NOFOLLOW) != 0 &&
      errno == ENOENT)
    if (llvm::Error e = writeNewFileAt(root_.fd(), MarkerFileName,
                                       "This directory is a FlashBoB kernel cache: `flashbob "
                                       "cache clear` removes only the entries it wrote.\n",
                                       under(directory_, MarkerFileName)))
      llvm::consumeError(std::move(e));
  marked_ = true;
}

ScopedFd DiskCache::openShardLocked(llvm::StringRef key, bool create, std::string *error) {
  const std::string name = key.take_front(2).str();
  ScopedFd shard = openDirectoryAt(root_.fd(), name);
  if (shard)
    return shard;
  int why = errno;
  if (why == ENOTDIR) {
    // A link, file or FIFO where the shard belongs: removed itself (never followed), so that
    // this store, or the next, puts the shard back instead of failing on every run.
    if (::unlinkat(root_.fd(), name.c_str(), 0) == 0) {
      support::log(support::LogLevel::Debug,
                   "flashbob cache: removed " + shardPath(key) + ": not a directory");
      why = ENOENT;
    } else {
      why = errno;
    }
  }
  if (why == ENOENT && create) {
    if (::mkdirat(root_.fd(), name.c_str(), 0700) == 0 || errno == EEXIST) {
      if ((shard = openDirectoryAt(root_.fd(), name)))
        return shard;
    }
    why = errno;
  }
  if (error)
    *error = "open(" + shardPath(key) + "): " + errnoMessage(why);
  return shard;
}

bool DiskCache::writable() {
  std::lock_guard<std::mutex> lock(mutex_);
  return openLocked(/*create=*/true) == DirState::Writable;
}

std::optional<CacheEntry>
DiskCache::lookup(llvm::StringRef keyText,
                  llvm::function_ref<llvm::Error(const CacheEntry &)> check) {
  std::string key = keyFor(keyText);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(key); it != memory_.end() && it->second.keyText == keyText) {
    // Checked like a disk entry: the caller may depend on what `check` derives from it.
    if (!check)
      return it->second;
    llvm::Error e = check(it->second);
    if (!e)
      return it->second;
    llvm::consumeError(std::move(e));
    memory_.erase(it);
    return std::nullopt;
  }
  // Never read entries from a directory someone else can write: they would run as GPU code.
  if (DirState state = openLocked(/*create=*/false);
      state != DirState::Writable && state != DirState::ReadOnly)
    return std::nullopt;
  // Not through a link, neither the shard nor the entry: the files read below must be the
  // cache's own.
  ScopedFd shard = openShardLocked(key, /*create=*/false, nullptr);
  if (!shard)
    return std::nullopt;
  const std::string entryDir = entryPath(key);
  ScopedFd entryFd = openDirectoryAt(shard.get(), key);
  const int openError = entryFd ? 0 : errno;
  if (openError == ENOENT)
    return std::nullopt;
  llvm::Expected<CacheEntry> entry =
      entryFd ? readEntry(entryFd.get(), entryDir, key, keyText)
              : llvm::Expected<CacheEntry>(failure(
                    entryDir + ": " + (openError == ENOTDIR ? std::string("not a directory")
                                                            : errnoMessage(openError))));
  if (!entry) {
    std::string why = llvm::toString(entry.takeError());
    discard(shard.get(), key, shardPath(key));
    support::log(support::LogLevel::Debug,
                 "flashbob cache: removed damaged entry " + shortKey(key) + " (" + why + ")");
    return std::nullopt;
  }
  if (check)
    if (llvm::Error e = check(*entry)) {
      // Sound files with wrong contents: tampering or a bug of another build. Said, not hidden.
      support::log(support::LogLevel::Warning,
                   "flashbob: warning: kernel cache entry " + entryDir + " not used (" +
                       llvm::toString(std::move(e)) + "); removed, the kernel is recompiled");
      discard(shard.get(), key, shardPath(key));
      return std::nullopt;
    }
  // Marks the entry used now, for least-recently-used pruning. Best effort: in a cache of
  // another user's entries the time stays as it was.
  (void)touchRegularFileAt(entryFd.get(), MetadataFileName);
  support::log(support::LogLevel::Debug, "flashbob cache: hit " + shortKey(key) + " in " +
                                             directory_);
  return std::move(*entry);
}

void DiskCache::discardEntry(llvm::StringRef keyText, const llvm::Twine &why) {
  const std::string key = keyFor(keyText);
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.erase(key);
  if (DirState state = openLocked(/*create=*/false);
      state != DirState::Writable && state != DirState::ReadOnly)
    return;
  // Through the root's descriptor, never a link: a shard or entry that is not a real directory
  // is left to the next lookup, which removes it.
  ScopedFd shard = openShardLocked(key, /*create=*/false, nullptr);
  if (!shard || !openDirectoryAt(shard.get(), key))
    return;
  support::log(support::LogLevel::Warning, "flashbob: warning: kernel cache entry " +
                                               entryPath(key) + " not used (" + why +
                                               "); removed, the kernel is recompiled");
  discard(shard.get(), key, shardPath(key));
}

namespace {

llvm::Error validateStore(llvm::StringRef keyText, llvm::ArrayRef<CacheFile> files) {
  // metadata.json holds the key text as a JSON string, which must be UTF-8 to read back equal.
  if (!llvm::json::isUTF8(keyText))
    return support::makeInvalidArgument("keyText",
                                        "DiskCache::store: the key text is not valid UTF-8");
  llvm::StringSet<> seen;
  for (const CacheFile &f : files) {
    if (!isPlainFileName(f.name))
      return support::makeInvalidArgument(
          "files", "DiskCache::store: bad file name '" + f.name +
                       "' (must be a plain name, not hidden, not metadata.json)");
    if (!seen.insert(f.name).second)
      return support::makeInvalidArgument("files", "DiskCache::store: file name '" + f.name +
                                                       "' given twice");
  }
  return llvm::Error::success();
}

} // namespace

// Builds the entry in a temporary directory beside its final place, then renames it in; all of
// it relative to the shard's descriptor, which is never a link.
llvm::Error DiskCache::storeOnDiskLocked(llvm::StringRef key, llvm::StringRef keyText,
                                         llvm::ArrayRef<CacheFile> files,
                                         const llvm::json::Object &callerMeta) {
  std::string error;
  ScopedFd shard = openShardLocked(key, /*create=*/true, &error);
  if (!shard)
    return failure(error);
  const std::string shardDir = shardPath(key), entryDir = entryPath(key);
  // A leading dot and a suffix keep a leftover (crashed) temporary from ever looking like an entry.
  llvm::Expected<std::string> temp =
      makeUniqueDirectoryAt(shard.get(), "." + key.str() + ".tmp-", shardDir);
  if (!temp)
    return temp.takeError();
  const std::string tempDir = under(shardDir, *temp);
  llvm::scope_exit removeTemp([&] {
    std::vector<std::string> ignored; // a leftover is harmless: clear() removes it
    (void)removeTreeAt(shard.get(), *temp, tempDir, ignored);
  });
  ScopedFd tempFd = openDirectoryAt(shard.get(), *temp);
  if (!tempFd)
    return failure("open(" + tempDir + "): " + errnoMessage(errno));

  llvm::json::Array records;
  for (const CacheFile &f : files) {
    if (llvm::Error e = writeNewFileAt(tempFd.get(), f.name, f.bytes, under(tempDir, f.name)))
      return e;
    records.push_back(llvm::json::Object{{"name", f.name},
                                         {"size", int64_t(f.bytes.size())},
                                         {"sha256", sha256Hex(f.bytes)}});
  }
  llvm::json::Object meta{{"format", DiskCache::FormatVersion},
                          {"key", key},
                          {"keyText", keyText},
                          {"files", std::move(records)},
                          {"metadata", llvm::json::Object(callerMeta)}};
  std::string metaText;
  llvm::raw_string_ostream(metaText) << llvm::formatv("{0:2}", llvm::json::Value(std::move(meta)))
                                     << "\n";
  if (llvm::Error e = writeNewFileAt(tempFd.get(), MetadataFileName, metaText,
                                     under(tempDir, MetadataFileName)))
    return e;

  // rename(2) refuses to replace a non-empty directory, so exactly one process gets its entry in.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::renameat(shard.get(), temp->c_str(), shard.get(), key.str().c_str()) == 0)
      return llvm::Error::success();
    const int renameError = errno;
    struct stat st;
    if (::fstatat(shard.get(), key.str().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return failure("rename(" + tempDir + ", " + entryDir + "): " + errnoMessage(renameError));
    // Another process won the race: keep its entry if it is sound, else (or if something else
    // is in the way) replace it once.
    if (ScopedFd existing = openDirectoryAt(shard.get(), key)) {
      llvm::Expected<CacheEntry> sound = readEntry(existing.get(), entryDir, key, keyText);
      if (sound)
        return llvm::Error::success();
      llvm::consumeError(sound.takeError());
    }
    discard(shard.get(), key, shardDir);
  }
  // Still losing to someone storing the same key; their entry stands.
  if (openDirectoryAt(shard.get(), key))
    return llvm::Error::success();
  return failure("rename(" + tempDir + ", " + entryDir + "): gave up after retrying");
}

llvm::Error DiskCache::store(llvm::StringRef keyText, llvm::ArrayRef<CacheFile> files,
                             llvm::json::Object metadata) {
  if (llvm::Error e = validateStore(keyText, files))
    return e;
  std::string key = keyFor(keyText);
  std::lock_guard<std::mutex> lock(mutex_);
  if (openLocked(/*create=*/true) == DirState::Writable) {
    markLocked();
    llvm::Error e = storeOnDiskLocked(key, keyText, files, metadata);
    if (!e) {
      support::log(support::LogLevel::Debug, "flashbob cache: stored " + shortKey(key) + " in " +
                                                 directory_);
      pruneLocked(key);
      return llvm::Error::success();
    }
    // One entry failed (a full disk, a file size limit): the directory stays in use for the
    // others; this one is kept in memory.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      support::log(support::LogLevel::Warning,
                   "flashbob: warning: kernel cache: could not store " + shortKey(key) + " in " +
                       directory_ + " (" + llvm::toString(std::move(e)) +
                       "); kept in memory for this process");
    else
      llvm::consumeError(std::move(e));
  }
  memory_[key] = CacheEntry{key, keyText.str(), files.vec(), std::move(metadata)};
  return llvm::Error::success();
}

std::vector<ListedEntry> DiskCache::list() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (openLocked(/*create=*/false) == DirState::Refused)
    return {}; // not ours: the warning said why
  return listLocked(/*withSummaries=*/true);
}

namespace {
llvm::sys::TimePoint<> modificationTime(const struct stat &st) {
  return llvm::sys::toTimePoint(st.st_mtim.tv_sec, uint32_t(st.st_mtim.tv_nsec));
}
} // namespace

std::vector<ListedEntry> DiskCache::listLocked(bool withSummaries) {
  std::vector<ListedEntry> result;
  std::vector<std::string> shards;
  if (!root_.isOpen() || readDirectoryAt(root_.fd(), shards))
    return result;
  for (const std::string &shardName : shards) {
    if (!isLowerHex(shardName, 2))
      continue;
    ScopedFd shard = openDirectoryAt(root_.fd(), shardName); // not a link, file or FIFO
    std::vector<std::string> keys;
    if (!shard || readDirectoryAt(shard.get(), keys))
      continue;
    const std::string shardDir = under(directory_, shardName);
    for (const std::string &key : keys) {
      if (!isLowerHex(key, 64) || !llvm::StringRef(key).starts_with(shardName))
        continue;
      ScopedFd entry = openDirectoryAt(shard.get(), key);
      struct stat dirStatus;
      if (!entry || ::fstat(entry.get(), &dirStatus) != 0)
        continue;
      const std::string entryDir = under(shardDir, key);
      ListedEntry listed;
      listed.key = key;
      // Pruning needs sizes and times only: parsing every metadata.json after each store would
      // cost more than the walk.
      if (withSummaries) {
        llvm::Expected<llvm::json::Object> meta = readMetadata(entry.get(), entryDir);
        if (meta) {
          const llvm::json::Object *callerMeta = meta->getObject("metadata");
          std::optional<llvm::StringRef> name =
              callerMeta ? callerMeta->getString("name") : std::nullopt;
          std::optional<llvm::StringRef> keyText = meta->getString("keyText");
          listed.summary = name ? name->str() : keyText ? firstLine(*keyText) : "";
        } else {
          llvm::consumeError(meta.takeError());
          listed.summary = "(damaged: unreadable metadata.json)";
        }
      }
      listed.modified = modificationTime(dirStatus);
      struct stat metaStatus;
      listed.lastUsed = ::fstatat(entry.get(), MetadataFileName.data(), &metaStatus,
                                  AT_SYMLINK_NOFOLLOW) == 0
                            ? modificationTime(metaStatus)
                            : listed.modified;
      std::vector<std::string> files;
      (void)readDirectoryAt(entry.get(), files);
      for (const std::string &f : files) {
        struct stat st;
        if (::fstatat(entry.get(), f.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
          listed.bytes += uint64_t(st.st_size);
      }
      result.push_back(std::move(listed));
    }
  }
  std::sort(result.begin(), result.end(),
            [](const ListedEntry &a, const ListedEntry &b) { return a.key < b.key; });
  return result;
}

PruneResult DiskCache::prune(llvm::StringRef keepKey) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (openLocked(/*create=*/false) != DirState::Writable)
    return {}; // missing, read-only or not ours: nothing to remove
  return pruneLocked(keepKey);
}

PruneResult DiskCache::pruneLocked(llvm::StringRef keepKey) {
  PruneResult removed;
  // As clear(): in a directory the cache never marked, what looks like entries may be anything
  // of the user's.
  if (!hasMarkerLocked()) {
    removed.refused = unmarkedMessage();
    return removed;
  }
  if (maxBytes_ == 0)
    return removed;
  // listLocked walks only real entry directories (two-hex shard / 64-hex key, no symbolic
  // links), so nothing else in the directory can be chosen below.
  std::vector<ListedEntry> entries = listLocked(/*withSummaries=*/false);
  uint64_t total = 0;
  for (const ListedEntry &e : entries)
    total += e.bytes;
  if (total <= maxBytes_)
    return removed;
  std::stable_sort(entries.begin(), entries.end(), [](const ListedEntry &a, const ListedEntry &b) {
    return a.lastUsed < b.lastUsed;
  });
  for (const ListedEntry &e : entries) {
    if (total <= maxBytes_)
      break;
    if (e.key == keepKey)
      continue;
    if (ScopedFd shard = openDirectoryAt(root_.fd(), llvm::StringRef(e.key).take_front(2)))
      discard(shard.get(), e.key, shardPath(e.key));
    total -= e.bytes;
    ++removed.entries;
    removed.bytes += e.bytes;
  }
  support::log(support::LogLevel::Debug,
               llvm::formatv("flashbob cache: pruned {0} least recently used entries ({1} B) to "
                             "stay under {2} MiB (FLASHBOB_CACHE_MAX_MB)",
                             removed.entries, removed.bytes, maxBytes_ >> 20));
  return removed;
}

namespace {
// The names the cache gives things in a shard: entries, temporaries being built, trash being
// removed.
bool isCacheWrittenName(llvm::StringRef name, llvm::StringRef shardName) {
  llvm::StringRef key = name;
  if (key.consume_front(".")) { // .<key>.tmp-XXXXXX
    size_t dot = key.find('.');
    if (dot == llvm::StringRef::npos || !key.substr(dot).starts_with(".tmp"))
      return false;
    key = key.take_front(dot);
  } else if (size_t trash = key.find(".trash-"); trash != llvm::StringRef::npos) {
    key = key.take_front(trash);
  }
  return isLowerHex(key, 64) && key.starts_with(shardName);
}

} // namespace

llvm::Expected<ClearResult> DiskCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
  ClearResult result;
  if (state_ == DirState::Unknown) {
    TrustedDirectory dir = TrustedDirectory::open(directory_, /*create=*/false);
    // Nothing there, or a file where the directory (or one above it) would be: nothing to clear.
    if (dir.status() == TrustedDirectory::Status::Missing ||
        dir.status() == TrustedDirectory::Status::NotDirectory)
      return result;
    adoptLocked(std::move(dir));
  }
  if (state_ == DirState::Refused || state_ == DirState::Unwritable)
    return failure(directory_ + " is not used as a kernel cache (see the warning above); nothing "
                                "removed");
  if (!hasMarkerLocked())
    return failure(unmarkedMessage());
  std::vector<std::string> shards;
  if (std::error_code ec = readDirectoryAt(root_.fd(), shards))
    result.failures.push_back("read directory(" + directory_ + "): " + ec.message());
  for (const std::string &shardName : shards) {
    if (!isLowerHex(shardName, 2))
      continue;
    ScopedFd shard = openDirectoryAt(root_.fd(), shardName); // a link is no shard: left alone
    if (!shard)
      continue;
    const std::string shardDir = under(directory_, shardName);
    std::vector<std::string> names;
    if (std::error_code ec = readDirectoryAt(shard.get(), names)) {
      result.failures.push_back("read directory(" + shardDir + "): " + ec.message());
      continue;
    }
    for (const std::string &n : names)
      if (isCacheWrittenName(n, shardName) &&
          removeTreeAt(shard.get(), n, under(shardDir, n), result.failures) && isLowerHex(n, 64))
        ++result.entries;
    // The shard goes only when nothing else is left in it; a user's file keeps it.
    (void)::unlinkat(root_.fd(), shardName.c_str(), AT_REMOVEDIR);
  }
  return result;
}

} // namespace flashbob::runtime
