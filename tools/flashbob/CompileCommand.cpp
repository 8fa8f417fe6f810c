// `flashbob compile`: one kernel variant to any stage, and every stage into a dump directory
// (like Triton's kernel dump):
//   flashbob compile --kernel fwd --head-dim 128 --emit ptx -o fwd.ptx --dump-dir /tmp/k
#include "jit/Compile.h"
#include "kernels/Kernels.h"
#include "support/Knobs.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/OutputFile.h"
#include "tools/flashbob/OptionCategories.h"
#include "tools/flashbob/SpecOptions.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>

namespace flashbob::tool {
namespace cl = llvm::cl;

cl::SubCommand compileCommand("compile", "Compile one kernel variant and show any stage");

namespace {
SpecOptions specOptions(compileCommand);

enum class Stage { bob, lowered, llvm, ptx, cubin };
cl::opt<Stage> emit("emit", cl::desc("Stage to write"), cl::sub(compileCommand),
                    cl::cat(compileCategory), cl::init(Stage::ptx),
                    cl::values(clEnumValN(Stage::bob, "bob", "the kernel in the bob dialect"),
                               clEnumValN(Stage::lowered, "lowered",
                                          "after the bob passes (gpu/nvgpu/nvvm/vector)"),
                               clEnumValN(Stage::llvm, "llvm", "optimized LLVM IR for NVPTX"),
                               clEnumValN(Stage::ptx, "ptx", "PTX from LLVM's NVPTX backend"),
                               clEnumValN(Stage::cubin, "cubin", "cubin from ptxas")));
cl::opt<std::string> output("o", cl::desc("Output file (default: stdout)"),
                            cl::sub(compileCommand), cl::cat(compileCategory), cl::init("-"));
cl::opt<std::string> dumpDir("dump-dir",
                             cl::desc("Write every stage here (default: $FLASHBOB_DUMP_DIR)"),
                             cl::sub(compileCommand), cl::cat(compileCategory));
cl::opt<bool> timing("time", cl::desc("Print how long each step took"), cl::sub(compileCommand),
                     cl::cat(compileCategory));

llvm::Error writeFile(llvm::StringRef path, llvm::StringRef data) {
  return writeOutput(path, [&](llvm::raw_ostream &os) { os << data; });
}

llvm::Error dumpAll(llvm::StringRef dir, const compiler::KernelSpec &spec,
                    const compiler::KernelArtifacts &a) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create --dump-dir " + dir + ": " + ec.message());
  std::string base = (dir + "/" + spec.name()).str();
  const std::pair<const char *, const std::string *> stages[] = {
      {".bob.mlir", &a.bobIR}, {".lowered.mlir", &a.loweredIR}, {".ll", &a.llvmIR},
      {".ptx", &a.ptx},        {".cubin", &a.cubin},            {".ptxas.log", &a.ptxasLog}};
  for (auto [suffix, text] : stages)
    if (!text->empty())
      if (llvm::Error e = writeFile(base + suffix, *text))
        return e;
  return llvm::Error::success();
}

// What ptxas reported that changes how the kernel runs, on stderr: spills (local memory in the
// kernel's loops), the wgmma fences or waits it had to add itself (its C7517/C7519 notes),
// which serialise products that the lowering leaves in flight together, and setmaxnreg it
// ignored (C7508: the consumers of a producer kernel then get the registers at entry only).
void reportPtxas(const compiler::KernelArtifacts &a) {
  if (a.spillBytes > 0)
    llvm::errs() << llvm::formatv("flashbob compile: note: ptxas spills registers: {0} bytes of "
                                  "spill stores and loads per thread ({1} registers)\n",
                                  a.spillBytes, a.registers);
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(a.ptxasLog).split(lines, '\n');
  for (llvm::StringRef line : lines)
    if (line.contains("is injected") || line.contains("'setmaxnreg' ignored"))
      llvm::errs() << "flashbob compile: warning: ptxas: "
                   << line.drop_until([](char c) { return c == '('; }).trim() << "\n";
}
} // namespace

int runCompile() {
  auto spec = specOptions.spec();
  if (!spec)
    return reportError("compile", llvm::toString(spec.takeError()), kExitUsage);
  std::string dir = dumpDir;
  if (dir.empty())
    dir = support::knobs::dumpDir();

  auto t0 = std::chrono::steady_clock::now();
  bool assemble = emit == Stage::cubin || !dir.empty();
  auto artifacts = jit::compileKernel(*spec, assemble);
  auto t1 = std::chrono::steady_clock::now();
  // The exit code from the error's class: a knob the compile cannot use (FLASHBOB_ASSEMBLER,
  // FLASHBOB_NVJITLINK) is a usage error, a failure of the compiler or of ptxas is not.
  if (!artifacts)
    return reportError("compile", artifacts.takeError());
  if (assemble)
    reportPtxas(*artifacts);
  if (!dir.empty())
    if (llvm::Error e = dumpAll(dir, *spec, *artifacts)) {
      llvm::errs() << "flashbob compile: " << llvm::toString(std::move(e)) << "\n";
      return kExitFailure;
    }

  const std::string *text = nullptr;
  switch (emit) {
  case Stage::bob: text = &artifacts->bobIR; break;
  case Stage::lowered: text = &artifacts->loweredIR; break;
  case Stage::llvm: text = &artifacts->llvmIR; break;
  case Stage::ptx: text = &artifacts->ptx; break;
  case Stage::cubin: text = &artifacts->cubin; break;
  }
  if (llvm::Error e = writeFile(output, *text)) {
    llvm::errs() << "flashbob compile: " << llvm::toString(std::move(e)) << "\n";
    return kExitFailure;
  }
  if (timing)
    llvm::errs() << llvm::formatv(
        "flashbob compile: {0} in {1:F1} ms (threads {2}, shared {3} B, registers {4}, spills {5} B)\n",
        artifacts->entry, std::chrono::duration<double, std::milli>(t1 - t0).count(),
        artifacts->threads, artifacts->sharedBytes, artifacts->registers, artifacts->spillBytes);
  return kExitOk;
}

} // namespace flashbob::tool
