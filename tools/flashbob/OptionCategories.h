// The option categories of `flashbob`. Every flag of ours is in one of them; main hides every
// option outside them, so `--help` lists FlashBoB's flags and not the hundreds that the linked
// LLVM backends register (AMDGPU, ARM, ...).
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"

namespace flashbob::tool {

extern llvm::cl::OptionCategory problemCategory; // run, tune, bench: the problem
extern llvm::cl::OptionCategory measureCategory; // run, tune, bench: timing and the check
extern llvm::cl::OptionCategory runCategory;
extern llvm::cl::OptionCategory benchCategory;
extern llvm::cl::OptionCategory specCategory;    // compile: the kernel spec
extern llvm::cl::OptionCategory compileCategory;
extern llvm::cl::OptionCategory demoCategory;
extern llvm::cl::OptionCategory cacheCategory;

// All of the above, for cl::HideUnrelatedOptions.
llvm::ArrayRef<const llvm::cl::OptionCategory *> toolCategories();

} // namespace flashbob::tool
