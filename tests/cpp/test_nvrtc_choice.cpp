// Which NVRTC compiles for a device, and how: the pure rules of nvrtc_choice.h, over facts
// made up here (no library is loaded).
#include <doctest/doctest.h>

#include <string>

#include "nvrtc/nvrtc_choice.h"

using namespace cc1d;

namespace {

const std::vector<int> kArchs12 = {50, 60, 70, 75, 80, 86, 89, 90};
const std::vector<int> kArchs128 = {50, 60, 70, 75, 80, 86, 89, 90, 100, 120};
const std::vector<int> kArchs13 = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};

NvrtcFacts fact(const std::string& path, int major, int minor, std::vector<int> archs) {
  NvrtcFacts f;
  f.path = path;
  f.origin = "test";
  f.major = major;
  f.minor = minor;
  f.archs = std::move(archs);
  return f;
}

NvrtcFacts broken(const std::string& path, const std::string& error) {
  NvrtcFacts f;
  f.path = path;
  f.load_error = error;
  return f;
}

bool has(const std::string& s, const std::string& frag) { return s.find(frag) != std::string::npos; }

}  // namespace

TEST_CASE("a cubin for the exact SM from the only candidate") {
  const auto ch = choose_nvrtc({fact("/a/13", 13, 0, kArchs13)}, 13000, 90, 0);
  REQUIRE(ch.ok);
  CHECK(ch.index == 0);
  CHECK(ch.kind == CodeKind::Cubin);
  CHECK(ch.target_arch == 90);
  REQUIRE(ch.decisions.size() == 1);
  CHECK(ch.decisions[0].accepted);
  CHECK(has(ch.decisions[0].reason, "cubin for sm_90"));
}

TEST_CASE("the driver's CUDA major bounds eligibility; a newer same-major NVRTC is fine for cubins") {
  // Driver 12.4: NVRTC 13.0 is rejected, NVRTC 12.8 (newer minor than the driver) is used.
  const auto ch = choose_nvrtc({fact("/a/13", 13, 0, kArchs13), fact("/b/12.8", 12, 8, kArchs128)}, 12040, 90, 0);
  REQUIRE(ch.ok);
  CHECK(ch.index == 1);
  CHECK(ch.kind == CodeKind::Cubin);
  CHECK_FALSE(ch.decisions[0].accepted);
  CHECK(has(ch.decisions[0].reason, "rejected"));
  CHECK(has(ch.decisions[0].reason, "driver supports CUDA 12.4"));
  CHECK(has(ch.decisions[0].reason, "driver >= 580"));
  CHECK(ch.decisions[1].accepted);
}

TEST_CASE("torch's CUDA major is preferred over a newer NVRTC, then the newest wins") {
  const std::vector<NvrtcFacts> c = {fact("/a/12.4", 12, 4, kArchs12), fact("/b/13.0", 13, 0, kArchs13),
                                     fact("/c/12.8", 12, 8, kArchs128)};
  auto ch = choose_nvrtc(c, 13000, 90, 12);
  REQUIRE(ch.ok);
  CHECK(ch.index == 2);  // 12.8: torch's major, newest of that major
  CHECK(has(ch.reason, "matching torch's CUDA 12"));
  CHECK(has(ch.decisions[1].reason, "torch's CUDA 12"));
  CHECK(has(ch.decisions[0].reason, "usable (cubin)"));
  ch = choose_nvrtc(c, 13000, 90, 13);
  CHECK(ch.index == 1);
  ch = choose_nvrtc(c, 13000, 90, 0);  // torch unknown: the newest
  CHECK(ch.index == 1);
  // Equal versions: the earlier in search order.
  ch = choose_nvrtc({fact("/x", 13, 0, kArchs13), fact("/y", 13, 0, kArchs13)}, 13000, 90, 0);
  CHECK(ch.index == 0);
}

TEST_CASE("a cubin from a candidate that lists the SM beats PTX from a preferred one") {
  // torch is CUDA 12, but only NVRTC 13 lists sm_120: a cubin from 13 wins.
  const auto ch = choose_nvrtc({fact("/a/12.4", 12, 4, kArchs12), fact("/b/13.0", 13, 0, kArchs13)}, 13000, 120, 12);
  REQUIRE(ch.ok);
  CHECK(ch.index == 1);
  CHECK(ch.kind == CodeKind::Cubin);
  CHECK(has(ch.decisions[0].reason, "could emit PTX"));
}

