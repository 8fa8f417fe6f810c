// The on-disk kernel cache: every compilation stage of one kernel (MLIR, LLVM IR, PTX, cubin,
// ptxas log) kept under a key so a later process skips the compiler and ptxas.
//
// Layout: <dir>/<first 2 hex of key>/<key>/ holds the caller's files and metadata.json. An entry
// is built in a temporary sibling directory and renamed into place, so readers see either no
// entry or a complete one; metadata.json records each file's size and SHA-256, so damage done
// afterwards (a crash before data reached the disk, a full disk, a stray edit) is caught by
// lookup, which removes the entry and reports a miss.
//
// The key is the SHA-256 of a canonical key text the caller composes from everything that can
// change the output (spec, options, versions of the project, compiler, LLVM and ptxas, arch).
// The text itself is stored too and compared on lookup, so a mismatch never returns a kernel.
//
// The directory is opened once (TrustedDirectory: checked on its descriptor) and everything
// after that goes through descriptors, never through the path again, never through a link: a
// link or file where a shard or entry belongs is removed itself, never followed.
//
// Size: after each store the entries are kept under a bound (FLASHBOB_CACHE_MAX_MB, default
// 2048) by removing the least recently used ones; a hit marks an entry used by setting its
// metadata.json's modification time. Only entry directories are ever removed, never through a
// symbolic link, never anything else in the directory, and only in a directory the cache
// marked as its own.
#pragma once

#include "runtime/cache/TrustedDirectory.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace flashbob::runtime {

// One stage's output: a plain file name (no '/', not starting with '.', not "metadata.json")
// and its bytes.
struct CacheFile {
  std::string name;
  std::string bytes;
};

struct CacheEntry {
  std::string key;             // keyFor(keyText)
  std::string keyText;
  std::vector<CacheFile> files; // in the order they were stored
  llvm::json::Object metadata;  // the caller's object, as stored

  // The bytes of the file with this name, or nullptr.
  const std::string *file(llvm::StringRef name) const;
};

// One entry as `flashbob cache list` shows it.
struct ListedEntry {
  std::string key;
  std::string summary;  // the caller metadata's "name", else the key text's first line
  uint64_t bytes = 0;   // every file of the entry, metadata.json included
  llvm::sys::TimePoint<> modified;
  llvm::sys::TimePoint<> lastUsed; // stored or last hit (metadata.json's modification time)
};

// What clear() removed, and what it could not ("<call>(<path>): <reason>", one per thing).
struct ClearResult {
  size_t entries = 0;
  std::vector<std::string> failures;
};

// What prune() removed, or why it removed nothing at all.
struct PruneResult {
  size_t entries = 0;
  uint64_t bytes = 0;
  std::optional<std::string> refused; // the directory has no marker: nothing was looked at
};

class DiskCache {
public:
  // Bumped when the layout or metadata.json changes; entries of another version are misses.
  static constexpr int64_t FormatVersion = 1;
  static constexpr llvm::StringLiteral MetadataFileName = "metadata.json";

  // A cache rooted at `directory` (made absolute; created on the first store), bounded by
  // FLASHBOB_CACHE_MAX_MB.
  explicit DiskCache(llvm::StringRef directory);
  DiskCache(const DiskCache &) = delete;
  DiskCache &operator=(const DiskCache &) = delete;

  // FLASHBOB_CACHE_DIR (support/Knobs.h: the environment or flashbob_set_cache_dir) if set and
  // non-empty, else $XDG_CACHE_HOME/flashbob, else $HOME/.cache/flashbob (home from the
  // password database when HOME is unset), else <temp>/flashbob-cache-<uid>. Whichever it is,
  // it is created 0700 and used only if it belongs to this user and nobody else can write it
  // (and, if a symbolic link, only if the link is this user's too).
  static std::string defaultDirectory();
  static DiskCache fromEnvironment() { return DiskCache(defaultDirectory()); }

  // 64 lower-case hex digits: SHA-256 of the key text.
  static std::string keyFor(llvm::StringRef keyText);

  llvm::StringRef directory() const { return directory_; }

  // The verified entry for this key text, or nullopt. Never returns a damaged or mismatching
  // entry: such an entry is removed (best effort) and reported as a miss. `check`, when given,
  // judges what the checksums cannot (the caller's metadata): an entry it rejects is removed
  // the same way, with a warning naming its error, so the caller recompiles and stores it anew.
  std::optional<CacheEntry>
  lookup(llvm::StringRef keyText,
         llvm::function_ref<llvm::Error(const CacheEntry &)> check = nullptr);

