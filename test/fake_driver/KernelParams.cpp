#include "test/fake_driver/KernelParams.h"

#include <cstdint>
#include <cstring>
#include <sstream>

namespace fake_cuda {
namespace {

template <typename T> T read(const unsigned char *at) {
  T v;
  std::memcpy(&v, at, sizeof(v));
  return v;
}

// A cubin: each kernel's .nv.info.<kernel> section is a list of attributes, each a format byte,
// an attribute byte and a value whose length the format gives: none, a byte or a half-word
// (each in 2 bytes, so records stay 4-byte aligned), or a 16-bit size and that many bytes.
// KPARAM_INFO (0x17) describes one parameter: index (u32), ordinal (u16), offset (u16) and a
// word whose bits 18 and up hold the size.
constexpr unsigned char kFormatNone = 1, kFormatByte = 2, kFormatHalf = 3, kFormatSized = 4;
constexpr unsigned char kParamInfo = 0x17;
constexpr char kInfoPrefix[] = ".nv.info.";

std::optional<std::vector<Param>> readInfoSection(const unsigned char *p, uint64_t size) {
  std::vector<Param> params;
  uint64_t at = 0;
  while (at < size) {
    if (size - at < 2)
      return std::nullopt;
    const unsigned char format = p[at], attribute = p[at + 1];
    at += 2;
    uint64_t length = 0;
    if (format == kFormatNone || format == kFormatByte || format == kFormatHalf) {
      length = 2;
    } else if (format == kFormatSized) {
      if (size - at < 2)
        return std::nullopt;
      length = read<uint16_t>(p + at);
      at += 2;
    } else {
      return std::nullopt; // a format this reader does not know: better nothing than a guess
    }
    if (size - at < length)
      return std::nullopt;
    if (attribute == kParamInfo && format == kFormatSized && length == 12) {
      const uint16_t ordinal = read<uint16_t>(p + at + 4), offset = read<uint16_t>(p + at + 6);
      const uint32_t word = read<uint32_t>(p + at + 8);
      if (params.size() <= ordinal)
        params.resize(size_t(ordinal) + 1);
      params[ordinal] = {offset, (word >> 18) & 0x3fff};
    }
    at += length;
  }
  return params;
}

std::optional<std::map<std::string, std::vector<Param>>> readCubin(const unsigned char *elf) {
  if (elf[4] != 2 || elf[5] != 1) // 64-bit, little-endian
    return std::nullopt;
  const uint64_t sectionsAt = read<uint64_t>(elf + 0x28);
  const uint16_t entrySize = read<uint16_t>(elf + 0x3a), count = read<uint16_t>(elf + 0x3c),
                 namesIndex = read<uint16_t>(elf + 0x3e);
  if (entrySize < 0x30 || namesIndex >= count)
    return std::nullopt;
  auto section = [&](unsigned i) { return elf + sectionsAt + uint64_t(i) * entrySize; };
  const unsigned char *names = elf + read<uint64_t>(section(namesIndex) + 0x18);
  std::map<std::string, std::vector<Param>> kernels;
  for (unsigned i = 0; i < count; ++i) {
    const char *name = reinterpret_cast<const char *>(names + read<uint32_t>(section(i)));
    if (std::strncmp(name, kInfoPrefix, sizeof(kInfoPrefix) - 1) != 0)
      continue;
    auto params = readInfoSection(elf + read<uint64_t>(section(i) + 0x18),
                                  read<uint64_t>(section(i) + 0x20));
    if (!params)
      return std::nullopt;
    kernels[name + sizeof(kInfoPrefix) - 1] = std::move(*params);
  }
  return kernels;
}

// Bytes of a PTX parameter type (.b8 ... .f64); 0 for a token that is not one.
size_t typeBytes(const std::string &t) {
  if (t.size() < 3 || t[0] != '.' || !std::strchr("bsuf", t[1]))
    return 0;
  if (t == ".bf16")
    return 2;
  const std::string bits = t.substr(2);
  return bits == "8" ? 1 : bits == "16" ? 2 : bits == "32" ? 4 : bits == "64" ? 8 : 0;
}

// PTX: `.entry name(.param .u64 .ptr .align 1 name_param_0, .param .align 64 .b8 p[128], ...)`.
std::optional<std::map<std::string, std::vector<Param>>> readPtx(const char *text) {
  std::map<std::string, std::vector<Param>> kernels;
  const std::string ptx(text);
  for (size_t at = ptx.find(".entry "); at != std::string::npos;
       at = ptx.find(".entry ", at + 1)) {
    const size_t open = ptx.find('(', at), close = ptx.find(')', at);
    if (open == std::string::npos || close == std::string::npos || close < open)
      return std::nullopt;
    std::string name = ptx.substr(at + 7, open - at - 7);
    name.erase(name.find_last_not_of(" \t\n") + 1);
    std::vector<Param> params;
    std::istringstream list(ptx.substr(open + 1, close - open - 1));
    std::string declaration;
    size_t end = 0;
    while (std::getline(list, declaration, ',')) {
      std::istringstream tokens(declaration);
      std::string token;
      size_t align = 0, bytes = 0, elements = 1;
      while (tokens >> token) {
        if (token == ".align") {
          tokens >> align;
        } else if (size_t b = typeBytes(token)) {
          bytes = b;
        } else if (size_t bracket = token.find('['); bracket != std::string::npos) {
          elements = std::strtoul(token.c_str() + bracket + 1, nullptr, 10);
        }
      }
      if (bytes == 0)
        return std::nullopt;
      align = align ? align : bytes;
      const size_t offset = (end + align - 1) / align * align;
      params.push_back({offset, bytes * elements});
      end = offset + bytes * elements;
    }
    kernels[name] = std::move(params);
  }
  return kernels;
}

} // namespace

std::optional<std::map<std::string, std::vector<Param>>> readKernelParams(const void *image) {
  const auto *bytes = static_cast<const unsigned char *>(image);
  if (std::memcmp(bytes, "\x7f" "ELF", 4) == 0)
    return readCubin(bytes);
  const char *text = static_cast<const char *>(image);
  if (std::strstr(text, ".entry "))
    return readPtx(text);
  return std::nullopt;
}

} // namespace fake_cuda
