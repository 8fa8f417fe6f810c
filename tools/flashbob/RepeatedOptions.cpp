#include "tools/flashbob/RepeatedOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>
#include <utility>
#include <vector>

namespace flashbob::tool {
namespace cl = llvm::cl;

llvm::Error checkRepeatedOptions() {
  // The command given (at most one subcommand is); the top level when none was.
  cl::SubCommand *chosen = &cl::SubCommand::getTopLevel();
  for (cl::SubCommand *sub : cl::getRegisteredSubcommands())
    if (*sub)
      chosen = sub;
  std::vector<std::pair<std::string, unsigned>> repeated;
  for (const auto &[name, option] : chosen->OptionsMap) {
    // cl::opt and cl::alias are Optional (or Required); cl::list and cl::bits are ZeroOrMore or
    // OneOrMore, which is how a flag says it may repeat. An alias forwards each occurrence to
    // its option, so `--seq 5 --seq-q 6` counts twice on --seq-q.
    const bool single = option->getNumOccurrencesFlag() == cl::Optional ||
                        option->getNumOccurrencesFlag() == cl::Required;
    if (single && option->getNumOccurrences() > 1 && name == option->ArgStr)
      repeated.emplace_back(option->ArgStr.str(), option->getNumOccurrences());
  }
  if (repeated.empty())
    return llvm::Error::success();
  llvm::sort(repeated);
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("--{0}: given {1} times; it takes one value, give it once",
                    repeated.front().first, repeated.front().second));
}

} // namespace flashbob::tool
