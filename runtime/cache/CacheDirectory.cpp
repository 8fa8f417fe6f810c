#include "runtime/cache/CacheDirectory.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

std::optional<std::string> untrustedReason(mode_t mode, uid_t owner, uid_t user) {
  if (!S_ISDIR(mode))
    return std::string("not a directory");
  if (owner != user)
    return llvm::formatv("owned by uid {0}, not by this user (uid {1})", owner, user).str();
  // Group-writable too: another member of the group could plant entries.
  if (mode & (S_IWGRP | S_IWOTH))
  {
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", unsigned(mode & 07777));
    return std::string("writable by ") + ((mode & S_IWOTH) ? "others" : "its group") +
           " (mode " + octal + ")";
  }
  return std::nullopt;
}

std::string perUserTempDirectory() {
  llvm::SmallString<256> result;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, result);
  llvm::sys::path::append(result, "flashbob-cache-" + std::to_string(::geteuid()));
  return result.str().str();
}

} // namespace flashbob::runtime
