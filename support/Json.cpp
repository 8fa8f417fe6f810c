#include "support/Json.h"

namespace flashbob::support {

namespace {
// The deepest nesting of arrays and objects, brackets inside strings not counted; stops early
// past `limit`. Malformed text is left to the parser.
bool nestsDeeperThan(llvm::StringRef text, int limit) {
  int depth = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}
} // namespace

llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text, int maxDepth) {
  if (nestsDeeperThan(text, maxDepth))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "JSON nests deeper than %d levels", maxDepth);
  return llvm::json::parse(text);
}

} // namespace flashbob::support
