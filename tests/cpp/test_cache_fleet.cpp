// test_cache_fleet.cpp — the kernel cache as a fleet uses it, end to end on the fake libcuda
// (part of the test_fake_driver_e2e executable; gpu ctest entries select these test cases):
//  - many processes starting together on a cold cache compile each kernel exactly once (the
//    cross-process lock), and every one of them computes the right result;
//  - the output of cc1d_precompile, made here without any driver, is the only tier of a node
//    whose local cache is off, and serves its run without a single compile.
// Compiles are counted from each child's cc1d_report ("compiled" list: origin per kernel).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "e2e_spawn.h"
#include "kernels_src/fwd_params.h"

namespace {

int occurrences(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// cc1d_cache_command's JSON for the environment as it is now.
std::string cache_command(int command) {
  char* json = nullptr;
  const cc1d_status st = cc1d_cache_command(command, &json);
  INFO(cc1d_last_error());
  REQUIRE(st == CC1D_OK);
  REQUIRE(json != nullptr);
  const std::string s = json;
  cc1d_free(json);
  return s;
}

// The local cache's persistent counter `name` in a stats JSON.
long counter(const std::string& stats, const std::string& name) {
  std::smatch m;
  const std::regex re("\"local\": \\{[^\\[]*\"counters\": \\{[^}]*\"" + name + "\": ([0-9]+)");
  REQUIRE_MESSAGE(std::regex_search(stats, m, re), stats);
  return std::stol(m[1]);
}

}  // namespace

TEST_CASE("fleet: processes starting together on a cold cache compile once, and every result is correct") {
  const int n = std::atoi(std::getenv("CC1D_TEST_FLEET") ? std::getenv("CC1D_TEST_FLEET") : "32");
  CacheDir cache;
  const std::string dir = cache.path + "/cache", go = cache.path + "/go";
  std::vector<Started> kids;
  for (int i = 0; i < n; ++i)
    kids.push_back(start_child("one", {{"CAUSAL_CONV1D_CACHE_DIR", dir}, {"CC1D_TEST_START_FILE", go},
                                       {"CAUSAL_CONV1D_EMULATE_CHECK", ""}}));
  std::ofstream(go).put('1');  // all of them go at once
  int compiled = 0, from_disk = 0;
  for (const Started& k : kids) {
    const Child c = finish_child(k);
    INFO(explain(c));
    REQUIRE(c.exit_code == 0);
    CHECK(c.line("STATUS") == "0 ");
    CHECK(c.line("RESULT") == "ok");
    const std::string report = c.line("REPORT");
    REQUIRE(occurrences(report, "\"variant\": ") == 1);  // the one kernel "one" launches
    compiled += occurrences(report, "\"origin\": \"compiled\"");
    from_disk += occurrences(report, "\"origin\": \"disk cache\"");
  }
  CHECK(compiled == 1);
  CHECK(from_disk == n - 1);
  // The persistent counters say the same: one miss (and write), every other process a hit.
  setenv("CAUSAL_CONV1D_CACHE_DIR", dir.c_str(), 1);
  const std::string stats = cache_command(CC1D_CACHE_STATS);
  unsetenv("CAUSAL_CONV1D_CACHE_DIR");
  INFO(stats);
  CHECK(counter(stats, "misses") == 1);
  CHECK(counter(stats, "writes") == 1);
  CHECK(counter(stats, "hits") == n - 1);
  CHECK(stats.find("\"entries\": 1,") != std::string::npos);
}

TEST_CASE("fleet: precompile's output, as the only tier with the local cache off, serves a run with zero compiles") {
  CacheDir work;
  const std::string tier = work.path + "/image-layer";
  const int32_t archs[] = {90}, ops[] = {CC1D_OP_FWD}, dtypes[] = {CC1D_FLOAT32}, widths[] = {4};
  cc1d_precompile_args a{};
  a.struct_size = sizeof a;
  a.out_dir = tier.c_str();
  a.archs = archs;
  a.num_archs = 1;
  a.ops = ops;
  a.num_ops = 1;
  a.dtypes = dtypes;
  a.num_dtypes = 1;
  a.widths = widths;
  a.num_widths = 1;
  a.jobs = 2;
  char* manifest = nullptr;
  const cc1d_status st = cc1d_precompile(&a, &manifest);
  INFO(cc1d_last_error());
  REQUIRE(st == CC1D_OK);
  const std::string m = manifest;
  cc1d_free(manifest);
  INFO(m);
  // fp32 x fp32, width 4, every path of the forward: each compiled for sm_90.
  const std::string n = std::to_string(cc1d::kFwdNumPaths);
  CHECK(m.find("\"variants\": " + n + ", \"compiled\": " + n + ", \"already_present\": 0, \"failed\": 0") !=
        std::string::npos);
  CHECK(occurrences(m, "\"kernel\": \"cc1d::causal_conv1d_fwd_kernel<float, float, 4, ") == cc1d::kFwdNumPaths);
  CHECK(occurrences(m, "\"target\": \"sm_90\", \"compiler\": \"NVRTC 13.0\", \"key\": ") == cc1d::kFwdNumPaths);
  std::ifstream f(tier + "/manifest.json");
  std::string on_disk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(on_disk == m + "\n");
  struct stat st_dir{};
  REQUIRE(stat((tier + "/kernels-v3").c_str(), &st_dir) == 0);
  CHECK((st_dir.st_mode & 0777) == 0755);  // readable by a node's service user

  const Env node = {{"CAUSAL_CONV1D_CACHE_DIR", "off"}, {"CAUSAL_CONV1D_CACHE_PATH", tier}, {"CC1D_FAKE_SM", "90"}};
  const Child c = spawn("one", node);
  INFO(explain(c));
  REQUIRE(c.exit_code == 0);
  CHECK(c.line("STATUS") == "0 ");
  CHECK(c.line("RESULT") == "ok");
  const std::string report = c.line("REPORT");
  CHECK(occurrences(report, "\"origin\": \"tier " + tier + "\"") == 1);
  CHECK(occurrences(report, "\"origin\": \"compiled\"") == 0);
  CHECK(report.find("\"disk\": \"off\"") != std::string::npos);
  // The control: an sm_80 node finds nothing for it there, and compiles.
  Env other = node;
  other.back().second = "80";
  const Child c80 = spawn("one", other);
  INFO(explain(c80));
  CHECK(c80.line("RESULT") == "ok");
  CHECK(occurrences(c80.line("REPORT"), "\"origin\": \"compiled\"") == 1);
}
