// Knobs: every FLASHBOB_* environment variable, declared once (name, type, default, doc) in
// Knobs.cpp's table, read once per process, with typed accessors and a programmatic override.
//
// Why one table: a variable read in three places drifts into three spellings of "on", three
// defaults and no list of what exists; `flashbob env` prints this table with the current values.
// Why read once: the environment of a running process is not ours to watch (setenv is not thread
// safe), so code that wants another value says so through setOverride instead.
//
// Values: "" counts as unset. A value that does not parse as the knob's type is reported once
// through the log sink (a warning naming the variable, the value and what is accepted) and the
// knob falls back to its default; checkValue() returns that error for tools that want to fail.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace flashbob::support {

enum class Knob {
  CacheDir,
  CacheMaxMB,
  CudaDriver,
  Autotune,
  PrintAutotuning,
  Arch,
  Producer,
  Ptxas,
  PtxasTimeoutS,
  Assembler,
  NvJitLink,
  DumpDir,
  Cublas,
  CheckOffsets,
  LongSweep,
  RegisterA,
  FusedBackward,
  PadInKernel,
  Tiles,
  Library,
  JaxFfi,
  PtxSnapshotDir,
  OracleReport,
};

enum class KnobType {
  Bool,     // 1/0, true/false, on/off, yes/no (any case)
  TriState, // a Bool that may also be unset, meaning "let the code decide"
  UInt,     // a non-negative decimal integer, as support/Integers.h reads it (no 010, 0x, 0b)
  String,
  Path,
};

// Who reads a knob: the C++ library and tools, the Python package, or the tests (listed here so
// the table is whole; only Library knobs are read through this file by the code they steer).
enum class KnobReader { Library, Python, Tests };

struct KnobInfo {
  Knob knob;
  llvm::StringLiteral name;         // FLASHBOB_...
  KnobType type;
  llvm::StringLiteral defaultValue; // as the user would write it; "" when unset by default
  llvm::StringLiteral doc;          // one sentence or two, for `flashbob env` and the README
  KnobReader reader = KnobReader::Library;
};

// Every knob, in the order `flashbob env` prints them.
llvm::ArrayRef<KnobInfo> allKnobs();
const KnobInfo &knobInfo(Knob knob);
llvm::StringRef knobTypeName(KnobType type);

// The knob's text: its override if one is set, else the environment as read at the first access
// of this knob; nullopt when unset or empty.
std::optional<std::string> rawValue(Knob knob);

// Overrides the environment for this process (thread safe). "" means unset, so the default
// applies (e.g. flashbob_set_cache_dir(NULL)). Code that caches a knob (read on a hot path)
// sees an override only if it was set before that code's first read.
void setOverride(Knob knob, llvm::StringRef value);
void clearOverride(Knob knob); // back to the environment

// The error for the knob's current value if it does not parse as its type, else success.
llvm::Error checkValue(Knob knob);

// Typed reads: the parsed value, or the default when unset or malformed (then a one-time warning
// goes to the log sink).
bool getBool(Knob knob);
std::optional<bool> getTriState(Knob knob);
uint64_t getUInt(Knob knob);
std::string getString(Knob knob); // String and Path knobs; "" when unset and without default

// Named accessors, one per knob the C++ code reads (the docs are in Knobs.cpp's table).
namespace knobs {
inline std::string cacheDir() { return getString(Knob::CacheDir); }
inline uint64_t cacheMaxMB() { return getUInt(Knob::CacheMaxMB); }
inline std::string cudaDriver() { return getString(Knob::CudaDriver); }
inline bool autotune() { return getBool(Knob::Autotune); }
inline bool printAutotuning() { return getBool(Knob::PrintAutotuning); }
inline std::string arch() { return getString(Knob::Arch); }
inline std::optional<bool> producer() { return getTriState(Knob::Producer); }
inline std::string ptxas() { return getString(Knob::Ptxas); }
inline uint64_t ptxasTimeoutS() { return getUInt(Knob::PtxasTimeoutS); }
inline std::string assembler() { return getString(Knob::Assembler); }
inline std::string nvJitLink() { return getString(Knob::NvJitLink); }
inline std::string dumpDir() { return getString(Knob::DumpDir); }
inline std::string cublas() { return getString(Knob::Cublas); }
inline bool checkOffsets() { return getBool(Knob::CheckOffsets); }
inline std::optional<bool> longSweep() { return getTriState(Knob::LongSweep); }
inline bool registerA() { return getBool(Knob::RegisterA); }
inline bool fusedBackward() { return getBool(Knob::FusedBackward); }
inline bool padInKernel() { return getBool(Knob::PadInKernel); }
inline std::string tiles() { return getString(Knob::Tiles); }
} // namespace knobs

} // namespace flashbob::support
