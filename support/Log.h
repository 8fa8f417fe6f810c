// The one sink for messages FlashBoB prints while working (compiling, the kernel cache,
// autotuning, knob warnings), so an embedder can route them to its own logging
// (flashbob_set_log_callback in the C API) instead of finding them on stderr.
//
// A message is one line without its newline, complete as a user would read it (it carries its
// own "flashbob ...:" prefix). The default sink writes Info and above to stderr, which is exactly
// what was printed before the sink existed; Debug messages (every cache event, each autotuning
// candidate when FLASHBOB_PRINT_AUTOTUNING is off) only reach a sink that was set.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <functional>

namespace flashbob::support {

// Values match flashbob_log_level in api/flashbob.h.
enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

using LogSink = std::function<void(LogLevel, llvm::StringRef message)>;

// Replaces the sink for the whole process (thread safe); an empty sink restores the default.
// A sink may be called from any thread, concurrently, and may itself log, read knobs or replace
// the sink. It is called with the caller's locks held (the cache's, the autotuner's), so it must
// not call back into code that takes them (an attention call).
void setLogSink(LogSink sink);

void log(LogLevel level, const llvm::Twine &message);

// Whether the current sink wants `level` (skip building costly Debug messages otherwise).
bool logs(LogLevel level);

} // namespace flashbob::support
