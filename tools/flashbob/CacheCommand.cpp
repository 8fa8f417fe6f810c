// `flashbob cache path|list|prune|clear`: where compiled kernels (every stage) and tuning records
// live, what is there against the size bound (FLASHBOB_CACHE_MAX_MB), and emptying it.
#include "jit/Tuning.h"
#include "runtime/cache/DiskCache.h"
#include "runtime/tune/Autotuner.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/OptionCategories.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {
namespace cl = llvm::cl;

cl::SubCommand cacheCommand("cache", "Show, prune or clear the kernel cache: path, list, prune, "
                                     "clear");

namespace {
cl::opt<std::string> action(cl::Positional, cl::desc("<path|list|prune|clear>"),
                            cl::sub(cacheCommand), cl::cat(cacheCategory), cl::init("path"));

std::string bound(const runtime::DiskCache &cache) {
  if (cache.maxBytes() == 0)
    return "no size bound (FLASHBOB_CACHE_MAX_MB=0)";
  return llvm::formatv("bound {0} MiB (FLASHBOB_CACHE_MAX_MB)", cache.maxBytes() >> 20);
}
} // namespace

int runCache() {
  runtime::DiskCache cache(runtime::DiskCache::defaultDirectory());
  if (action == "path") {
    llvm::outs() << cache.directory() << "\n";
    return kExitOk;
  }
  if (action == "list") {
    auto entries = cache.list();
    uint64_t total = 0;
    for (const runtime::ListedEntry &e : entries) {
      llvm::outs() << llvm::formatv("{0}  {1,8} B  {2}\n", llvm::StringRef(e.key).take_front(16),
                                    e.bytes, e.summary);
      total += e.bytes;
    }
    llvm::outs() << llvm::formatv("{0} kernel(s), {1} B in {2}; {3}\n", entries.size(), total,
                                  cache.directory(), bound(cache));
    return kExitOk;
  }
  if (action == "prune") {
    // What every store does afterwards, on demand (e.g. after lowering the bound); like clear,
    // only in a directory the cache marked as its own.
    runtime::PruneResult removed = cache.prune();
    if (removed.refused) {
      llvm::errs() << "flashbob cache prune: " << *removed.refused << "\n";
      return kExitFailure;
    }
    llvm::outs() << llvm::formatv("removed {0} least recently used kernel(s), {1} B; {2}\n",
                                  removed.entries, removed.bytes, bound(cache));
    return kExitOk;
  }
  if (action == "clear") {
    // Only in a directory the cache marked as its own; only what it wrote there.
    llvm::Expected<runtime::ClearResult> cleared = cache.clear();
    if (!cleared) {
      llvm::errs() << "flashbob cache clear: " << llvm::toString(cleared.takeError()) << "\n";
      return kExitFailure;
    }
    // Tuning records were chosen by kernels that are gone: remove them too.
    const size_t records = runtime::Autotuner::clearRecords(jit::tuningDir(), cleared->failures);
    llvm::outs() << llvm::formatv("removed {0} kernel(s) and {1} tuning record(s) from {2}\n",
                                  cleared->entries, records, cache.directory());
    for (const std::string &f : cleared->failures)
      llvm::errs() << "flashbob cache clear: could not remove: " << f << "\n";
    if (!cleared->failures.empty()) {
      llvm::errs() << llvm::formatv("flashbob cache clear: {0} thing(s) left behind\n",
                                    cleared->failures.size());
      return kExitFailure;
    }
    return kExitOk;
  }
  llvm::errs() << "flashbob cache: unknown action '" << action << "' (path, list, prune, clear)\n";
  return kExitUsage;
}

} // namespace flashbob::tool
