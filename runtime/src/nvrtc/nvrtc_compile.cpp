#include "nvrtc/nvrtc_compile.h"

#include <chrono>

#include "core/error.h"
#include "core/log.h"

namespace cc1d {

namespace {

constexpr size_t kMaxLogChars = 16000;  // keep a runaway log from flooding the error message

// Destroys the program on every path out of compile_kernel.
struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog != nullptr) api.nvrtcDestroyProgram(&prog);
  }
};

std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(prog, &size) != kNvrtcSuccess || size <= 1) return "";
  std::string log(size, '\0');
  if (api.nvrtcGetProgramLog(prog, &log[0]) != kNvrtcSuccess) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (log.size() > kMaxLogChars) log = log.substr(0, kMaxLogChars) + "\n... (log truncated)";
  return log;
}

}  // namespace

std::string nvrtc_target(CodeKind kind, int arch) {
  return (kind == CodeKind::Cubin ? "sm_" : "compute_") + std::to_string(arch);
}

std::vector<std::string> nvrtc_options(CodeKind kind, int arch, const NvrtcFacts& nvrtc) {
  std::vector<std::string> opts = {"-arch=" + nvrtc_target(kind, arch), "-std=c++17", "--use_fast_math"};
  if (nvrtc.major > 12 || (nvrtc.major == 12 && nvrtc.minor >= 4)) opts.push_back("--minimal");
  return opts;
}

CompiledProgram compile_kernels(const NvrtcLib& nvrtc, const KernelSources& src, const std::vector<std::string>& names,
                                CodeKind kind, int arch) {
  const NvrtcApi& api = nvrtc.api;
  nvrtc.load_builtins();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string who = "NVRTC " + nvrtc.facts.version_string() + " (" + nvrtc.facts.path + ")";
  std::string what = names.empty() ? std::string("no kernel") : names[0];
  if (names.size() > 1) what += " and " + std::to_string(names.size() - 1) + " other variant(s)";
  auto check = [&](nvrtcResult r, const char* step) {
    if (r != kNvrtcSuccess)
      fail(CC1D_ERR_INTERNAL, who + ": " + step + " failed for " + what + ": " + nvrtc.error_string(r));
  };
  if (names.empty()) fail(CC1D_ERR_INTERNAL, who + ": asked to compile no kernel");

  std::vector<const char*> header_data, header_names;
  for (size_t i = 0; i < src.header_names.size(); ++i) {
    header_data.push_back(src.header_sources[i].c_str());
    header_names.push_back(src.header_names[i].c_str());
  }
  ProgramGuard guard{api};
  check(api.nvrtcCreateProgram(&guard.prog, src.main_source.c_str(), src.main_name.c_str(),
                               (int)header_data.size(), header_data.data(), header_names.data()),
        "nvrtcCreateProgram");
  for (const std::string& name : names) check(api.nvrtcAddNameExpression(guard.prog, name.c_str()), "nvrtcAddNameExpression");

  const std::vector<std::string> opts = nvrtc_options(kind, arch, nvrtc.facts);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc = api.nvrtcCompileProgram(guard.prog, (int)argv.size(), argv.data());
  if (rc != kNvrtcSuccess) {
    std::string log = program_log(api, guard.prog);
    // NVRTC_ERROR_BUILTIN_OPERATION_FAILURE: NVRTC itself is incomplete, not the source.
    const std::string builtins = "libnvrtc-builtins.so." + nvrtc.facts.version_string();
    const std::string advice =
        rc == kNvrtcBuiltinFailure
            ? "NVRTC could not use its builtins library (" + builtins + "), which belongs beside " +
                  nvrtc.facts.path + ": reinstall that NVRTC (pip install '" + nvrtc_wheel(nvrtc.facts.major) + "==" +
                  nvrtc.facts.version_string() + ".*', or the CUDA toolkit), add the directory holding " + builtins +
                  " to LD_LIBRARY_PATH, or set CAUSAL_CONV1D_NVRTC to another libnvrtc."
            : "Fix the kernel source (or unset CAUSAL_CONV1D_KERNEL_DIR to use the built-in kernels); if the "
              "built-in kernels fail, please report it with this message.";
    fail(CC1D_ERR_COMPILE, who + " could not compile " + what + " for " + nvrtc_target(kind, arch) +
                               " from kernel sources '" + src.origin + "' (" + nvrtc.error_string(rc) + "):\n" +
                               (log.empty() ? std::string("(no compile log)") : log) + "\n" + advice);
  }

  CompiledProgram out;
  out.target = nvrtc_target(kind, arch);
  for (const std::string& name : names) {
    const char* lowered = nullptr;
    check(api.nvrtcGetLoweredName(guard.prog, name.c_str(), &lowered), "nvrtcGetLoweredName");
    if (lowered == nullptr) fail(CC1D_ERR_INTERNAL, who + " returned no lowered name for " + name);
    out.lowered_names.push_back(lowered);
  }
  size_t size = 0;
  if (kind == CodeKind::Cubin) {
    check(api.nvrtcGetCUBINSize(guard.prog, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check(api.nvrtcGetCUBIN(guard.prog, &out.image[0]), "nvrtcGetCUBIN");
  } else {
    check(api.nvrtcGetPTXSize(guard.prog, &size), "nvrtcGetPTXSize");
    out.image.resize(size);  // includes the terminating NUL cuModuleLoadData needs
    check(api.nvrtcGetPTX(guard.prog, &out.image[0]), "nvrtcGetPTX");
  }
  if (out.image.empty()) fail(CC1D_ERR_INTERNAL, who + " produced an empty image for " + what);
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  log_line(CC1D_LOG_INFO, "compiled {} for {} ({}) with NVRTC {} ({}) in {} ms", what, nvrtc_target(kind, arch),
           code_kind_name(kind), nvrtc.facts.version_string(), nvrtc.facts.path, Fixed{out.ms, 1});
  return out;
}

CompiledImage compile_kernel(const NvrtcLib& nvrtc, const KernelSources& src, const std::string& name, CodeKind kind,
                             int arch) {
  CompiledProgram p = compile_kernels(nvrtc, src, {name}, kind, arch);
  CompiledImage out;
  out.image = std::move(p.image);
  out.lowered_name = std::move(p.lowered_names[0]);
  out.target = std::move(p.target);
  out.ms = p.ms;
  return out;
}

}  // namespace cc1d
