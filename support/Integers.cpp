#include "support/Integers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace flashbob::support {

namespace {
struct Decimal {
  bool valid = false;      // digits, an allowed sign, no leading zero
  bool otherBase = false;  // a leading 0 (010, 0x80, 0b11): octal, hex or binary elsewhere
  bool negative = false;
  std::optional<uint64_t> magnitude; // nullopt past 64 bits
};

Decimal read(llvm::StringRef text, bool signedRange) {
  Decimal d;
  d.negative = text.consume_front("-");
  d.otherBase = text.size() > 1 && text.front() == '0';
  d.valid = !text.empty() && llvm::all_of(text, llvm::isDigit) && !d.otherBase &&
            (!d.negative || signedRange);
  if (!d.valid)
    return d;
  uint64_t m = 0;
  for (char c : text)
    if (__builtin_mul_overflow(m, uint64_t(10), &m) ||
        __builtin_add_overflow(m, uint64_t(c - '0'), &m))
      return d;
  d.magnitude = m;
  return d;
}

bool inRange(const Decimal &d, int64_t min, uint64_t max) {
  if (!d.magnitude)
    return false;
  // |min| without overflowing at INT64_MIN.
  const uint64_t lowest = min < 0 ? static_cast<uint64_t>(-(min + 1)) + 1 : 0;
  return d.negative ? *d.magnitude <= lowest : *d.magnitude <= max;
}
} // namespace

std::string integerProblem(llvm::StringRef text, int64_t min, uint64_t max) {
  const bool signedRange = min < 0;
  const Decimal d = read(text, signedRange);
  if (!d.valid)
    return std::string(signedRange ? "is not an integer" : "is not a non-negative integer") +
           (d.otherBase ? " (decimal digits only: no leading 0, 0x or 0b)" : "");
  if (!inRange(d, min, max))
    return "is out of range (" +
           (signedRange ? "[" + std::to_string(min) + ", " + std::to_string(max) + "]"
                        : "at most " + std::to_string(max)) +
           ")";
  return "";
}

std::optional<uint64_t> parseIntegerBits(llvm::StringRef text, int64_t min, uint64_t max) {
  const Decimal d = read(text, min < 0);
  if (!d.valid || !inRange(d, min, max))
    return std::nullopt;
  return d.negative ? uint64_t(0) - *d.magnitude : *d.magnitude;
}

} // namespace flashbob::support
