#include "compiler/pipeline/Ptxas.h"

#include "compiler/pipeline/Subprocess.h"
#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace flashbob::compiler {

namespace {
// Every failure here is the assembly stage's: the C API reports it as FLASHBOB_ERROR_COMPILE.
llvm::Error fail(const llvm::Twine &what) { return support::makeCompileError("ptxas", what); }

std::string readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

// Writes `data` to `path`, every error of the stream checked and cleared: a stream destroyed
// with an error still set (a full disk) ends the process with report_fatal_error.
llvm::Error writeFile(llvm::StringRef path, llvm::StringRef data) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return fail("cannot write " + path + ": " + ec.message());
  os << data;
  os.close();
  if (!os.has_error())
    return llvm::Error::success();
  ec = os.error();
  os.clear_error();
  return fail("cannot write " + path + ": " + ec.message());
}

// Temporary files, removed when this goes out of scope unless kept (the PTX of a failed run,
// for the command that reproduces it).
class TemporaryFiles {
public:
  ~TemporaryFiles() {
    for (const std::string &path : paths_)
      llvm::sys::fs::remove(path);
  }
  llvm::Expected<std::string> create(llvm::StringRef suffix) {
    llvm::SmallString<128> path;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("flashbob", suffix, path))
      return fail("createTemporaryFile(" + suffix + "): " + ec.message());
    paths_.push_back(std::string(path));
    return paths_.back();
  }
  void keep(llvm::StringRef path) { llvm::erase(paths_, path.str()); }

private:
  std::vector<std::string> paths_;
};

// The limit on each run of ptxas, and the words that name it in an error.
std::chrono::seconds ptxasTimeLimit() {
  return std::chrono::seconds(std::min<uint64_t>(support::knobs::ptxasTimeoutS(), INT32_MAX));
}
std::string describeTimeLimit() {
  return std::to_string(support::knobs::ptxasTimeoutS()) + " s (FLASHBOB_PTXAS_TIMEOUT_S)";
}
} // namespace

std::vector<std::string> cudaToolkitRoots() {
  std::vector<std::string> roots;
  for (const char *root : {std::getenv("CUDA_HOME"), std::getenv("CUDA_PATH")})
    if (root && *root)
      roots.push_back(root);
  roots.push_back(FLASHBOB_CUDA_ROOT);
  return roots;
}

llvm::Expected<std::string> findPtxas() {
  if (std::string explicitPath = support::knobs::ptxas(); !explicitPath.empty())
    return explicitPath;
  for (const std::string &root : cudaToolkitRoots()) {
    llvm::SmallString<256> candidate(root);
    llvm::sys::path::append(candidate, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(candidate))
      return std::string(candidate);
  }
  if (auto onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  return fail("ptxas not found (set FLASHBOB_PTXAS or CUDA_HOME, or put it on PATH)");
}

std::string ptxasVersion() {
  static const std::string version = [] {
    auto ptxas = findPtxas();
    if (!ptxas) {
      llvm::consumeError(ptxas.takeError());
      return std::string();
    }
    TemporaryFiles files;
    auto out = files.create("txt");
    if (!out) {
      llvm::consumeError(out.takeError());
      return std::string();
    }
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(*out),
                                                  llvm::StringRef(*out)};
    llvm::SmallVector<llvm::StringRef> args = {*ptxas, "--version"};
    ChildExit run = runWithTimeLimit(*ptxas, args, redirects, ptxasTimeLimit());
    if (run.how == ChildExit::How::timedOut)
      support::log(support::LogLevel::Warning,
                   "flashbob: warning: `" + *ptxas + " --version` did not finish within " +
                       describeTimeLimit() + " and was killed");
    if (run.how != ChildExit::How::exited || run.code != 0)
      return std::string();
    return llvm::StringRef(readFile(*out)).rtrim().rsplit('\n').second.str();
  }();
  return version;
}

void parsePtxasReport(Cubin &cubin) {
  llvm::SmallVector<llvm::StringRef> m;
  if (llvm::Regex("Used ([0-9]+) registers").match(cubin.log, &m))
    cubin.registers = std::atoi(m[1].str().c_str());
  if (llvm::Regex("([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill "
                  "loads")
          .match(cubin.log, &m)) {
    cubin.stackBytes = std::atoi(m[1].str().c_str());
    cubin.spillStoreBytes = std::atoi(m[2].str().c_str());
    cubin.spillLoadBytes = std::atoi(m[3].str().c_str());
  }
  if (llvm::Regex("([0-9]+) bytes smem").match(cubin.log, &m))
    cubin.staticSharedBytes = std::atoi(m[1].str().c_str());
}

llvm::Expected<Cubin> assembleWithPtxas(const std::string &ptx, const std::string &arch) {
  auto ptxas = findPtxas();
  if (!ptxas)
    return ptxas.takeError();

  TemporaryFiles files;
  auto ptxPath = files.create("ptx");
  if (!ptxPath)
    return ptxPath.takeError();
  auto cubinPath = files.create("cubin");
  if (!cubinPath)
    return cubinPath.takeError();
  auto logPath = files.create("log");
  if (!logPath)
    return logPath.takeError();
  if (llvm::Error e = writeFile(*ptxPath, ptx))
    return std::move(e);

  std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> args = {*ptxas, archFlag, "-v", "-O3", "-o", *cubinPath, *ptxPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(*logPath),
                                                llvm::StringRef(*logPath)};
  ChildExit run = runWithTimeLimit(*ptxas, args, redirects, ptxasTimeLimit());

  Cubin out;
  out.log = readFile(*logPath);
  if (run.how != ChildExit::How::exited || run.code != 0) {
    files.keep(*ptxPath);
    const std::string repro = *ptxas + " " + archFlag + " -v -O3 -o /dev/null " + *ptxPath;
    if (run.how == ChildExit::How::timedOut)
      return fail("ptxas did not finish within " + describeTimeLimit() + " and was killed:\n" +
                  out.log + "reproduce with: " + repro);
    // The exit status as before: -1 when it did not run, -2 when a signal ended it.
    const int status = run.how == ChildExit::How::exited     ? run.code
                       : run.how == ChildExit::How::signaled ? -2
                                                             : -1;
    return fail("ptxas failed (exit " + llvm::Twine(status) +
                (run.message.empty() ? "" : ", " + run.message) + "):\n" + out.log +
                "reproduce with: " + repro);
  }
  out.binary = readFile(*cubinPath);
  if (out.binary.empty())
    return fail("ptxas exited 0 but wrote no cubin to " + *cubinPath + ":\n" + out.log);
  parsePtxasReport(out);
  return out;
}

} // namespace flashbob::compiler
