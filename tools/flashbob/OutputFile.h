// Writing a command's output file (compile -o and --dump-dir, bench --json, the demo's PTX) so
// that a failed write is an error naming the file, not LLVM's "IO failure on output stream"
// abort at exit (a raw_fd_ostream destroyed with an unreported error calls report_fatal_error).
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {

// Writes what `write` prints to `path`: "-" is standard output; a regular file (or a new one)
// is written to a temporary file renamed into place, so a reader never sees half of it and a
// failed write leaves the previous one; anything else that exists (a device, a FIFO,
// /dev/stdout) is written in place, never replaced. The error reads
// "cannot write PATH: REASON".
llvm::Error writeOutput(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace flashbob::tool
