// The real NVRTC on this machine compiles the real kernels: every variant of every op for sm_90
// (the "all variants" case, ctest test_nvrtc_compile_all, label slow); a representative set
// (every path, the vector paths with every x dtype and widths 1 and 8) for every SM that NVRTC
// reports, and the backward's layouts for its lowest SM, sm_80 and its newest (the fast test_nvrtc_compile),
// each cubin's ELF header naming the SM it was built for. Variants are compiled several to a
// program, as NVRTC allows (one front-end pass). Also PTX mode.
// When no NVRTC exists at all, main() says so and exits 77, which ctest reports as skipped
// (CC1D_REQUIRE_NVRTC=1 turns that into a failure).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nvrtc/nvrtc_compile.h"
#include "nvrtc/cubin_elf.h"
#include "core/error.h"
#include "kernels_src/bwd_params.h"
#include "kernels_src/fwd_params.h"
#include "ops/bwd/bwd_kernels.h"
#include "ops/fwd/fwd_op.h"
#include "ops/update/update_kernels.h"
#include "ops/varlen/varlen_kernels.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_lib.h"

using namespace cc1d;

namespace {

// The NVRTC the runtime would choose with no torch preference and a driver of
// CC1D_TEST_DRIVER_VERSION (default: unlimited; 12080 makes a CUDA 13 NVRTC ineligible).
std::shared_ptr<NvrtcLib> find_nvrtc() {
  static std::shared_ptr<NvrtcLib> lib = [] {
    const auto cands = discover_nvrtc(default_nvrtc_search());
    std::vector<NvrtcFacts> facts;
    for (const auto& c : cands) facts.push_back(c.facts);
    const char* driver = std::getenv("CC1D_TEST_DRIVER_VERSION");
    const NvrtcChoice ch = choose_nvrtc(facts, driver != nullptr ? std::atoi(driver) : 99000, 90, 0);
    return ch.ok ? cands[ch.index].lib : nullptr;
  }();
  return lib;
}

bool have_nvrtc() { return find_nvrtc() != nullptr; }

// One NVRTC program: several variants of one op for one target.
struct Job {
  std::vector<std::string> names;
  int arch;
  CodeKind kind;
};

struct Outcome {
  CompiledProgram program;
  std::string error;
};

// Compiles every job on `threads` threads; returns outcomes in job order.
std::vector<Outcome> compile_all(const std::vector<Job>& jobs, int threads, double* wall_ms) {
  const NvrtcLib& nvrtc = *find_nvrtc();
  const KernelSources all = load_kernel_sources();
  std::vector<KernelSources> src;  // each job's op's sources, as the runtime compiles them
  for (const Job& j : jobs) src.push_back(kernel_sources_of(all, j.names[0]));
  std::vector<Outcome> out(jobs.size());
  std::atomic<size_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < jobs.size();) {
        try {
          out[i].program = compile_kernels(nvrtc, src[i], jobs[i].names, jobs[i].kind, jobs[i].arch);
        } catch (const std::exception& e) {
          out[i].error = e.what();
        }
      }
    });
  for (auto& th : pool) th.join();
  *wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

// Jobs of at most `per_program` names of one op each, for one target.
std::vector<Job> programs(const std::vector<std::string>& names, int arch, size_t per_program) {
  std::vector<Job> jobs;
  const OpEntry* last = nullptr;
  for (const std::string& n : names) {
    const OpEntry* op = find_kernel_op(n);
    REQUIRE_MESSAGE(op != nullptr, n);
    if (op != last || jobs.back().names.size() == per_program) jobs.push_back({{}, arch, CodeKind::Cubin});
    jobs.back().names.push_back(n);
    last = op;
  }
  return jobs;
}

