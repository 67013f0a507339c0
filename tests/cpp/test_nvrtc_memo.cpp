// The NVRTC facts memo (nvrtc_memo.h) over copies of the fake libnvrtc files: a discovery that
// finds a file it remembers does not load it, a changed file is asked again, a memo that lies is
// caught when the library is loaded, and a damaged or untrusted memo is ignored. Whether a file
// was loaded is read from /proc/self/maps, so each copy is loaded first in a forked child.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "cache_test_util.h"
#include "core/error.h"
#include "jit/cache_fs.h"
#include "nvrtc/nvrtc_lib.h"
#include "nvrtc/nvrtc_memo.h"

using namespace cc1d;
using namespace cache_test;

namespace {

const std::string kTree = CC1D_FAKE_TREE;

bool has(const std::string& s, const std::string& frag) { return s.find(frag) != std::string::npos; }

bool mapped(const std::string& path) { return has(slurp("/proc/self/maps"), path); }

// A discovery with the memo in `dir`, in a child process (this one keeps nothing loaded); true
// when `ok` holds of what it found.
bool discover_in_child(const NvrtcSearchConfig& search, const std::string& dir,
                       const std::function<bool(const std::vector<NvrtcCandidate>&)>& ok) {
  const pid_t pid = fork();
  if (pid == 0) {
    NvrtcMemo memo(dir);
    _exit(ok(discover_nvrtc(search, nullptr, &memo)) ? 0 : 1);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A fresh copy of two fake NVRTCs (13.0 and 12.4), so no earlier test has loaded them, and a
// search of that directory alone.
struct Copies {
  std::string dir = fresh_dir("lib"), memo_dir = fresh_dir("cache");
  std::string v13 = dir + "/libnvrtc.so.13", v12 = dir + "/libnvrtc.so.12";
  Copies() {
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(kTree + "/site/nvidia/cu13/lib/libnvrtc.so.13", v13);
    std::filesystem::copy_file(kTree + "/site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", v12);
  }
  NvrtcSearchConfig search() const {
    NvrtcSearchConfig c;
    c.toolkit_dirs = {{"test", dir}};
    return c;
  }
  std::string memo_file() const { return memo_dir + "/" + NvrtcMemo::kFileName; }
  // The first discovery, which loads both.
  bool discover_in_child() const {
    return ::discover_in_child(search(), memo_dir, [](const auto& c) { return c.size() == 2 && c[0].lib && c[1].lib; });
  }
};

}  // namespace

TEST_CASE("the memo's file is one that `cache clear` removes") { CHECK(is_facts_file(NvrtcMemo::kFileName)); }

TEST_CASE("a remembered NVRTC is not loaded by discovery, and loads as remembered on its first use") {
  Copies c;
  REQUIRE(c.discover_in_child());
  const std::string memo = slurp(c.memo_file());
  CHECK(memo.rfind("cc1d nvrtc facts 1\n", 0) == 0);
  CHECK(has(memo, c.v13));
  CHECK(has(memo, "\t13.0\t75,80,86,87,88,89,90,100,103,110,120,121\n"));
  CHECK(has(memo, "\t12.4\t50,60,70,75,80,86,89,90\n"));
  struct stat st {};
  REQUIRE(stat(c.memo_file().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  NvrtcMemo m(c.memo_dir);
  const auto cands = discover_nvrtc(c.search(), nullptr, &m);
  REQUIRE(cands.size() == 2);
  CHECK(cands[0].facts.path == c.v13);
  CHECK(cands[0].facts.origin == "test");
  CHECK(cands[0].facts.version_string() == "13.0");
  CHECK(cands[0].facts.archs == std::vector<int>{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121});
  CHECK(cands[1].facts.version_string() == "12.4");
  CHECK(cands[0].facts.load_error.empty());
  CHECK_FALSE(cands[0].lib);
  CHECK_FALSE(cands[1].lib);
  CHECK_FALSE(mapped(c.v13));
  CHECK_FALSE(mapped(c.v12));

  const std::shared_ptr<NvrtcLib> lib = load_nvrtc(cands[0]);
  REQUIRE(lib);
  CHECK(lib->facts.version_string() == "13.0");
  CHECK(static_cast<bool>(lib->api.nvrtcCompileProgram));
  CHECK(mapped(c.v13));
  CHECK_FALSE(mapped(c.v12));
}

TEST_CASE("a file changed since it was remembered is asked again") {
  Copies c;
  REQUIRE(c.discover_in_child());
  const timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 5}};  // a new mtime: a new identity
  REQUIRE(utimensat(AT_FDCWD, c.v12.c_str(), times, 0) == 0);
  NvrtcMemo m(c.memo_dir);
  const auto cands = discover_nvrtc(c.search(), nullptr, &m);
  REQUIRE(cands.size() == 2);
  CHECK_FALSE(cands[0].lib);  // 13: unchanged
  CHECK(cands[1].lib);        // 12: loaded and asked
  CHECK(cands[1].facts.version_string() == "12.4");
  CHECK(has(slurp(c.memo_file()), "1700000000.5"));  // and remembered under its new identity
}

TEST_CASE("a memo whose facts the library contradicts is caught when the library loads") {
  Copies c;
  REQUIRE(c.discover_in_child());
  std::string memo = slurp(c.memo_file());
  const size_t at = memo.find("\t13.0\t");
  REQUIRE(at != std::string::npos);
  memo.replace(at, 6, "\t13.9\t");
  spit(c.memo_file(), memo);
  NvrtcMemo m(c.memo_dir);
  const auto cands = discover_nvrtc(c.search(), nullptr, &m);
  REQUIRE(cands.size() == 2);
  CHECK(cands[0].facts.version_string() == "13.9");  // the memo is believed until the load
  try {
    load_nvrtc(cands[0]);
    FAIL("expected the load to refuse the memo's facts");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(e.status() == CC1D_ERR_BACKEND_UNAVAILABLE);
    CHECK(has(msg, c.v13));
    CHECK(has(msg, "it is now NVRTC 13.0"));
    CHECK(has(msg, NvrtcMemo::kFileName));
    CHECK(has(msg, "Run `causal-conv1d cache clear` (or delete that file)"));
  }
}

TEST_CASE("a damaged, foreign or untrusted memo is ignored, and rewritten") {
  Copies c;
  REQUIRE(c.discover_in_child());
  const std::string good = slurp(c.memo_file());
  SUBCASE("another format") { spit(c.memo_file(), "cc1d nvrtc facts 0\n" + good.substr(good.find('\n') + 1)); }
  SUBCASE("damaged lines") {
    std::string bad = good;
    for (char& ch : bad)
      if (ch == ',') ch = ';';  // archs that do not parse
    spit(c.memo_file(), bad + "F\tonly two\n\x01\x02\n");
  }
  SUBCASE("writable by others") { REQUIRE(chmod(c.memo_file().c_str(), 0666) == 0); }
  NvrtcMemo m(c.memo_dir);
  const auto cands = discover_nvrtc(c.search(), nullptr, &m);
  REQUIRE(cands.size() == 2);
  CHECK(cands[0].lib);  // asked, not believed
  CHECK(cands[1].lib);
  CHECK(cands[0].facts.version_string() == "13.0");
  CHECK(slurp(c.memo_file()) == good);  // rewritten from what the libraries said
  struct stat st {};
  REQUIRE(stat(c.memo_file().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("without a memo directory nothing is kept, and every library is loaded") {
  Copies c;
  NvrtcMemo m("");
  const auto cands = discover_nvrtc(c.search(), nullptr, &m);
  REQUIRE(cands.size() == 2);
  CHECK(cands[0].lib);
  CHECK(cands[1].lib);
  CHECK_FALSE(std::filesystem::exists(c.memo_file()));
}

TEST_CASE("a soname's resolution by the loader is remembered with the file's facts") {
  // The loader finds libnvrtc.so.42 through LD_LIBRARY_PATH, which ctest sets (gpu_tests.cmake).
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  REQUIRE_MESSAGE((ld != nullptr && has(ld, kTree + "/sonamed")), "run under ctest: LD_LIBRARY_PATH must hold "
                                                                  << kTree << "/sonamed");
  const std::string file = std::filesystem::canonical(kTree + "/sonamed/libnvrtc.so.42").string();
  NvrtcSearchConfig s;
  s.sonames = {"libnvrtc.so.42"};
  const std::string dir = fresh_dir("cache");
  REQUIRE(discover_in_child(s, dir, [&](const auto& c) {
    return c.size() == 1 && c[0].lib && c[0].facts.path == file;
  }));
  CHECK(has(slurp(dir + "/" + NvrtcMemo::kFileName), "S\tlibnvrtc.so.42\t"));
  REQUIRE_FALSE(mapped(file));
  NvrtcMemo m(dir);
  const auto cands = discover_nvrtc(s, nullptr, &m);
  REQUIRE(cands.size() == 1);
  CHECK(cands[0].facts.path == file);
  CHECK(cands[0].facts.origin == "soname");
  CHECK(cands[0].facts.version_string() == "12.6");
  CHECK_FALSE(cands[0].lib);
  CHECK_FALSE(mapped(file));
}

TEST_CASE("a soname that names a candidate found by path does not load it") {
  // The loader's answer for libnvrtc.so.42 is the file the toolkit directory gave first: the cold
  // process's dlopen(soname) returned that library, loaded by its own discovery.
  const std::string file = std::filesystem::canonical(kTree + "/sonamed/libnvrtc.so.42").string();
  NvrtcSearchConfig s;
  s.toolkit_dirs = {{"test", kTree + "/sonamed"}};
  s.sonames = {"libnvrtc.so.42"};
  const std::string dir = fresh_dir("cache");
  REQUIRE(discover_in_child(s, dir, [](const auto& c) { return c.size() == 1 && c[0].lib; }));
  REQUIRE_FALSE(mapped(file));
  NvrtcMemo m(dir);
  const auto cands = discover_nvrtc(s, nullptr, &m);
  REQUIRE(cands.size() == 1);
  CHECK(cands[0].facts.origin == "test");
  CHECK_FALSE(cands[0].lib);
  CHECK_FALSE(mapped(file));
}
