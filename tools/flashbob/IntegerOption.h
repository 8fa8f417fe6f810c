// Integer flags read by support/Integers.h, the parser (and the messages) of the FLASHBOB_*
// knobs, instead of LLVM's, which reads 010 as 8 and takes 0x80 and 0b11:
//   IntegerOpt<int64_t> blockM("block-m", ...);     // like cl::opt<int64_t>
//   IntegerList<int64_t> seqlens("seqlens-q", ...); // like cl::list<int64_t>
// A refused value is a usage error like any other the parser reports (exit 2):
//   flashbob: for the --block-m option: '0x80' is not an integer (decimal digits only: ...)
#pragma once

#include "support/Integers.h"

#include "llvm/Support/CommandLine.h"

namespace flashbob::tool {

// What the parser below produces: the value, for an option that stores a T. (LLVM's parsers of
// the integer types are final, and an option's parser must be a cl::parser of some type to
// print its value, hence a type of our own to specialize cl::parser for.)
template <typename T> struct DecimalInteger {
  T value{};
  operator T() const { return value; }
};

} // namespace flashbob::tool

namespace llvm::cl {
template <typename T>
class parser<flashbob::tool::DecimalInteger<T>>
    : public basic_parser<flashbob::tool::DecimalInteger<T>> {
public:
  parser(Option &option) : basic_parser<flashbob::tool::DecimalInteger<T>>(option) {}

  // True on error, as every cl parser.
  bool parse(Option &option, StringRef argName, StringRef arg,
             flashbob::tool::DecimalInteger<T> &out) {
    if (std::optional<T> parsed = flashbob::support::parseInteger<T>(arg)) {
      out.value = *parsed;
      return false;
    }
    return option.error("'" + arg + "' " + flashbob::support::integerProblem<T>(arg));
  }

  StringRef getValueName() const override { return "int"; }
};
} // namespace llvm::cl

namespace flashbob::tool {
template <typename T>
using IntegerOpt = llvm::cl::opt<T, false, llvm::cl::parser<DecimalInteger<T>>>;
template <typename T>
using IntegerList = llvm::cl::list<T, bool, llvm::cl::parser<DecimalInteger<T>>>;
} // namespace flashbob::tool