// Every cubin names its SM and holds each variant's entry point; returns the lowered names.
std::set<std::string> check_cubins(const std::vector<Job>& jobs, const std::vector<Outcome>& out) {
  std::set<std::string> lowered;
  for (size_t i = 0; i < jobs.size(); ++i) {
    INFO(jobs[i].names.front() << " (+" << jobs[i].names.size() - 1 << ") for sm_" << jobs[i].arch);
    REQUIRE_MESSAGE(out[i].error.empty(), out[i].error);
    const CompiledProgram& p = out[i].program;
    CHECK(cubin_sm(p.image.data(), p.image.size()) == jobs[i].arch);
    REQUIRE(p.lowered_names.size() == jobs[i].names.size());
    for (const std::string& l : p.lowered_names) {
      CHECK(l.rfind("_ZN4cc1d", 0) == 0);
      CHECK(p.image.find(l) != std::string::npos);  // the symbol is in the cubin
      lowered.insert(l);
    }
  }
  return lowered;
}

void print_timing(const char* what, const std::vector<Job>& jobs, double wall, const std::vector<Outcome>& out) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < jobs.size(); ++i) sum += out[i].program.ms, n += jobs[i].names.size();
  std::printf("[test_nvrtc_compile] %s: %zu variants in %zu programs, %.1f s wall (2 threads), %.0f ms per variant\n",
              what, n, jobs.size(), wall / 1000, sum / std::max<size_t>(n, 1));
}

}  // namespace

TEST_CASE("every kernel of every op compiles to an sm_90 cubin") {
  REQUIRE(have_nvrtc());
  std::vector<std::string> names;
  for (const OpEntry* op : all_ops())
    if (op->kernels != nullptr)
      for (const std::string& n : op->kernels()) names.push_back(n);
  CHECK(names.size() >= 9 * CC1D_MAX_WIDTH * kFwdNumPaths);
  const std::vector<Job> jobs = programs(names, 90, 24);
  double wall = 0;
  const auto out = compile_all(jobs, 2, &wall);
  CHECK(check_cubins(jobs, out).size() == names.size());  // each name expression is its own kernel
  print_timing("all variants, sm_90", jobs, wall, out);
}

TEST_CASE("a representative set compiles for every SM the NVRTC supports") {
  REQUIRE(have_nvrtc());
  const NvrtcLib& nvrtc = *find_nvrtc();
  MESSAGE("NVRTC " << nvrtc.facts.version_string() << " at " << nvrtc.facts.path << ", " << nvrtc.facts.archs.size() << " SMs");
  CHECK_FALSE(nvrtc.facts.archs.empty());
  // Every path (bf16, width 4); the vector paths also with the other dtypes and widths 1 and 8;
  // the update and varlen-states kernels likewise. Every variant compiles for sm_90 in the case above.
  std::vector<std::string> names;
  for (int path = 0; path < kFwdNumPaths; ++path) names.push_back(fwd_kernel_name(CC1D_BFLOAT16, CC1D_BFLOAT16, 4, path));
  for (int path : {kFwdPathTimeVecSilu, kFwdPathChannelVecSilu}) {
    names.push_back(fwd_kernel_name(CC1D_FLOAT32, CC1D_FLOAT16, 1, path));
    names.push_back(fwd_kernel_name(CC1D_FLOAT16, CC1D_FLOAT32, 8, path));
  }
  names.push_back(update_kernel_name(CC1D_BFLOAT16, CC1D_BFLOAT16, 4));
  names.push_back(update_kernel_name(CC1D_FLOAT32, CC1D_BFLOAT16, 8));
  names.push_back(varlen_kernel_name(CC1D_BFLOAT16, true));  // the varlen states: both paths
  names.push_back(varlen_kernel_name(CC1D_FLOAT32, false));
  std::vector<Job> jobs;  // a program per op and SM
  for (int arch : nvrtc.facts.archs)
    for (const Job& j : programs(names, arch, names.size())) jobs.push_back(j);
  double wall = 0;
  const auto out = compile_all(jobs, 2, &wall);
  check_cubins(jobs, out);
  print_timing("representative set, every SM", jobs, wall, out);
}

