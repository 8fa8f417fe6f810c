#include "jit/CachedMetadata.h"

#include "runtime/launch/TensorMaps.h"

#include "llvm/Support/FormatVariadic.h"

namespace flashbob::jit {

namespace {
llvm::Error invalid(const llvm::Twine &message) {
  return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                 "metadata.json: " + message);
}

std::string describe(const support::TensorMapSpec &m) {
  return llvm::formatv("(memref {0}, rows of {1}, box {2} x {3}, swizzle {4}, {5}-byte elements)",
                       m.tensorArg, m.rowsArg, m.boxRows, m.boxCols, m.swizzleBytes,
                       m.elementBytes);
}
} // namespace

llvm::Error validateCachedMetadata(const llvm::json::Object &metadata,
                                   const compiler::LaunchFacts &derived) {
  const std::string &name = derived.entry;
  std::optional<llvm::StringRef> entry = metadata.getString("entry");
  if (!entry)
    return invalid("no \"entry\" string");
  if (*entry != name)
    return invalid("entry = '" + *entry + "', but the kernel is " + name);

  std::optional<int64_t> threads = metadata.getInteger("threads");
  if (!threads)
    return invalid("no \"threads\" integer");
  if (*threads != derived.threads)
    return invalid(llvm::formatv("threads = {0}, but {1} runs {2}", *threads, name,
                                 derived.threads));

  std::optional<int64_t> shared = metadata.getInteger("shared_bytes");
  if (!shared)
    return invalid("no \"shared_bytes\" integer");
  if (*shared != derived.sharedBytes)
    return invalid(llvm::formatv("shared_bytes = {0}, but {1} uses {2}", *shared, name,
                                 derived.sharedBytes));

  std::optional<std::vector<support::TensorMapSpec>> maps =
      runtime::tensorMapsFromJson(metadata.getArray("tensor_maps"));
  if (!maps)
    return invalid("\"tensor_maps\" missing or malformed");
  if (maps->size() != derived.tensorMaps.size())
    return invalid(llvm::formatv("{0} tensor maps, but {1} takes {2}", maps->size(), name,
                                 derived.tensorMaps.size()));
  for (size_t i = 0; i < maps->size(); ++i)
    if (!((*maps)[i] == derived.tensorMaps[i]))
      return invalid(llvm::formatv("tensor_maps[{0}] = {1}, but {2}'s is {3}", i,
                                   describe((*maps)[i]), name, describe(derived.tensorMaps[i])));
  return llvm::Error::success();
}

} // namespace flashbob::jit
