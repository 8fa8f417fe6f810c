// The check before dlopen of a library file: it must be a regular file (symbolic links
// followed). dlopen of a FIFO waits for a writer, forever in practice, and hangs the host; of a
// directory or a device it fails or reads without saying why.
#pragma once

#include "support/Knobs.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace flashbob::support {

// Success for a regular file, for a path that does not exist (dlopen says so), and for a bare
// name without '/', which dlopen looks for on the loader's path, not here. Otherwise an
// InvalidArgumentError: "FLASHBOB_CUBLAS='/tmp/x' is not a regular file (a FIFO)" when `knob`
// named the path, "'/tmp/x' is not a regular file (a FIFO)" when it did not.
llvm::Error checkLibraryFile(llvm::StringRef path, std::optional<Knob> knob);

} // namespace flashbob::support
