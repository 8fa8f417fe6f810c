// Reading and removing files in a directory that another process, a careless script or a
// hostile local user may have touched (the kernel cache, the tuning records): never through a
// symbolic link, never blocking on a FIFO, never reading past a size bound, never leaving a
// directory behind because it holds something other than plain files.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace flashbob::runtime {

// The bytes of `path` when it is a regular file (not a link, FIFO, socket or device) of at most
// `maxBytes` bytes. The error names the call and the path: "open(<path>): ...",
// "<path>: not a regular file (FIFO)", "<path>: 300000000 B, more than the 268435456 B bound".
llvm::Expected<std::string> readRegularFile(llvm::StringRef path, uint64_t maxBytes);

// Sets the modification time of `path` to now if it is a regular file (not through a link,
// without blocking on a FIFO). Best effort: false when it could not.
bool touchRegularFile(llvm::StringRef path);

// Removes `path`, and everything under it when it is a directory (a link is removed itself,
// never followed; FIFOs, sockets and devices are unlinked like files). Each thing it could not
// remove is appended to `failures` as "<call>(<path>): <reason>". True when `path` is gone.
bool removeTree(llvm::StringRef path, std::vector<std::string> &failures);

} // namespace flashbob::runtime
