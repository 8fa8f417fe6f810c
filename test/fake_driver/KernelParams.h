// The parameters of each kernel in a module image, as the fake CUDA driver learns them (the real
// driver reads the same facts from the image): from a cubin, the KPARAM_INFO attributes of its
// .nv.info.<kernel> sections; from PTX, the .param declarations of each .entry. This is what lets
// the fake answer cuFuncGetParamInfo and check the kernelParams of a launch.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fake_cuda {

struct Param {
  size_t offset = 0, size = 0;
};

// kernel name -> its parameters in order; nothing when the image is neither a 64-bit ELF
// cubin nor PTX text, or does not parse.
std::optional<std::map<std::string, std::vector<Param>>> readKernelParams(const void *image);

} // namespace fake_cuda
