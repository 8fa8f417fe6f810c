// Whether a cache directory may be trusted: entries in it become GPU code in this process and
// tuning records choose kernels, so only this user (and root, who can do anything anyway) may be
// able to write there. docs/cache-threat-model.md says what this does and does not cover.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

namespace flashbob::runtime {

// Why a directory with this mode and owner must not be used by `user`, or nullopt when it may:
// it must be a directory, owned by `user`, and not writable by group or others.
std::optional<std::string> untrustedReason(mode_t mode, uid_t owner, uid_t user);

// The default cache directory when there is no home: <temp>/flashbob-cache-<uid>, one per user
// (a shared name would let the first user to create it own everyone's cache).
std::string perUserTempDirectory();

} // namespace flashbob::runtime
