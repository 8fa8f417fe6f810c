// `flashbob env`: every FLASHBOB_* environment variable (support/Knobs.h's table) with its type,
// default, current value in this process and what it does. The one place users look them up.
#include "support/Knobs.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"

#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {

llvm::cl::SubCommand envCommand("env", "List the FLASHBOB_* environment variables: type, "
                                       "default, current value, meaning");

int runEnv() {
  for (const support::KnobInfo &k : support::allKnobs()) {
    llvm::outs() << k.name << " (" << support::knobTypeName(k.type) << ", default: "
                 << (k.defaultValue.empty() ? llvm::StringRef("unset") : llvm::StringRef(k.defaultValue)) << ")"
                 << (k.reader == support::KnobReader::Python ? " [read by the Python package]"
                     : k.reader == support::KnobReader::Tests ? " [read by the tests]"
                                                              : "")
                 << "\n";
    std::optional<std::string> value = support::rawValue(k.knob);
    llvm::outs() << "  current: " << (value ? *value : std::string("unset"));
    if (llvm::Error e = support::checkValue(k.knob))
      llvm::outs() << " (malformed: " << llvm::toString(std::move(e)) << "; the default applies)";
    llvm::outs() << "\n  " << k.doc << "\n";
  }
  return kExitOk;
}

} // namespace flashbob::tool