// The backward's kernels are the largest, and their cp.async copies and hardware conversions
// exist from sm_80 on only: below it they take other code, which the all-variants case (sm_90)
// never compiles. Every layout (bf16, width 4, and two other dtype pairs and widths on the vector
// paths) for the lowest SM the NVRTC supports, sm_80 and its newest SM, a program per SM.
TEST_CASE("the backward's layouts compile for the lowest SM, sm_80 and the newest") {
  REQUIRE(have_nvrtc());
  std::vector<std::string> names;
  for (int layout = 0; layout < kBwdNumLayouts; ++layout)
    names.push_back(bwd_kernel_name(CC1D_BFLOAT16, CC1D_BFLOAT16, 4, layout));
  names.push_back(bwd_kernel_name(CC1D_FLOAT32, CC1D_FLOAT16, 3, kBwdLayoutTimeVec));
  names.push_back(bwd_kernel_name(CC1D_FLOAT16, CC1D_FLOAT32, 2, kBwdLayoutChannelVec));
  names.push_back(bwd_finalize_kernel_name(CC1D_BFLOAT16));
  names.push_back(kBwdZeroKernel);
  const std::vector<int>& archs = find_nvrtc()->facts.archs;
  REQUIRE_FALSE(archs.empty());
  std::set<int> targets = {archs.front(), archs.back()};
  if (archs.front() < 80) targets.insert(80);
  std::vector<Job> jobs;
  for (int arch : targets)
    for (const Job& j : programs(names, arch, names.size())) jobs.push_back(j);
  double wall = 0;
  const auto out = compile_all(jobs, 2, &wall);
  check_cubins(jobs, out);
  print_timing("the backward, lowest SM, sm_80 and newest", jobs, wall, out);
}

TEST_CASE("PTX mode: compute_XY text with the target and the entry point") {
  REQUIRE(have_nvrtc());
  const int lowest = find_nvrtc()->facts.archs.front();
  const std::vector<Job> jobs = {{{fwd_kernel_name(CC1D_BFLOAT16, CC1D_FLOAT32, 4, kFwdPathTime)}, lowest, CodeKind::Ptx},
                                 {{fwd_kernel_name(CC1D_FLOAT32, CC1D_FLOAT16, 3, kFwdPathChannelVecSilu)}, 90, CodeKind::Ptx}};
  double wall = 0;
  const auto out = compile_all(jobs, 2, &wall);
  for (size_t i = 0; i < jobs.size(); ++i) {
    REQUIRE_MESSAGE(out[i].error.empty(), out[i].error);
    const CompiledProgram& k = out[i].program;
    CHECK(k.target == "compute_" + std::to_string(jobs[i].arch));
    CHECK(looks_like_ptx(k.image.data(), k.image.size()));
    CHECK(cubin_sm(k.image.data(), k.image.size()) == -1);
    CHECK(k.image.find(".target sm_" + std::to_string(jobs[i].arch)) != std::string::npos);
    CHECK(k.image.find(".entry " + k.lowered_names[0]) != std::string::npos);
    CHECK(k.image.back() == '\0');  // cuModuleLoadData reads PTX as a C string
  }
}

TEST_CASE("--minimal goes to NVRTC 12.4 and later only") {
  NvrtcFacts f;
  f.major = 12, f.minor = 3;
  const auto has_minimal = [](const std::vector<std::string>& o) {
    return std::find(o.begin(), o.end(), "--minimal") != o.end();
  };
  CHECK_FALSE(has_minimal(nvrtc_options(CodeKind::Cubin, 90, f)));
  f.minor = 4;
  CHECK(has_minimal(nvrtc_options(CodeKind::Cubin, 90, f)));
  f.major = 13, f.minor = 0;
  CHECK(has_minimal(nvrtc_options(CodeKind::Ptx, 90, f)));
}

