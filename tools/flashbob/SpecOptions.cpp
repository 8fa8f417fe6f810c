#include "tools/flashbob/SpecOptions.h"
#include "tools/flashbob/OptionCategories.h"

#include "jit/Compile.h"
#include "kernels/TileTable.h"

#include "mlir/IR/MLIRContext.h"

namespace flashbob::tool {
namespace cl = llvm::cl;

SpecOptions::SpecOptions(cl::SubCommand &sub)
    : kernel("kernel",
             cl::desc("Kernel kind: fwd, bwd-q, bwd-kv, bob-q, bob-kv, fwd-jvp, fwd-dual; the "
                      "fused backward's (sm_90a) bwd-dot, bwd-fused, bwd-dq"),
             cl::sub(sub), cl::cat(specCategory), cl::init("fwd")),
      headDim("head-dim", cl::desc("Head dimension d: the tiles' width, a multiple of 16"),
              cl::sub(sub), cl::cat(specCategory), cl::init(64)),
      tensorDim("tensor-dim",
                cl::desc("The tensors' width when narrower than the tiles (head-dim - 8: the "
                         "kernel reads the columns past it as zeros); 0: head-dim"),
                cl::sub(sub), cl::cat(specCategory), cl::init(0)),
      blockM("block-m", cl::desc("Query rows per tile"), cl::sub(sub), cl::cat(specCategory),
             cl::init(64)),
      blockN("block-n", cl::desc("Key rows per tile"), cl::sub(sub), cl::cat(specCategory),
             cl::init(64)),
      warps("warps", cl::desc("Warps per block"), cl::sub(sub), cl::cat(specCategory),
            cl::init(4)),
      warpCols("warp-cols",
               cl::desc("Column groups the warps form: each register tile's columns are split "
                        "among them (1, 2, 4)"),
               cl::sub(sub), cl::cat(specCategory), cl::init(1)),
      stages("stages", cl::desc("Global->shared pipeline depth"), cl::sub(sub),
             cl::cat(specCategory), cl::init(1)),
      producer("producer",
               cl::desc("A producer warpgroup issues the loop's TMA loads (sm_90a, stages 2)"),
               cl::sub(sub), cl::cat(specCategory)),
      dtype("dtype", cl::desc("Input type: bf16 or fp16"), cl::sub(sub), cl::cat(specCategory),
            cl::init("bf16")),
      causal("causal", cl::desc("Causal mask (bottom-right aligned)"), cl::sub(sub),
             cl::cat(specCategory)),
      scaleArgument("scale-argument",
                    cl::desc("Read the softmax scale from the kernel's arguments (as for any "
                             "scale but 1/sqrt(head-dim)) instead of compiling the default in"),
                    cl::sub(sub), cl::cat(specCategory)),
      grouped("grouped",
              cl::desc("Grouped-query attention: the key/value tensors have fewer heads (a "
                       "divisor of the query heads, known at launch)"),
              cl::sub(sub), cl::cat(specCategory)),
      varlen("varlen",
             cl::desc("Variable-length batch: tensors pack the sequences' rows, two offset "
                      "arguments (cu_seqlens) say where each sequence is"),
             cl::sub(sub), cl::cat(specCategory)),
      longSweep("long-sweep",
                cl::desc("Long sweep: the backward's and BoB's accumulators flush into reserves "
                         "periodically (what sweeps of 2^17 rows or more run)"),
                cl::sub(sub), cl::cat(specCategory)),
      partial("partial",
              cl::desc("One step of a context-parallel ring: f32 partial outputs to be summed "
                       "over the steps (bob-q: its accumulators X1..X4 and row sums unfinished)"),
              cl::sub(sub), cl::cat(specCategory)),
      registerA("register-a",
                cl::desc("Products whose A operand is a register tile read it from registers "
                         "(wgmma register-A, sm_90a; what FLASHBOB_REGISTER_A=1 runs)"),
                cl::sub(sub), cl::cat(specCategory)),
      windowLeft("window-left",
                 cl::desc("Sliding window: keys a query sees before its diagonal (-1: all)"),
                 cl::sub(sub), cl::cat(specCategory), cl::init(-1)),
      windowRight("window-right",
                  cl::desc("Sliding window: keys a query sees after its diagonal (-1: all)"),
                  cl::sub(sub), cl::cat(specCategory), cl::init(-1)),
      arch("arch", cl::desc("Target: sm_80, sm_86, sm_89, sm_90, sm_90a"), cl::sub(sub),
           cl::cat(specCategory), cl::init("sm_90a")) {}

llvm::Expected<compiler::KernelSpec> SpecOptions::spec() const {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  compiler::KernelSpec s;
  auto kind = compiler::parseKind(kernel);
  if (!kind)
    return fail("--kernel: unknown kind '" + kernel +
                "' (fwd, bwd-q, bwd-kv, bob-q, bob-kv, fwd-jvp, fwd-dual, bwd-dot, bwd-fused, "
                "bwd-dq)");
  s.kind = *kind;
  auto type = compiler::parseDtype(dtype);
  if (!type)
    return fail("--dtype: unknown type '" + dtype + "' (bf16, fp16)");
  s.dtype = *type;
  s.headDim = headDim;
  s.tensorDim = tensorDim;
  s.tiles = {blockM, blockN, warps, stages, warpCols, producer};
  s.causal = causal;
  s.scaleArgument = scaleArgument;
  s.grouped = grouped;
  s.varlen = varlen;
  s.longSweep = longSweep;
  s.partial = partial;
  s.registerA = registerA;
  s.windowLeft = windowLeft;
  s.windowRight = windowRight;
  auto target = compiler::parseArch(arch);
  if (!target)
    return fail("--arch: unknown target '" + arch + "' (sm_80, sm_86, sm_89, sm_90, sm_90a)");
  s.arch = *target;
  // Specs that cannot be compiled for what the flags say alone (tiles whose accumulators do not
  // fit the registers, or whose shared memory does not fit a block of the target) are refused
  // here like a bad value, before anything is lowered.
  mlir::MLIRContext ctx;
  if (llvm::Error e = compiler::validate(s, &ctx))
    return std::move(e);
  if (llvm::Error e = kernels::checkRegisterFootprint(s))
    return std::move(e);
  if (llvm::Error e = jit::checkSharedMemory(s))
    return std::move(e);
  return s;
}

} // namespace flashbob::tool
