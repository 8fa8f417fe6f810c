// `flashbob cache path|list|clear`: where compiled kernels (every stage) and tuning records live,
// what is there, and emptying it.
#include "jit/Tuning.h"
#include "runtime/cache/DiskCache.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/OptionCategories.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {
namespace cl = llvm::cl;

cl::SubCommand cacheCommand("cache", "Show or clear the kernel cache: path, list, clear");

namespace {
cl::opt<std::string> action(cl::Positional, cl::desc("<path|list|clear>"), cl::sub(cacheCommand),
                            cl::cat(cacheCategory), cl::init("path"));
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
    llvm::outs() << llvm::formatv("{0} kernel(s), {1} B in {2}\n", entries.size(), total,
                                  cache.directory());
    return kExitOk;
  }
  if (action == "clear") {
    if (llvm::Error e = cache.clear()) {
      llvm::errs() << "flashbob cache clear: " << llvm::toString(std::move(e)) << "\n";
      return kExitFailure;
    }
    // Tuning records were chosen by kernels that are gone: remove them too.
    llvm::sys::fs::remove_directories(jit::tuningDir());
    llvm::outs() << "cleared " << cache.directory() << "\n";
    return kExitOk;
  }
  llvm::errs() << "flashbob cache: unknown action '" << action << "' (path, list, clear)\n";
  return kExitUsage;
}

} // namespace flashbob::tool
