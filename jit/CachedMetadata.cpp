#include "jit/CachedMetadata.h"

#include "compiler/dialect/Target.h"
#include "kernels/Signature.h"
#include "runtime/launch/Kernel.h"
#include "runtime/launch/TensorMaps.h"

#include "llvm/Support/FormatVariadic.h"

namespace flashbob::jit {

namespace {
llvm::Error invalid(const llvm::Twine &message) {
  return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                 "metadata.json: " + message);
}
} // namespace

int64_t specThreads(const compiler::KernelSpec &spec) {
  return 32 * (spec.tiles.warps + (spec.tiles.producer ? 4 : 0));
}

llvm::Expected<CachedLaunch> validateCachedMetadata(const llvm::json::Object &metadata,
                                                    const compiler::KernelSpec &spec) {
  const std::string name = spec.name();
  CachedLaunch launch;

  // The kernel's symbol is the spec's name (compiler/KernelSpec.h).
  std::optional<llvm::StringRef> entry = metadata.getString("entry");
  if (!entry)
    return invalid("no \"entry\" string");
  if (*entry != name)
    return invalid("entry = '" + *entry + "', but the kernel is " + name);
  launch.entry = entry->str();

  std::optional<int64_t> threads = metadata.getInteger("threads");
  if (!threads)
    return invalid("no \"threads\" integer");
  if (*threads != specThreads(spec))
    return invalid(llvm::formatv("threads = {0}, but {1} runs {2} ({3} warps{4})", *threads, name,
                                 specThreads(spec), spec.tiles.warps,
                                 spec.tiles.producer ? " and a producer warpgroup" : ""));
  launch.threads = static_cast<unsigned>(*threads);

  // Shared memory comes out of the compiler; the target bounds it.
  const bob::TargetInfo &target = bob::targetInfo(spec.arch);
  std::optional<int64_t> shared = metadata.getInteger("shared_bytes");
  if (!shared)
    return invalid("no \"shared_bytes\" integer");
  if (*shared < 0 || *shared > target.sharedPerBlock)
    return invalid(llvm::formatv("shared_bytes = {0}, outside 0..{1} ({2}'s shared memory per "
                                 "block)",
                                 *shared, target.sharedPerBlock,
                                 bob::stringifyArch(spec.arch)));
  launch.sharedBytes = static_cast<unsigned>(*shared);

  std::optional<std::vector<support::TensorMapSpec>> maps =
      runtime::tensorMapsFromJson(metadata.getArray("tensor_maps"));
  if (!maps)
    return invalid("\"tensor_maps\" missing or malformed");
  if (!maps->empty() && !target.hopperFeatures)
    return invalid(llvm::formatv("{0} tensor map(s), but {1} has no TMA", maps->size(),
                                 bob::stringifyArch(spec.arch)));
  // A launch passes them by value, in room for kMaxTensorMaps (runtime/launch/Kernel.h).
  if (maps->size() > runtime::kMaxTensorMaps)
    return invalid(llvm::formatv("{0} tensor maps, more than a launch passes ({1})", maps->size(),
                                 runtime::kMaxTensorMaps));
  const size_t memrefs = kernels::operandCount(spec.kind, spec.varlen, spec.partial);
  for (size_t i = 0; i < maps->size(); ++i) {
    const support::TensorMapSpec &m = (*maps)[i];
    auto bad = [&](const llvm::Twine &why) {
      return invalid(llvm::formatv("tensor_maps[{0}]: ", i) + why);
    };
    if (m.tensorArg >= memrefs || m.rowsArg >= memrefs)
      return bad(llvm::formatv("memref argument {0} (rows of {1}), but {2} kernels take {3}",
                               m.tensorArg, m.rowsArg, bob::stringifyKernelKind(spec.kind),
                               memrefs));
    if (m.elementBytes != 2 && m.elementBytes != 4)
      return bad(llvm::formatv("element_bytes = {0}, not 2 or 4", m.elementBytes));
    if (m.swizzleBytes != 32 && m.swizzleBytes != 64 && m.swizzleBytes != 128)
      return bad(llvm::formatv("swizzle = {0}, not 32, 64 or 128", m.swizzleBytes));
    // The compiler's boxes (compiler/passes/UseTma.cpp): one swizzle span of columns, at most
    // kTmaMaxBoxDim rows.
    if (m.boxRows < 1 || m.boxRows > bob::kTmaMaxBoxDim)
      return bad(llvm::formatv("box_rows = {0}, outside 1..{1}", m.boxRows, bob::kTmaMaxBoxDim));
    if (uint64_t(m.boxCols) * m.elementBytes != m.swizzleBytes)
      return bad(llvm::formatv("box_cols = {0} of {1} B, not one {2} B swizzle span", m.boxCols,
                               m.elementBytes, m.swizzleBytes));
  }
  launch.tensorMaps = std::move(*maps);
  return launch;
}

} // namespace flashbob::jit
