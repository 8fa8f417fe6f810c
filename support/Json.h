// llvm::json::parse for files that may be damaged or hostile (the kernel cache's metadata.json,
// autotuning records): llvm::json recurses once per nesting level and has no depth limit, so a
// file of many '[' would overflow the stack. This refuses such text before parsing it.
#pragma once

#include "llvm/Support/JSON.h"

namespace flashbob::support {

// Our files nest a few levels (plus whatever a caller's metadata nests); 256 is far beyond.
constexpr int kMaxJsonDepth = 256;

// Parses `text`; fails without parsing if arrays and objects nest deeper than `maxDepth`.
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text, int maxDepth = kMaxJsonDepth);

} // namespace flashbob::support
