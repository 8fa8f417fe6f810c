// Fuzz target: the autotuner's record file as it comes back from disk (damaged, edited or
// hostile). The input is the content of the record for one tuning key; Autotuner::tune reads it
// (support::parseJson, then key, candidate list and winner checks) and either reuses the winner
// it names or re-tunes and writes a fresh record.
// Beyond "no crash, no sanitizer report": the result is always one of the candidates; a reused
// winner comes without timing anything; a re-tune times every candidate and picks the fastest;
// and the record a re-tune writes is reused by the next tuner.
#include "runtime/tune/Autotuner.h"
#include "support/Log.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace flashbob;
namespace fs = llvm::sys::fs;

namespace {
// The seed corpus (corpus/tuning_record/) holds records for this key and candidate list.
const char kKey[] = "bwd_q d=64 bf16 causal sm_90a";
const std::vector<std::string> kCandidates = {"64x64", "128x64", "64x128"};
constexpr int kRepeats = 1; // tune() runs each candidate kRepeats + 1 times (one warm-up)

std::string cacheDir, storeDir; // the records' directory is cacheDir/autotune, as in a cache

[[noreturn]] void finding(const char *what) {
  std::fprintf(stderr, "fuzz_tuning_record: %s\n", what);
  std::abort();
}

void removeStoreDir() { (void)fs::remove_directories(cacheDir, /*IgnoreErrors=*/true); }

// Candidate i takes 3 - i ms: the last one is the fastest.
runtime::TuneResult tuneOnce(size_t &measured) {
  // A fresh tuner each time: a tuner answers from memory before it reads the record.
  runtime::Autotuner tuner(storeDir);
  measured = 0;
  auto result = tuner.tune(kKey, kCandidates, [&](size_t i) -> llvm::Expected<double> {
    ++measured;
    return 3.0 - double(i);
  }, kRepeats);
  if (!result)
    finding(("tune failed although every candidate measured: " +
             llvm::toString(result.takeError())).c_str());
  return std::move(*result);
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Tuning logs an Info line per re-tune (stderr by default): silenced.
  support::setLogSink([](support::LogLevel, llvm::StringRef) {});
  llvm::SmallString<128> dir;
  if (std::error_code ec = fs::createUniqueDirectory("flashbob-fuzz-tune", dir)) {
    std::fprintf(stderr, "fuzz_tuning_record: cannot create a temporary directory: %s\n",
                 ec.message().c_str());
    std::exit(1);
  }
  cacheDir = std::string(dir);
  storeDir = cacheDir + "/autotune";
  std::atexit(removeStoreDir);
  if (std::error_code ec = fs::create_directory(storeDir, /*IgnoreExisting=*/false,
                                                fs::owner_all)) {
    std::fprintf(stderr, "fuzz_tuning_record: cannot create %s: %s\n", storeDir.c_str(),
                 ec.message().c_str());
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = runtime::Autotuner(storeDir).recordPath(kKey, kCandidates);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      finding("cannot write the record");
    os.write(reinterpret_cast<const char *>(data), size);
  }
  size_t measured = 0;
  runtime::TuneResult r = tuneOnce(measured);
  if (std::find(kCandidates.begin(), kCandidates.end(), r.winner) == kCandidates.end())
    finding("the winner is not a candidate");
  if (r.reused) {
    if (measured != 0 || !r.medianMs.empty())
      finding("a reused winner came with measurements");
    return 0;
  }
  if (measured != kCandidates.size() * (kRepeats + 1) || r.medianMs.size() != kCandidates.size())
    finding("a re-tune did not time every candidate");
  if (r.winner != kCandidates.back())
    finding("a re-tune did not pick the fastest candidate");
  runtime::TuneResult again = tuneOnce(measured);
  if (!again.reused || again.winner != r.winner)
    finding("the record a re-tune wrote is not reused");
  return 0;
}