  // Removes the entry of this key text as lookup removes one its `check` rejects, with a warning
  // naming `why`: for what only using the entry shows (a cubin whose kernel is not the one its
  // metadata names). Nothing when there is no such entry.
  void discardEntry(llvm::StringRef keyText, const llvm::Twine &why);

  // Stores the files and the caller's metadata under keyFor(keyText), then prunes to the size
  // bound (never removing this entry). If another process stored the key first, its entry is
  // kept and this succeeds. If the directory cannot be written or is refused (another user's, or
  // writable by others), this still succeeds: one warning per process goes to the log sink
  // (stderr by default), writable() turns false and the entry is kept in this object's memory.
  // If only this entry cannot be written (a full disk), it is kept in memory with a warning and
  // the directory stays in use. The error is only for invalid arguments (a bad or repeated
  // file name, a key text that is not UTF-8).
  llvm::Error store(llvm::StringRef keyText, llvm::ArrayRef<CacheFile> files,
                    llvm::json::Object metadata);

  // False once the directory proved unusable (probing it if no store has tried yet).
  bool writable();

  // Every entry on disk, sorted by key. Temporary and foreign directories are skipped.
  std::vector<ListedEntry> list();

  // Removes every entry and leftover temporary the cache wrote, and then each two-hex-digit
  // shard left empty; anything else (files of the user's, also inside a shard) stays. Only in a
  // directory that holds the cache's marker file (written when the cache first writes there):
  // elsewhere an error and nothing removed, as in a directory refused as someone else's. A
  // missing directory, or a file where it (or a directory above it) would be, has nothing to
  // clear.
  llvm::Expected<ClearResult> clear();

  // Marks a directory the cache writes, so that clear() and prune() know it is one.
  static constexpr llvm::StringLiteral MarkerFileName = ".flashbob-cache";

  // The size bound in bytes (0: none); FLASHBOB_CACHE_MAX_MB MiB unless set here.
  uint64_t maxBytes() const { return maxBytes_; }
  void setMaxBytes(uint64_t bytes) { maxBytes_ = bytes; }

  // Removes least recently used entries until the entries total at most maxBytes(); the entry
  // of `keepKey` stays even if it alone is larger. Entries being built or removed by another
  // process (hidden temporaries) are neither counted nor touched. Like clear(), only in a
  // directory with the cache's marker: elsewhere nothing is removed and `refused` says why.
  PruneResult prune(llvm::StringRef keepKey = "");

private:
  // Unwritable: could not be created or written (memory only); ReadOnly: ours but not writable
  // (lookups only); Refused: someone else's or writable by others (not used at all).
  enum class DirState { Unknown, Writable, ReadOnly, Unwritable, Refused };

  // Decides once whether the directory may be used, creating it (0700) when `create`; on
  // failure switches to memory only with one warning. Unknown: it does not exist (and !create).
  DirState openLocked(bool create);
  // The same for a directory just opened (or not) by TrustedDirectory::open.
  DirState adoptLocked(TrustedDirectory dir);
  // Writes the marker file clear() looks for, once per object.
  void markLocked();
  bool hasMarkerLocked() const;
  std::string unmarkedMessage() const;
  void degradeLocked(const llvm::Twine &reason);
  // The shard directory of `key`, opened relative to root_; a non-directory in its place is
  // removed, and with `create` the shard is made. Invalid on failure (`error` says why).
  ScopedFd openShardLocked(llvm::StringRef key, bool create, std::string *error);
  llvm::Error storeOnDiskLocked(llvm::StringRef key, llvm::StringRef keyText,
                                llvm::ArrayRef<CacheFile> files,
                                const llvm::json::Object &callerMeta);
  // Paths for messages only; files are reached through root_.
  std::string shardPath(llvm::StringRef key) const;
  std::string entryPath(llvm::StringRef key) const;
  std::vector<ListedEntry> listLocked(bool withSummaries);
  PruneResult pruneLocked(llvm::StringRef keepKey);

  std::string directory_;
  TrustedDirectory root_; // open once the state is Writable or ReadOnly
  uint64_t maxBytes_ = 0;
  std::mutex mutex_;
  DirState state_ = DirState::Unknown;
  bool marked_ = false;
  std::map<std::string, CacheEntry> memory_; // only used once unwritable
};

} // namespace flashbob::runtime
