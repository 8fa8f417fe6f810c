#include "compiler/pipeline/NvJitLink.h"

#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/LibraryFile.h"

#define NVJITLINK_NO_INLINE // we call through dlsym'd pointers, not the header's wrappers
#include <nvJitLink.h>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <type_traits>
#include <vector>

namespace flashbob::compiler {

namespace {
llvm::Error fail(const llvm::Twine &what) { return support::makeCompileError("nvJitLink", what); }

// The entry points we use. The library exports them unversioned (nvJitLinkCreate) besides the
// versioned names the header's inline wrappers call (__nvJitLinkCreate_13_0), so one build
// works with every library version that keeps these signatures.
struct Api {
  nvJitLinkResult (*create)(nvJitLinkHandle *, uint32_t, const char **) = nullptr;
  nvJitLinkResult (*destroy)(nvJitLinkHandle *) = nullptr;
  nvJitLinkResult (*addData)(nvJitLinkHandle, nvJitLinkInputType, const void *, size_t,
                             const char *) = nullptr;
  nvJitLinkResult (*complete)(nvJitLinkHandle) = nullptr;
  nvJitLinkResult (*cubinSize)(nvJitLinkHandle, size_t *) = nullptr;
  nvJitLinkResult (*cubin)(nvJitLinkHandle, void *) = nullptr;
  nvJitLinkResult (*errorLogSize)(nvJitLinkHandle, size_t *) = nullptr;
  nvJitLinkResult (*errorLog)(nvJitLinkHandle, char *) = nullptr;
  nvJitLinkResult (*infoLogSize)(nvJitLinkHandle, size_t *) = nullptr;
  nvJitLinkResult (*infoLog)(nvJitLinkHandle, char *) = nullptr;
  nvJitLinkResult (*version)(unsigned *, unsigned *) = nullptr;
  std::string identity;
};

// The files to try, each with the knob that named it (none for the defaults).
std::vector<std::pair<std::string, std::optional<support::Knob>>> candidates() {
  if (std::string forced = support::knobs::nvJitLink(); !forced.empty())
    return {{forced, support::Knob::NvJitLink}};
  std::vector<std::pair<std::string, std::optional<support::Knob>>> out = {
      {"libnvJitLink.so.13", std::nullopt}};
  for (const std::string &root : cudaToolkitRoots()) {
    llvm::SmallString<256> path(root);
    llvm::sys::path::append(path, "lib64", "libnvJitLink.so.13");
    out.push_back({std::string(path), std::nullopt});
  }
  return out;
}

// The library, loaded on first use; `failure` says what was tried when none loads.
struct Loaded {
  std::optional<Api> api;
  std::string failure;
};

Loaded load() {
  std::string tried;
  for (const auto &[path, knob] : candidates()) {
    if (llvm::Error e = support::checkLibraryFile(path, knob)) {
      tried += "\n  " + llvm::toString(std::move(e));
      continue;
    }
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      tried += "\n  " + path + ": " + dlerror();
      continue;
    }
    Api a;
    bool complete = true;
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      complete &= fn != nullptr;
    };
    bind(a.create, "nvJitLinkCreate");
    bind(a.destroy, "nvJitLinkDestroy");
    bind(a.addData, "nvJitLinkAddData");
    bind(a.complete, "nvJitLinkComplete");
    bind(a.cubinSize, "nvJitLinkGetLinkedCubinSize");
    bind(a.cubin, "nvJitLinkGetLinkedCubin");
    bind(a.errorLogSize, "nvJitLinkGetErrorLogSize");
    bind(a.errorLog, "nvJitLinkGetErrorLog");
    bind(a.infoLogSize, "nvJitLinkGetInfoLogSize");
    bind(a.infoLog, "nvJitLinkGetInfoLog");
    bind(a.version, "nvJitLinkVersion");
    if (!complete) {
      tried += "\n  " + path + ": an nvJitLink entry point is missing";
      dlclose(lib);
      continue;
    }
    unsigned major = 0, minor = 0;
    a.version(&major, &minor);
    a.identity = llvm::formatv("nvJitLink {0}.{1} ({2})", major, minor, path).str();
    return {a, ""}; // kept loaded for the process
  }
  return {std::nullopt, "no nvJitLink library could be loaded (set FLASHBOB_NVJITLINK); tried:" +
                            tried};
}

llvm::Expected<const Api *> api() {
  static const Loaded loaded = load();
  if (!loaded.api)
    return fail(loaded.failure);
  return &*loaded.api;
}
} // namespace

llvm::Expected<std::string> nvJitLinkIdentity() {
  auto a = api();
  if (!a)
    return a.takeError();
  return (*a)->identity;
}

llvm::Expected<Cubin> assembleWithNvJitLink(const std::string &ptx, const std::string &arch) {
  auto loaded = api();
  if (!loaded)
    return loaded.takeError();
  const Api &a = **loaded;
  const std::string archFlag = "-arch=" + arch;
  const char *options[] = {archFlag.c_str(), "-O3", "-verbose"};
  nvJitLinkHandle handle = nullptr;
  if (nvJitLinkResult r = a.create(&handle, 3, options); r != NVJITLINK_SUCCESS)
    return fail(llvm::formatv("nvJitLinkCreate({0} -O3 -verbose): error {1}", archFlag, int(r)));
  auto log = [&](auto sizeFn, auto logFn) {
    size_t size = 0;
    if (sizeFn(handle, &size) != NVJITLINK_SUCCESS || size == 0)
      return std::string();
    std::string text(size, '\0');
    if (logFn(handle, text.data()) != NVJITLINK_SUCCESS)
      return std::string();
    text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
    return text;
  };
  Cubin out;
  llvm::Error error = llvm::Error::success();
  if (nvJitLinkResult r = a.addData(handle, NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), "kernel");
      r != NVJITLINK_SUCCESS)
    error = fail(llvm::formatv("nvJitLinkAddData: error {0}:\n{1}", int(r),
                               log(a.errorLogSize, a.errorLog)));
  else if (nvJitLinkResult r = a.complete(handle); r != NVJITLINK_SUCCESS)
    error = fail(llvm::formatv("nvJitLinkComplete: error {0}:\n{1}", int(r),
                               log(a.errorLogSize, a.errorLog)));
  else {
    size_t size = 0;
    if (nvJitLinkResult r = a.cubinSize(handle, &size); r != NVJITLINK_SUCCESS || size == 0)
      error = fail(llvm::formatv("nvJitLinkGetLinkedCubinSize: error {0}", int(r)));
    else {
      out.binary.resize(size);
      if (nvJitLinkResult r2 = a.cubin(handle, out.binary.data()); r2 != NVJITLINK_SUCCESS)
        error = fail(llvm::formatv("nvJitLinkGetLinkedCubin: error {0}", int(r2)));
    }
    out.log = log(a.infoLogSize, a.infoLog);
  }
  a.destroy(&handle);
  if (error)
    return std::move(error);
  parsePtxasReport(out);
  return out;
}

} // namespace flashbob::compiler
