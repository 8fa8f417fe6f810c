#include "support/LibraryFile.h"

#include "support/Errors.h"

#include "llvm/Support/FileSystem.h"

namespace flashbob::support {

namespace {
llvm::StringRef describe(llvm::sys::fs::file_type type) {
  using llvm::sys::fs::file_type;
  switch (type) {
  case file_type::directory_file:
    return "a directory";
  case file_type::fifo_file:
    return "a FIFO";
  case file_type::character_file:
    return "a character device";
  case file_type::block_file:
    return "a block device";
  case file_type::socket_file:
    return "a socket";
  default:
    return "not a file dlopen can load";
  }
}
} // namespace

llvm::Error checkLibraryFile(llvm::StringRef path, std::optional<Knob> knob) {
  if (!path.contains('/'))
    return llvm::Error::success();
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status, /*follow=*/true) ||
      status.type() == llvm::sys::fs::file_type::regular_file ||
      status.type() == llvm::sys::fs::file_type::file_not_found)
    return llvm::Error::success();
  const llvm::StringRef name = knob ? llvm::StringRef(knobInfo(*knob).name) : "library";
  const std::string named = knob ? (name + "=").str() : std::string();
  return makeInvalidArgument(name, named + "'" + path + "' is not a regular file (" +
                                       describe(status.type()) + ")");
}

} // namespace flashbob::support
