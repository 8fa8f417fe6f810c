// The specialization of one kernel variant, as plain C++ (what the CLI, the runtime's cache key
// and the autotuner handle). `toAttr` gives the dialect's #bob.spec; the dialect's verifier is
// the single source of truth for what is supported, so `validate` asks it.
#pragma once

#include "compiler/dialect/BobDialect.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace flashbob::compiler {

struct KernelSpec {
  bob::KernelKind kind = bob::KernelKind::fwd;
  int64_t headDim = 64;
  int64_t blockM = 64;
  int64_t blockN = 64;
  int64_t warps = 4;
  int64_t warpCols = 1; // column groups the warps form (#bob.spec warp_cols)
  int64_t stages = 1;
  bool producer = false; // a producer warpgroup issues the loop's TMA loads (#bob.spec producer)
  bob::ElemType dtype = bob::ElemType::bf16;
  bool causal = false;
  std::optional<double> scale; // default 1/sqrt(head_dim)
  std::string arch = "sm_90a";

  double effectiveScale() const;
  // Stable text naming every field, e.g. "fwd_d64_m64_n64_w4_s1_bf16_causal_sc3e000000_sm_90a"
  // (scale as float32 bits; "w8c2" for 8 warps in 2 column groups, "w4p" for 4 consumer warps
  // and a producer warpgroup):
  // the kernel's symbol and part of the cache key.
  std::string name() const;
  bob::SpecAttr toAttr(mlir::MLIRContext *ctx) const;
};

// Checks the spec with the dialect's verifier; the error is one line naming the field.
llvm::Error validate(const KernelSpec &spec, mlir::MLIRContext *ctx);

std::optional<bob::KernelKind> parseKind(llvm::StringRef text);
std::optional<bob::ElemType> parseDtype(llvm::StringRef text); // bf16, fp16 (or f16)

} // namespace flashbob::compiler
