// Whether a cache directory may be trusted: entries in it become GPU code in this process and
// tuning records choose kernels, so only this user (and root, who can do anything anyway) may be
// able to write there. TrustedDirectory applies this to a directory it has opened.
// docs/cache-threat-model.md says what this does and does not cover.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

namespace flashbob::runtime {

// Why a directory with this mode, owner and group must not be used by `user`, or nullopt when it
// may: it must be a directory, owned by `user`, not writable by others, and not writable by its
// group unless that group is `privateGroup` (the user's own group, which nobody else is in).
std::optional<std::string> untrustedReason(mode_t mode, uid_t owner, gid_t group, uid_t user,
                                           std::optional<gid_t> privateGroup);

// The calling user's private group: their primary group when it carries their name (the "user
// private group" scheme, where umask 002 makes new directories group-writable harmlessly).
std::optional<gid_t> userPrivateGroup();

// The default cache directory when there is no home: <temp>/flashbob-cache-<uid>, one per user
// (a shared name would let the first user to create it own everyone's cache).
std::string perUserTempDirectory();

} // namespace flashbob::runtime
