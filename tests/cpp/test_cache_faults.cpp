// The kernel cache under fault injection (issue 12, §5) and its trust rule by mode (§6): a FIFO
// or /dev/zero at an entry's path, an entry whose header claims more than is there, bad size
// caps, temp files of killed writers, header bytes outside the checksum, directories and entries
// writable by others. Ownership and the faults that need a mount (a full or read-only file
// system) are in test_cache_root.cpp. No NVRTC is needed: entries hold made-up images.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache_test_util.h"
#include "jit/cache_fs.h"

using namespace cc1d;
using namespace cache_test;

namespace {

mode_t mode_of(const std::string& path) {
  struct stat st{};
  REQUIRE(stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A cache at `dir` whose one entry (key()) holds `k`.
std::string seeded(const std::string& dir, const CompiledImage& k) {
  ImageCache c(dir);
  c.store(key(), k);
  REQUIRE(c.stats().writes == 1);
  return c.entry_path(key());
}

// Loads key() in a fresh cache at dir, in a child process with a deadline (a hang fails, and
// does not stall the test), expecting a miss that counts one corrupt entry and logs `why`.
void expect_rejected(const std::string& dir, const std::string& why) {
  CHECK(in_child(5, [&] {
          LogCapture log;
          ImageCache c(dir);
          CompiledImage k;
          const bool ok = !c.load(key(), &k) && c.stats().corrupt == 1 && c.stats().misses == 1 &&
                          log.count(why) == 1;
          if (!ok) std::fprintf(stderr, "expected a rejection logging '%s'; log:\n%s", why.c_str(), log.all().c_str());
          return ok;
        }) == "");
}

}  // namespace

TEST_CASE("a FIFO at an entry's path is refused at once, and replaced by the next store") {
  const std::string dir = fresh_dir("fifo");
  const CompiledImage k = random_kernel(3000, 1);
  const std::string path = seeded(dir, k);
  REQUIRE(unlink(path.c_str()) == 0);
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  expect_rejected(dir, "not a regular file");
  ImageCache c(dir);
  c.store(key(), k);  // the rename replaces the FIFO
  CompiledImage got;
  REQUIRE(ImageCache(dir).load(key(), &got));
  CHECK(got.image == k.image);
}

TEST_CASE("a symlink to /dev/zero is refused without reading it") {
  const std::string dir = fresh_dir("zero");
  const std::string path = seeded(dir, random_kernel(3000, 2));
  REQUIRE(unlink(path.c_str()) == 0);
  REQUIRE(symlink("/dev/zero", path.c_str()) == 0);
  expect_rejected(dir, "not a regular file");
}

TEST_CASE("the read is capped at the size in the header") {
  const std::string dir = fresh_dir("cap");
  const std::string path = seeded(dir, random_kernel(3000, 3));
  const std::string good = slurp(path);
  SUBCASE("a 4 GiB sparse file whose header says so") {
    std::string header = good.substr(0, 64);
    const uint64_t len = (4ull << 30) - 64;
    for (int i = 0; i < 8; ++i) header[16 + i] = static_cast<char>(len >> (8 * i));
    spit(path, header);
    REQUIRE(truncate(path.c_str(), (off_t)(4ull << 30)) == 0);
    expect_rejected(dir, "exceeds the limit of 1073741824 bytes");
  }
  SUBCASE("a file larger than its header says") {
    spit(path, good + std::string(1 << 20, 'x'));
    expect_rejected(dir, "does not match the header's payload length");
  }
  SUBCASE("a file shorter than its header says") {
    spit(path, good.substr(0, good.size() - 1));
    expect_rejected(dir, "does not match the header's payload length");
  }
}

TEST_CASE("CAUSAL_CONV1D_CACHE_MAX_MB: out-of-range values are rejected with a warning, as junk is") {
  struct Case {
    const char* value;
    uint64_t bytes;
    bool warns;
  };
  const Case cases[] = {
      {"0", 0, false},  // no cap
      {"1", 1ull << 20, false},
      {"17592186044415", 17592186044415ull << 20, false},  // 2^44-1 MiB: the largest that fits
      {"17592186044416", kDefaultCacheMaxBytes, true},     // 2^44 MiB = 2^64 bytes: used to wrap to 0
      {"-1", kDefaultCacheMaxBytes, true},                 // used to become ~2^64
      {"99999999999999999999999", kDefaultCacheMaxBytes, true},
      {"abc", kDefaultCacheMaxBytes, true},
      {"12abc", kDefaultCacheMaxBytes, true},
      {" 5", kDefaultCacheMaxBytes, true},
      {"1e3", kDefaultCacheMaxBytes, true},
      {"+5", kDefaultCacheMaxBytes, true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.value);
    LogCapture log;
    setenv("CAUSAL_CONV1D_CACHE_MAX_MB", c.value, 1);
    CHECK(CacheConfig::default_max_bytes() == c.bytes);
    CHECK(log.count(std::string("CAUSAL_CONV1D_CACHE_MAX_MB='") + c.value + "' is not a number of MiB") ==
          (c.warns ? 1 : 0));
  }
  unsetenv("CAUSAL_CONV1D_CACHE_MAX_MB");
  CHECK(CacheConfig::default_max_bytes() == kDefaultCacheMaxBytes);
}

TEST_CASE("temp files of killed writers count toward the cap and are removed at the next scan") {
  const std::string dir = fresh_dir("tmp");
  const uint64_t cap = 200 * 1024;
  ImageCache c(dir, cap);
  c.store(key("a"), random_kernel(40 * 1024, 4));
  const std::string entries = c.entries_dir();
  const std::string dead = entries + "/.deadbeef.cc1dbin.tmp.AAAAAA", live = entries + "/.cafe.cc1dbin.tmp.BBBBBB";
  spit(dead, std::string(120 * 1024, 'd'));
  spit(live, std::string(120 * 1024, 'l'));
  // The live writer holds its temp file's lock, as write_file_atomic does.
  const int fd = open(live.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  struct flock lk{};
  lk.l_type = F_WRLCK;
  lk.l_whence = SEEK_SET;
  REQUIRE(fcntl(fd, F_OFD_SETLK, &lk) == 0);
  // Both are older than a live writer's can be.
  const struct timespec old[2] = {{time(nullptr) - 600, 0}, {time(nullptr) - 600, 0}};
  utimensat(AT_FDCWD, dead.c_str(), old, 0);
  utimensat(AT_FDCWD, live.c_str(), old, 0);
  // a (40 KB) + dead + live temp (240 KB) exceed the cap: the dead one goes, the live one stays
  // and counts, so "a" (the least recently used entry) is evicted to make room for "b".
  c.store(key("b"), random_kernel(40 * 1024, 5));
  CHECK(access(dead.c_str(), F_OK) != 0);
  CHECK(access(live.c_str(), F_OK) == 0);
  CHECK(access(c.entry_path(key("a")).c_str(), F_OK) != 0);
  CHECK(access(c.entry_path(key("b")).c_str(), F_OK) == 0);
  CHECK(c.stats().evictions == 1);
  close(fd);  // the writer is gone now: its temp file goes at the next scan
  c.store(key("c"), random_kernel(1024, 6));
  CHECK(access(live.c_str(), F_OK) != 0);
  // A fresh temp file is never touched, locked or not (its writer may be between steps).
  const std::string young = entries + "/.f00d.cc1dbin.tmp.CCCCCC";
  spit(young, std::string(300 * 1024, 'y'));
  c.store(key("d"), random_kernel(1024, 7));
  CHECK(access(young.c_str(), F_OK) == 0);
}

TEST_CASE("the local cache directory is created 0700 and its entries 0600, whatever the umask") {
  const std::string dir = fresh_dir("modes") + "/deeper/cache";
  const mode_t before = umask(0);
  ImageCache c(dir);
  c.store(key(), random_kernel(1000, 8));
  umask(before);
  CHECK(mode_of(dir) == 0700);
  CHECK(mode_of(dir.substr(0, dir.rfind('/'))) == 0700);  // parents it created too
  CHECK(mode_of(c.entries_dir()) == 0700);
  CHECK(mode_of(c.entry_path(key())) == 0600);
  CHECK(c.state() == "read-write");
}

TEST_CASE("a cache directory writable by its group or others is not used, with one warning") {
  for (const char* which : {"dir", "entries"}) {
    for (mode_t m : {0777, 0770, 0702}) {
      CAPTURE(which);
      CAPTURE(m);
      const std::string dir = fresh_dir("trust");
      const CompiledImage k = random_kernel(2000, 9);
      const std::string path = seeded(dir, k), before = slurp(path);
      const std::string target = std::string(which) == "dir" ? dir : dir + "/kernels-v3";
      REQUIRE(chmod(target.c_str(), m) == 0);
      LogCapture log;
      ImageCache c(dir);
      CompiledImage got;
      CHECK_FALSE(c.load(key(), &got));  // the (valid) entry there is not read
      c.store(key("other"), k);          // nor is anything written
      CHECK(access(c.entry_path(key("other")).c_str(), F_OK) != 0);
      CHECK(c.load(key("other"), &got));  // memory only
      CHECK(c.state() == "untrusted");
      CHECK(c.problem().find(target + " is writable by") == 0);
      CHECK(c.report_json().find("\"disk\": \"untrusted\"") != std::string::npos);
      CHECK(log.count("kernel cache directory " + target + " is writable by") == 1);
      CHECK(log.count("chmod go-w") == 1);
      CHECK(log.count("CAUSAL_CONV1D_CACHE_DIR") == 1);
      CHECK(slurp(path) == before);  // untouched
    }
  }
}

TEST_CASE("an entry writable by others is refused and rebuilt") {
  const std::string dir = fresh_dir("entrymode");
  const CompiledImage k = random_kernel(2000, 10);
  const std::string path = seeded(dir, k);
  REQUIRE(chmod(path.c_str(), 0666) == 0);
  expect_rejected(dir, "untrusted: it is writable by its group and others (mode 0666)");
  ImageCache c(dir);
  c.store(key(), k);
  CHECK(mode_of(path) == 0600);
  CompiledImage got;
  CHECK(ImageCache(dir).load(key(), &got));
}

TEST_CASE("a read-only tier writable by others is skipped with one warning, and never read") {
  const std::string tier = fresh_dir("tier");
  const CompiledImage k = random_kernel(2000, 11);
  seeded(tier, k);
  REQUIRE(chmod(tier.c_str(), 0775) == 0);
  CacheConfig cfg;
  cfg.dir = fresh_dir("local");
  cfg.tiers = {tier};
  LogCapture log;
  ImageCache c(cfg);
  CompiledImage got;
  CHECK_FALSE(c.load(key(), &got));
  CHECK_FALSE(c.load(key(), &got));
  CHECK(c.tier_problem(0) == tier + " is writable by its group (mode 0775)");
  CHECK(log.count("read-only kernel cache tier " + tier + " (CAUSAL_CONV1D_CACHE_PATH): " + tier +
                  " is writable by its group") == 1);
  CHECK(c.stats().tier_hits == 0);
  // Made private again, the same tier serves (in a new process).
  REQUIRE(chmod(tier.c_str(), 0755) == 0);
  ImageCache again(cfg);
  CHECK(again.load(key(), &got));
  CHECK(got.image == k.image);
}
