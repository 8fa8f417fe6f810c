#include "tools/flashbob/OutputFile.h"

#include "llvm/Support/FileSystem.h"

namespace flashbob::tool {

namespace {
llvm::Error cannotWrite(llvm::StringRef path, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cannot write " + path + ": " + why);
}

// Flushes `os` and turns its sticky error into an llvm::Error, clearing it: a stream destroyed
// with an error still set aborts the process.
llvm::Error flushed(llvm::raw_fd_ostream &os, llvm::StringRef path) {
  os.flush();
  if (!os.has_error())
    return llvm::Error::success();
  std::error_code ec = os.error();
  os.clear_error();
  return cannotWrite(path, ec.message());
}
} // namespace

llvm::Error writeOutput(llvm::StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  if (path == "-") {
    write(llvm::outs());
    return flushed(llvm::outs(), "standard output");
  }
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      status.type() != llvm::sys::fs::file_type::regular_file) {
    // A rename would replace the device or FIFO itself (as root, /dev/full became a file).
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
    if (ec)
      return cannotWrite(path, ec.message());
    write(os);
    return flushed(os, path);
  }
  // (llvm::writeToOutput does the same but aborts on a write error, e.g. a full disk.)
  auto temp = llvm::sys::fs::TempFile::create(path + ".tmp-%%%%%%",
                                              llvm::sys::fs::all_read | llvm::sys::fs::all_write);
  if (!temp)
    return cannotWrite(path, llvm::toString(temp.takeError()));
  llvm::Error written = llvm::Error::success();
  {
    llvm::raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
    write(os);
    written = flushed(os, path);
  }
  if (written) {
    llvm::consumeError(temp->discard());
    return written;
  }
  if (llvm::Error e = temp->keep(path))
    return cannotWrite(path, llvm::toString(std::move(e)));
  return llvm::Error::success();
}

} // namespace flashbob::tool
