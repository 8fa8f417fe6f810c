#include "tools/flashbob/OptionCategories.h"

namespace flashbob::tool {
namespace cl = llvm::cl;

cl::OptionCategory problemCategory("Problem options");
cl::OptionCategory measureCategory("Timing and check options");
cl::OptionCategory runCategory("Run options");
cl::OptionCategory benchCategory("Bench options");
cl::OptionCategory specCategory("Kernel spec options");
cl::OptionCategory compileCategory("Compile options");
cl::OptionCategory demoCategory("Demo options");
cl::OptionCategory cacheCategory("Cache options");

llvm::ArrayRef<const cl::OptionCategory *> toolCategories() {
  static const cl::OptionCategory *const all[] = {
      &problemCategory, &specCategory,    &measureCategory, &runCategory,
      &benchCategory,   &compileCategory, &demoCategory,    &cacheCategory};
  return all;
}

} // namespace flashbob::tool
