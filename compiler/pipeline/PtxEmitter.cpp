#include "compiler/pipeline/PtxEmitter.h"

#include "support/Log.h"

#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace flashbob::compiler {

namespace {
constexpr const char *kTriple = "nvptx64-nvidia-cuda";

llvm::Error fail(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

// What LLVM reports through the module's context while it optimizes and generates code (inline
// assembly it cannot allocate, a feature the target lacks). Without a handler of ours,
// LLVMContext::diagnose prints to llvm::errs() and calls exit(1) on an error: the host would
// end. Errors become emitPtx's error; warnings go to the log sink; remarks and notes are dropped
// (the default prints none unless asked to).
class CollectDiagnostics : public llvm::DiagnosticHandler {
public:
  explicit CollectDiagnostics(std::string &errors) : errors_(errors) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo &info) override {
    if (info.getSeverity() != llvm::DS_Error && info.getSeverity() != llvm::DS_Warning)
      return true;
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    info.print(printer);
    if (info.getSeverity() == llvm::DS_Error)
      errors_ += (errors_.empty() ? "" : "\n") + text;
    else
      support::log(support::LogLevel::Warning, "flashbob: warning: LLVM: " + text);
    return true;
  }

private:
  std::string &errors_;
};

// Installs CollectDiagnostics on `context` for one scope, then puts back the handler it had.
class ScopedDiagnostics {
public:
  explicit ScopedDiagnostics(llvm::LLVMContext &context)
      : context_(context), previous_(context.getDiagnosticHandler()) {
    context_.setDiagnosticHandler(std::make_unique<CollectDiagnostics>(errors_));
  }
  ~ScopedDiagnostics() { context_.setDiagnosticHandler(std::move(previous_)); }
  llvm::Error takeError(llvm::StringRef stage) {
    if (errors_.empty())
      return llvm::Error::success();
    return fail(stage + ": " + errors_);
  }

private:
  llvm::LLVMContext &context_;
  std::unique_ptr<llvm::DiagnosticHandler> previous_;
  std::string errors_;
};

llvm::OptimizationLevel optimizationLevel(unsigned level) {
  switch (level) {
  case 0: return llvm::OptimizationLevel::O0;
  case 1: return llvm::OptimizationLevel::O1;
  case 2: return llvm::OptimizationLevel::O2;
  default: return llvm::OptimizationLevel::O3;
  }
}
} // namespace

llvm::Expected<std::string> emitPtx(llvm::Module &module, const TargetOptions &target,
                                    std::string *optimizedIR) {
  static std::once_flag initOnce;
  std::call_once(initOnce, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });

  ScopedDiagnostics diagnostics(module.getContext());
  llvm::Triple triple(kTriple);
  std::string lookupError;
  const llvm::Target *nvptx = llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!nvptx)
    return fail("llvm::TargetRegistry::lookupTarget(" + llvm::Twine(kTriple) + "): " + lookupError);
  const llvm::StringRef cpu = bob::stringifyArch(target.arch);
  std::unique_ptr<llvm::TargetMachine> machine(nvptx->createTargetMachine(
      triple, cpu, target.ptxFeatures(), llvm::TargetOptions(), std::nullopt,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return fail("llvm::Target::createTargetMachine(" + llvm::Twine(kTriple) + ", " + cpu +
                ") failed");
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());

  // The standard O3 pipeline with the NVPTX target's own passes (address-space inference, ...).
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine.get());
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  builder.buildPerModuleDefaultPipeline(optimizationLevel(target.optLevel)).run(module, mam);
  if (llvm::Error e = diagnostics.takeError("LLVM optimization failed"))
    return std::move(e);

  if (optimizedIR) {
    optimizedIR->clear();
    llvm::raw_string_ostream os(*optimizedIR);
    module.print(os, nullptr);
  }

  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    return fail("llvm::TargetMachine::addPassesToEmitFile: NVPTX cannot emit assembly");
  codegen.run(module);
  if (llvm::Error e = diagnostics.takeError("NVPTX code generation failed"))
    return std::move(e);

  std::string text = ptx.str().str();
  bool usesShared = text.find(".shared") != std::string::npos &&
                    text.find("flashbob_smem") != std::string::npos;
  static const llvm::Regex externShared(R"(\.extern \.shared \.align [0-9]+ \.b8 flashbob_smem\[\])");
  if (usesShared && !externShared.match(text))
    return fail("PTX declares flashbob_smem without `.extern ... []`: dynamic shared memory would "
                "be a 1-byte array (toolchain.md)");
  return text;
}

} // namespace flashbob::compiler
