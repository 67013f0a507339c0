// The kernel cache's faults and trust rules that need root (issue 12, §5, §6):
//  - ownership: a local cache, a tier, or an entry owned by another user (chown) is not used;
//  - with --mount (a private mount namespace, so nothing leaks out of this process): a full
//    file system (a small tmpfs) is retried after eviction and reported "full", then
//    "read-write" again; a read-only file system is reported "read-only" and still serves.
// Exits 77 (ctest: skipped) when not root, or, with --mount, when mounts are not permitted.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cache_test_util.h"
#include "jit/cache_fs.h"

using namespace cc1d;
using namespace cache_test;

namespace {

constexpr uid_t kOther = 54321;  // a uid that owns nothing here

// A tmpfs of `kb` KiB at a fresh directory.
std::string tmpfs(int kb) {
  const std::string dir = fresh_dir("mnt");
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  const std::string opts = "size=" + std::to_string(kb) + "k,mode=0700";
  REQUIRE_MESSAGE(mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0, std::strerror(errno));
  return dir;
}

}  // namespace

TEST_CASE("owner: a local cache owned by another user is not used, with one warning") {
  for (const char* which : {"dir", "kernels-v3"}) {
    CAPTURE(which);
    const std::string dir = fresh_dir("owner");
    const CompiledImage k = random_kernel(2000, 40);
    ImageCache(dir).store(key(), k);
    const std::string target = std::string(which) == "dir" ? dir : dir + "/kernels-v3";
    REQUIRE(chown(target.c_str(), kOther, kOther) == 0);
    LogCapture log;
    ImageCache c(dir);
    CompiledImage got;
    CHECK_FALSE(c.load(key(), &got));
    c.store(key("new"), k);
    CHECK(access(c.entry_path(key("new")).c_str(), F_OK) != 0);
    CHECK(c.state() == "untrusted");
    CHECK(log.count("kernel cache directory " + target + " is owned by uid 54321, not by you (uid 0); it is not used") == 1);
  }
}

TEST_CASE("owner: a tier owned by another user (not root) is skipped; an entry of another user is refused") {
  const std::string tier = fresh_dir("tierowner");
  const CompiledImage k = random_kernel(2000, 41);
  ImageCache(tier).store(key(), k);
  CacheConfig cfg;
  cfg.tiers = {tier};
  REQUIRE(chown(tier.c_str(), kOther, kOther) == 0);
  {
    LogCapture log;
    ImageCache c(cfg);
    CompiledImage got;
    CHECK_FALSE(c.load(key(), &got));
    CHECK(c.tier_problem(0) == tier + " is owned by uid 54321, not by you (uid 0) or root");
    CHECK(log.count("it is skipped") == 1);
  }
  REQUIRE(chown(tier.c_str(), 0, 0) == 0);  // root's: fine for a tier
  const std::string entry = ImageCache(tier).entry_path(key());
  REQUIRE(chown(entry.c_str(), kOther, kOther) == 0);
  {
    LogCapture log;
    ImageCache c(cfg);
    CompiledImage got;
    CHECK_FALSE(c.load(key(), &got));
    CHECK(log.count("untrusted: it is owned by uid 54321") == 1);
    CHECK(access(entry.c_str(), F_OK) == 0);  // never deleted
  }
  REQUIRE(chown(entry.c_str(), 0, 0) == 0);
  CompiledImage got;
  CHECK(ImageCache(cfg).load(key(), &got));
  CHECK(got.image == k.image);
}

TEST_CASE("mount: a full file system is retried after eviction, reported truly, and written again once freed") {
  const std::string mnt = tmpfs(256);
  const std::string dir = mnt + "/cache";
  LogCapture log;
  ImageCache c(dir, 0);  // no size cap: only the disk limits it
  int stored = 0;
  for (int i = 0; i < 10; ++i) {
    c.store(key("k" + std::to_string(i)), random_kernel(40 * 1024, 42 + i));
    stored += access(c.entry_path(key("k" + std::to_string(i))).c_str(), F_OK) == 0;
  }
  // 256 KiB hold about six: each store past that found no space, evicted the oldest, and wrote.
  CHECK(stored == 10);
  CHECK(c.stats().writes == 10);
  CHECK(c.stats().evictions >= 4);
  CHECK(c.state() == "read-write");
  // Space taken by something else: eviction cannot help.
  for (const DirFile& f : list_dir(c.entries_dir())) unlink(f.path.c_str());
  const std::string filler = mnt + "/filler";
  {
    std::FILE* f = std::fopen(filler.c_str(), "wb");
    REQUIRE(f != nullptr);
    const std::string block(4096, 'f');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  c.store(key("full1"), random_kernel(40 * 1024, 60));
  c.store(key("full2"), random_kernel(40 * 1024, 61));
  CHECK(c.state() == "full");
  CHECK(c.report_json().find("\"disk\": \"full\"") != std::string::npos);
  CHECK(log.count("is full") == 1);  // one warning
  CompiledImage got;
  CHECK(c.load(key("full2"), &got));  // kept in memory
  REQUIRE(unlink(filler.c_str()) == 0);
  c.store(key("again"), random_kernel(40 * 1024, 62));  // retried: no "never again"
  CHECK(access(c.entry_path(key("again")).c_str(), F_OK) == 0);
  CHECK(c.state() == "read-write");
  umount2(mnt.c_str(), MNT_DETACH);
}

TEST_CASE("mount: a read-only file system is reported read-only, serves its entries, and warns once") {
  const std::string mnt = tmpfs(1024);
  const std::string dir = mnt + "/cache";
  const CompiledImage k = random_kernel(5000, 63);
  ImageCache(dir).store(key(), k);
  REQUIRE(mount(nullptr, mnt.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
  LogCapture log;
  ImageCache c(dir);
  CHECK(c.state() == "read-only");  // before any write was tried
  CHECK(c.report_json().find("\"disk\": \"read-only\"") != std::string::npos);
  CompiledImage got;
  REQUIRE(c.load(key(), &got));
  CHECK(got.image == k.image);
  CHECK(c.get_or_compile(key("new"), [&] { return k; }).image == k.image);
  c.store(key("newer"), k);
  CHECK(log.count("is read-only") == 1);
  CHECK(c.stats().errors == 0);
  CHECK(c.state() == "read-only");
  umount2(mnt.c_str(), MNT_DETACH);
}

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::printf("SKIPPED: these tests chown files to another user and mount file systems: they need root\n");
    return 77;
  }
  bool mounts = false;
  for (int i = 1; i < argc; ++i) mounts = mounts || std::string(argv[i]) == "--mount";
  if (mounts && (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)) {
    std::printf("SKIPPED: no private mount namespace here (%s): the full and read-only file system tests need "
                "CAP_SYS_ADMIN\n", std::strerror(errno));
    return 77;
  }
  doctest::Context context(argc, argv);
  context.setOption("test-case", mounts ? "mount:*" : "owner:*");
  return context.run();
}
