// Fuzz target: the kernel cache's metadata.json as it comes back from disk (damaged, edited or
// hostile). The input is the text of metadata.json; it goes through
//  1. support::parseJson (llvm::json behind a nesting guard: deep input must fail, not overflow),
//  2. DiskCache::lookup of an entry whose metadata.json is the input (format, key, key text, file
//     records with names, sizes and SHA-256; a damaged entry is discarded and is a miss),
//  3. on a hit, the fields the JIT reads back (tensor_maps -> tensorMapsFromJson ->
//     tensorMapParams over a launch's memrefs).
// Beyond "no crash, no sanitizer report", a hit must return exactly the bytes that were stored
// under each name (the checksums guarantee it), and tensor maps read back must survive a round
// trip through tensorMapsToJson.
#include "runtime/cache/DiskCache.h"
#include "runtime/launch/TensorMaps.h"
#include "support/Json.h"
#include "support/Log.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace flashbob;
namespace fs = llvm::sys::fs;

namespace {
// The entry the harness stores; the seed corpus holds its metadata.json (corpus/cache_metadata/).
const char kKeyText[] = "flashbob fuzz entry\nkind=fwd d=64";
const std::vector<runtime::CacheFile> &storedFiles() {
  static const std::vector<runtime::CacheFile> files = {{"kernel.ptx", "// ptx\n"},
                                                        {"kernel.cubin", "cubin bytes"}};
  return files;
}

std::string cacheDir;
runtime::DiskCache *cache;
std::string metadataPath;

[[noreturn]] void finding(const char *what) {
  std::fprintf(stderr, "fuzz_cache_metadata: %s\n", what);
  std::abort();
}

void removeCacheDir() { (void)fs::remove_directories(cacheDir, /*IgnoreErrors=*/true); }

// Memrefs as a forward launch passes them: q, k, v, o (batch 2, heads 3, seq 100 / 70, d 64,
// contiguous) and the row vector lse (rank 3).
std::vector<runtime::MemRefArg> launchMemrefs() {
  std::vector<runtime::MemRefArg> m;
  for (int64_t seq : {100, 70, 70, 100}) {
    runtime::MemRefArg a;
    a.base = 0x10000;
    a.sizes = {2, 3, seq, 64};
    a.strides = {3 * seq * 64, seq * 64, 64, 1};
    m.push_back(a);
  }
  runtime::MemRefArg rows;
  rows.base = 0x20000;
  rows.sizes = {2, 3, 100};
  rows.strides = {300, 100, 1};
  m.push_back(rows);
  return m;
}

void checkTensorMaps(const llvm::json::Array *json) {
  std::optional<std::vector<runtime::TensorMapSpec>> maps = runtime::tensorMapsFromJson(json);
  if (!maps)
    return;
  llvm::json::Array again = runtime::tensorMapsToJson(*maps);
  std::optional<std::vector<runtime::TensorMapSpec>> back = runtime::tensorMapsFromJson(&again);
  if (!back || *back != *maps)
    finding("tensor maps do not survive tensorMapsToJson -> tensorMapsFromJson");
  static const std::vector<runtime::MemRefArg> memrefs = launchMemrefs();
  for (const runtime::TensorMapSpec &spec : *maps) {
    auto params = runtime::tensorMapParams(spec, memrefs);
    if (!params)
      llvm::consumeError(params.takeError());
  }
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Lookups log at Debug level only, but stay silent whatever a future change logs.
  support::setLogSink([](support::LogLevel, llvm::StringRef) {});
  llvm::SmallString<128> dir;
  if (std::error_code ec = fs::createUniqueDirectory("flashbob-fuzz-cache", dir)) {
    std::fprintf(stderr, "fuzz_cache_metadata: cannot create a temporary directory: %s\n",
                 ec.message().c_str());
    std::exit(1);
  }
  cacheDir = std::string(dir);
  std::atexit(removeCacheDir);
  cache = new runtime::DiskCache(cacheDir);
  cache->setMaxBytes(0); // no pruning: the one entry is all there is
  const std::string key = runtime::DiskCache::keyFor(kKeyText);
  llvm::SmallString<256> path(cacheDir);
  llvm::sys::path::append(path, key.substr(0, 2), key, runtime::DiskCache::MetadataFileName);
  metadataPath = std::string(path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);

  // 1. The parser on its own, and tensor maps wherever the input has an array for them.
  if (llvm::Expected<llvm::json::Value> value = support::parseJson(text)) {
    checkTensorMaps(value->getAsArray());
    if (const llvm::json::Object *o = value->getAsObject())
      if (const llvm::json::Object *meta = o->getObject("metadata"))
        checkTensorMaps(meta->getArray("tensor_maps"));
  } else {
    llvm::consumeError(value.takeError());
  }

  // 2. The input as the metadata.json of a stored entry. A miss discards the entry, so it is
  // stored again first when it is gone.
  if (!fs::exists(metadataPath)) {
    llvm::json::Object meta{{"name", "fuzz"}, {"entry", "fuzz_kernel"}, {"threads", 128}};
    if (llvm::Error e = cache->store(kKeyText, storedFiles(), std::move(meta)))
      finding(("store failed: " + llvm::toString(std::move(e))).c_str());
    if (!fs::exists(metadataPath))
      finding("store did not write the entry (is the temporary directory writable?)");
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(metadataPath, ec);
    if (ec)
      finding("cannot write metadata.json");
    os << text;
  }
  std::optional<runtime::CacheEntry> hit = cache->lookup(kKeyText);
  if (!hit)
    return 0;
  if (hit->keyText != kKeyText || hit->key != runtime::DiskCache::keyFor(kKeyText))
    finding("a hit for another key");
  for (const runtime::CacheFile &f : hit->files) {
    const runtime::CacheFile *stored = nullptr;
    for (const runtime::CacheFile &s : storedFiles())
      if (s.name == f.name)
        stored = &s;
    if (!stored || stored->bytes != f.bytes)
      finding("a hit returned a file that was not stored, or other bytes than stored");
  }
  // 3. What the JIT reads from the caller's metadata (jit/KernelCache.cpp).
  checkTensorMaps(hit->metadata.getArray("tensor_maps"));
  (void)hit->metadata.getString("entry");
  (void)hit->metadata.getInteger("threads");
  (void)hit->metadata.getInteger("shared_bytes");
  return 0;
}
