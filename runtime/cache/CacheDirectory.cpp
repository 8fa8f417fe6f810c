#include "runtime/cache/CacheDirectory.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cstdio>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

std::optional<std::string> untrustedReason(mode_t mode, uid_t owner, gid_t group, uid_t user,
                                           std::optional<gid_t> privateGroup) {
  if (!S_ISDIR(mode))
    return std::string("not a directory");
  if (owner != user)
    return llvm::formatv("owned by uid {0}, not by this user (uid {1})", owner, user).str();
  // Group-writable too, unless the group is the user's own: another member of a shared group
  // could plant entries.
  const bool groupShared = !privateGroup || group != *privateGroup;
  if ((mode & S_IWOTH) || ((mode & S_IWGRP) && groupShared)) {
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", unsigned(mode & 07777));
    return std::string("writable by ") + ((mode & S_IWOTH) ? "others" : "its group") +
           " (mode " + octal + ")";
  }
  return std::nullopt;
}

std::optional<gid_t> userPrivateGroup() {
  const struct passwd *user = ::getpwuid(::geteuid());
  if (!user)
    return std::nullopt;
  const std::string userName = user->pw_name;
  const gid_t primary = user->pw_gid;
  const struct group *g = ::getgrgid(primary);
  if (!g || userName != g->gr_name)
    return std::nullopt;
  return primary;
}

std::string perUserTempDirectory() {
  llvm::SmallString<256> result;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, result);
  llvm::sys::path::append(result, "flashbob-cache-" + std::to_string(::geteuid()));
  return result.str().str();
}

} // namespace flashbob::runtime
