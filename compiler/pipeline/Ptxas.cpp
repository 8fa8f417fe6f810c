#include "compiler/pipeline/Ptxas.h"

#include "support/Errors.h"
#include "support/Knobs.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace flashbob::compiler {

namespace {
// Every failure here is the assembly stage's: the C API reports it as FLASHBOB_ERROR_COMPILE.
llvm::Error fail(const llvm::Twine &what) { return support::makeCompileError("ptxas", what); }

std::string readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
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
    llvm::SmallString<128> out;
    if (llvm::sys::fs::createTemporaryFile("flashbob-ptxas", "txt", out))
      return std::string();
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(out),
                                                  llvm::StringRef(out)};
    llvm::SmallVector<llvm::StringRef> args = {*ptxas, "--version"};
    int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects);
    std::string text = readFile(out);
    llvm::sys::fs::remove(out);
    if (rc != 0)
      return std::string();
    return llvm::StringRef(text).rtrim().rsplit('\n').second.str();
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

  llvm::SmallString<128> ptxPath, cubinPath, logPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("flashbob", "ptx", ptxPath))
    return fail("createTemporaryFile(ptx): " + ec.message());
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("flashbob", "cubin", cubinPath))
    return fail("createTemporaryFile(cubin): " + ec.message());
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("flashbob", "log", logPath))
    return fail("createTemporaryFile(log): " + ec.message());
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    if (ec)
      return fail("writing " + ptxPath + ": " + ec.message());
    os << ptx;
  }

  std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> args = {*ptxas, archFlag, "-v", "-O3", "-o", cubinPath, ptxPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(logPath),
                                                llvm::StringRef(logPath)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0, 0, &execError);

  Cubin out;
  out.log = readFile(logPath);
  llvm::sys::fs::remove(logPath);
  if (rc != 0) {
    llvm::sys::fs::remove(cubinPath);
    std::string repro = *ptxas + " " + archFlag + " -v -O3 -o /dev/null " + ptxPath.str().str();
    return fail("ptxas failed (exit " + llvm::Twine(rc) + (execError.empty() ? "" : ", " + execError) +
                "):\n" + out.log + "reproduce with: " + repro);
  }
  llvm::sys::fs::remove(ptxPath);
  out.binary = readFile(cubinPath);
  llvm::sys::fs::remove(cubinPath);
  parsePtxasReport(out);
  return out;
}

} // namespace flashbob::compiler