TEST_CASE("a syntax error is CC1D_ERR_COMPILE with NVRTC's log") {
  REQUIRE(have_nvrtc());
  KernelSources src = load_kernel_sources();
  src.main_source += "\nint broken_here = ;\n";
  try {
    compile_kernel(*find_nvrtc(), src, "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>", CodeKind::Cubin, 90);
    FAIL("expected a compile error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(e.status() == CC1D_ERR_COMPILE);
    CHECK(m.find("causal_conv1d.cu(") != std::string::npos);  // file(line) from the log
    CHECK(m.find("error") != std::string::npos);
    CHECK(m.find("sm_90") != std::string::npos);
    CHECK(m.find("CAUSAL_CONV1D_KERNEL_DIR") != std::string::npos);
  }
  // An unknown name expression is an error too, not a silent empty kernel.
  CHECK_THROWS_AS(compile_kernel(*find_nvrtc(), load_kernel_sources(), "cc1d::no_such_kernel<int>", CodeKind::Cubin, 90),
                  Error);
}

// The libnvrtc-builtins files this process has mapped.
std::vector<std::string> loaded_builtins() {
  std::vector<std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.find("/libnvrtc-builtins.so") != std::string::npos)
          static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
      },
      &out);
  return out;
}

// Its own ctest (test_nvrtc_compile.builtins): it needs a process where no NVRTC has compiled.
// The toolkit's libnvrtc has no RPATH, like the CUDA 13.0 x86-64 wheel's, so without the preload
// the copy's builtins would come from the loader's search (the toolkit's, or nothing).
TEST_CASE("NVRTC's builtins come from beside the libnvrtc in use") {
  REQUIRE(have_nvrtc());
  REQUIRE_MESSAGE(loaded_builtins().empty(), "run this case in a process of its own");
  const NvrtcFacts& f = find_nvrtc()->facts;
  const std::string from = real_path(f.path), name = "libnvrtc-builtins.so." + f.version_string();
  const std::string builtins = from.substr(0, from.rfind('/') + 1) + name;
  REQUIRE_MESSAGE(std::filesystem::exists(builtins), builtins << " is not beside " << from);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("cc1d_builtins_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(from, dir / "libnvrtc.so.copy");  // another file: loaded apart from the original
  std::filesystem::copy_file(builtins, dir / name);
  const NvrtcCandidate copy = probe_nvrtc((dir / "libnvrtc.so.copy").string(), "test");
  REQUIRE_MESSAGE(copy.lib != nullptr, copy.facts.load_error);
  const CompiledImage k = compile_kernel(*copy.lib, load_kernel_sources(),
                                         fwd_kernel_name(CC1D_FLOAT32, CC1D_FLOAT32, 4, kFwdPathTime), CodeKind::Ptx,
                                         copy.lib->facts.archs.front());
  CHECK(looks_like_ptx(k.image.data(), k.image.size()));
  std::string loaded;
  for (const std::string& b : loaded_builtins()) loaded += b + " ";
  CHECK_MESSAGE(loaded == (dir / name).string() + " ", "loaded: " << loaded);
  std::filesystem::remove_all(dir);  // the mappings stay valid
}

int main(int argc, char** argv) {
  if (!have_nvrtc()) {
    const char* req = std::getenv("CC1D_REQUIRE_NVRTC");
    std::printf("SKIPPED: no usable NVRTC found (searched CAUSAL_CONV1D_NVRTC, loaded libraries, "
                "CAUSAL_CONV1D_NVRTC_SEARCH_PATH, CUDA_HOME, CUDA_PATH, /usr/local/cuda, sonames)\n");
    return req != nullptr && std::string(req) == "1" ? 1 : 77;
  }
  // CC1D_TEST_NVRTC_MAJOR: the run is meant for one NVRTC major (the NVRTC 12 wheel, say); any
  // other is a failure, not a quiet pass with another compiler.
  const char* major = std::getenv("CC1D_TEST_NVRTC_MAJOR");
  std::printf("NVRTC %s (%s)\n", find_nvrtc()->facts.version_string().c_str(), find_nvrtc()->facts.path.c_str());
  if (major != nullptr && find_nvrtc()->facts.major != std::atoi(major)) {
    std::printf("FAILED: CC1D_TEST_NVRTC_MAJOR=%s but NVRTC %s was chosen\n", major,
                find_nvrtc()->facts.version_string().c_str());
    return 1;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
