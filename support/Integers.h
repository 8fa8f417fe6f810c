// Integers as users write them, in FLASHBOB_* knobs and in the CLI's flags alike: decimal digits,
// after a '-' for a negative value where the type has them, and nothing else (no '+', no spaces,
// no leading zeros, no 0x or 0b), within the type's range.
//
// Why so strict: LLVM's flag parser (like strtol with base 0) reads 010 as 8 and takes 0x80 and
// 0b11, while a knob read 010 as 10: the same text meant different numbers in a flag and in the
// environment. Refusing what is not plainly decimal says so instead of guessing.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace flashbob::support {

// Why `text` is not an integer in [min, max], as the phrase that follows the quoted value in a
// message ("'0x80' is not an integer (decimal digits only: no leading 0, 0x or 0b)", "'300'
// is out of range ([-128, 127])"); "" when it is one.
std::string integerProblem(llvm::StringRef text, int64_t min, uint64_t max);

// The value of `text` when integerProblem has nothing to say, in two's complement.
std::optional<uint64_t> parseIntegerBits(llvm::StringRef text, int64_t min, uint64_t max);

template <typename T> std::string integerProblem(llvm::StringRef text) {
  return integerProblem(text, static_cast<int64_t>(std::numeric_limits<T>::min()),
                        static_cast<uint64_t>(std::numeric_limits<T>::max()));
}

// `text` as a T (int, int64_t, uint64_t, ...), or nullopt when integerProblem<T> has a reason.
template <typename T> std::optional<T> parseInteger(llvm::StringRef text) {
  static_assert(std::numeric_limits<T>::is_integer && sizeof(T) <= sizeof(uint64_t));
  std::optional<uint64_t> bits =
      parseIntegerBits(text, static_cast<int64_t>(std::numeric_limits<T>::min()),
                       static_cast<uint64_t>(std::numeric_limits<T>::max()));
  if (!bits)
    return std::nullopt;
  return static_cast<T>(static_cast<int64_t>(*bits));
}

} // namespace flashbob::support