TEST_CASE("PTX for the highest arch below an unknown SM, only if the driver can JIT it") {
  // A future sm_130 with a CUDA 13.0 driver: compute_121 from NVRTC 13.0.
  auto ch = choose_nvrtc({fact("/a/13.0", 13, 0, kArchs13)}, 13000, 130, 0);
  REQUIRE(ch.ok);
  CHECK(ch.kind == CodeKind::Ptx);
  CHECK(ch.target_arch == 121);
  CHECK(has(ch.reason, "compute_121 PTX"));
  // NVRTC 13.2 is newer than a 13.0 driver: its PTX would fail with error 222. No cubin either.
  ch = choose_nvrtc({fact("/a/13.2", 13, 2, kArchs13)}, 13000, 130, 0);
  CHECK_FALSE(ch.ok);
  CHECK(has(ch.decisions[0].reason, "newer than the driver"));
  CHECK(has(ch.reason, "no usable NVRTC for sm_130"));
  CHECK(has(ch.reason, "pip install nvidia-cuda-nvrtc"));
  // ...but 13.2 still makes cubins for a 13.0 driver (same major).
  ch = choose_nvrtc({fact("/a/13.2", 13, 2, kArchs13)}, 13000, 90, 0);
  CHECK(ch.ok);
  CHECK(ch.kind == CodeKind::Cubin);
  // Of two PTX candidates, the one whose PTX the driver accepts.
  ch = choose_nvrtc({fact("/a/12.8", 12, 8, kArchs128), fact("/b/12.4", 12, 4, kArchs12)}, 12040, 130, 0);
  REQUIRE(ch.ok);
  CHECK(ch.index == 1);
  CHECK(ch.target_arch == 90);
}

TEST_CASE("an SM below everything a candidate supports is rejected with the supported range") {
  const auto ch = choose_nvrtc({fact("/a/13.0", 13, 0, kArchs13)}, 13000, 70, 0);
  CHECK_FALSE(ch.ok);
  CHECK(has(ch.decisions[0].reason, "supports sm_75..sm_121, nothing at or below the device's sm_70"));
  // A CUDA 12 NVRTC still serves sm_70 as a cubin.
  const auto ch2 = choose_nvrtc({fact("/a/13.0", 13, 0, kArchs13), fact("/b/12.4", 12, 4, kArchs12)}, 13000, 70, 13);
  REQUIRE(ch2.ok);
  CHECK(ch2.index == 1);
  CHECK(ch2.kind == CodeKind::Cubin);
}

TEST_CASE("broken candidates are rejected with their load error, in search order") {
  const auto ch = choose_nvrtc({broken("/x/libnvrtc.so.12", "dlopen failed: invalid ELF header"),
                                broken("/y/libnvrtc.so.11.1", "NVRTC 11.1 predates 11.2"),
                                fact("/z/13", 13, 0, kArchs13)},
                               13000, 90, 0);
  REQUIRE(ch.ok);
  CHECK(ch.index == 2);
  REQUIRE(ch.decisions.size() == 3);
  CHECK(ch.decisions[0].path == "/x/libnvrtc.so.12");
  CHECK(ch.decisions[0].reason == "rejected: dlopen failed: invalid ELF header");
  CHECK(ch.decisions[0].version.empty());
  CHECK(has(ch.decisions[1].reason, "predates 11.2"));
}

TEST_CASE("nothing eligible: one reason naming every candidate and the fix") {
  auto ch = choose_nvrtc({fact("/a/13.0", 13, 0, kArchs13), broken("/b", "dlopen failed: no")}, 12040, 90, 0);
  CHECK_FALSE(ch.ok);
  CHECK(ch.index == -1);
  CHECK(has(ch.reason, "/a/13.0"));
  CHECK(has(ch.reason, "/b"));
  CHECK(has(ch.reason, "pip install nvidia-cuda-nvrtc-cu12"));
  CHECK(has(ch.reason, "CAUSAL_CONV1D_NVRTC"));
  ch = choose_nvrtc({}, 12040, 90, 0);
  CHECK_FALSE(ch.ok);
  CHECK(has(ch.reason, "no libnvrtc found"));
}

TEST_CASE("parse_cuda_major and decisions_json") {
  CHECK(parse_cuda_major("12.4") == 12);
  CHECK(parse_cuda_major("13.0") == 13);
  CHECK(parse_cuda_major("") == 0);
  CHECK(parse_cuda_major("None") == 0);
  const auto ch = choose_nvrtc({fact("/a \"q\"", 13, 0, {90})}, 13000, 90, 0);
  const std::string j = decisions_json(ch.decisions);
  CHECK(j.front() == '[');
  CHECK(has(j, "\"path\": \"/a \\\"q\\\"\""));
  CHECK(has(j, "\"archs\": [90]"));
  CHECK(has(j, "\"accepted\": true"));
}
