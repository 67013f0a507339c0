// The on-disk kernel cache: round trip, keys, integrity checks, concurrent writers (threads and
// processes), an unwritable directory, and the LRU size cap. No NVRTC is needed: entries hold
// made-up images.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cache_test_util.h"
#include "cc1d/cc1d.h"
#include "jit/cache_fs.h"
#include "jit/image_cache.h"

using namespace cc1d;
using namespace cache_test;

namespace {

const char kImage[] = "\x7f" "ELF fake image bytes\0\1\2";

CompiledImage kernel(const std::string& image = std::string(kImage, sizeof kImage - 1)) {
  CompiledImage k;
  k.image = image;
  k.lowered_name = "_Z6kernelv";
  k.target = "sm_90";
  return k;
}

// Entries and temp files (not the lock and stats files).
int count_files(const std::string& dir) { return (int)list_dir(dir).size(); }

std::string parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

}  // namespace

TEST_CASE("round trip through disk, in a fresh cache object (a new process)") {
  const std::string dir = fresh_dir("c");
  {
    ImageCache cache(dir);
    CompiledImage k;
    CHECK_FALSE(cache.load(key(), &k));
    cache.store(key(), kernel());
    CHECK(cache.stats().writes == 1);
    CHECK(cache.stats().misses == 1);
  }
  ImageCache cache(dir);
  CompiledImage k;
  REQUIRE(cache.load(key(), &k));
  CHECK(k.image == kernel().image);
  CHECK(k.lowered_name == "_Z6kernelv");
  CHECK(k.target == "sm_90");
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().memory_hits == 0);
  REQUIRE(cache.load(key(), &k));  // now from memory
  CHECK(cache.stats().memory_hits == 1);
  CHECK(cache.report_json().find("\"hits\": 2") != std::string::npos);
}

TEST_CASE("the key changes with every field") {
  const CacheKey base = key();
  std::vector<CacheKey> variants(8, base);
  variants[0].sources_hash = "other";
  variants[1].name_expression += " ";
  variants[2].target = "compute_90";
  variants[3].target = "sm_89";
  variants[4].compiler = "NVRTC 13.1";
  variants[5].options = {"-arch=sm_90"};
  variants[6].abi = base.abi + 1;
  variants[7].options = {"-arch=sm_90-std=c++17"};  // concatenation must not collide
  CHECK(base.digest().size() == 64);
  CHECK(base.digest() == key().digest());  // deterministic
  for (size_t i = 0; i < variants.size(); ++i) {
    INFO("field " << i);
    CHECK(variants[i].digest() != base.digest());
  }
  const std::string dir = fresh_dir("k");
  ImageCache cache(dir);
  cache.store(base, kernel());
  ImageCache other(dir);
  CompiledImage k;
  for (const CacheKey& v : variants) CHECK_FALSE(other.load(v, &k));
  CHECK(other.load(base, &k));
}

TEST_CASE("corrupt and truncated entries are ignored, counted, and overwritten") {
  const std::string dir = fresh_dir("x");
  { ImageCache(dir).store(key(), kernel()); }
  const std::string path = ImageCache(dir).entry_path(key());
  const std::string good = slurp(path);
  REQUIRE(good.size() > 64);

  struct Damage { const char* what; std::string bytes; };
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x40;  // a payload byte
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  std::string bad_len = good;
  bad_len[16] ^= 1;
  std::string reserved = good;  // header bytes 56..63: not covered by the checksum
  reserved[60] = 1;
  const std::vector<Damage> damages = {{"flipped payload byte", flipped},
                                       {"truncated payload", good.substr(0, good.size() - 5)},
                                       {"truncated header", good.substr(0, 20)},
                                       {"empty file", ""},
                                       {"bad magic", bad_magic},
                                       {"bad length", bad_len},
                                       {"reserved header byte", reserved},
                                       {"appended garbage", good + "junk"}};
  for (const Damage& d : damages) {
    INFO(d.what);
    spit(path, d.bytes);
    ImageCache cache(dir);
    CompiledImage k;
    CHECK_FALSE(cache.load(key(), &k));
    CHECK(cache.stats().corrupt == 1);
    CHECK(cache.stats().misses == 1);
    cache.store(key(), kernel());  // what the backend does after recompiling
    CHECK(slurp(path) == good);
  }
  // An intact entry renamed to another key's name is refused (it names its own key).
  ImageCache cache(dir);
  const std::string other = cache.entry_path(key("other"));
  spit(other, good);
  CompiledImage k;
  CHECK_FALSE(cache.load(key("other"), &k));
  CHECK(cache.stats().corrupt == 1);
}

TEST_CASE("encode/decode reject every malformed input") {
  const std::string d = key().digest();
  const std::string e = encode_cache_entry(key(), kernel());
  CompiledImage k;
  std::string why;
  CHECK(decode_cache_entry(e, d, &k, &why));
  for (size_t cut = 0; cut < e.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK_FALSE(decode_cache_entry(e.substr(0, cut), d, &k, &why));
  }
  CHECK_FALSE(decode_cache_entry(e, key("x").digest(), &k, &why));
  CHECK(why == "entry belongs to another key");
  for (size_t at = 56; at < 64; ++at) {
    std::string r = e;
    r[at] = '\x80';
    CHECK_FALSE(decode_cache_entry(r, d, &k, &why));
    CHECK(why == "reserved header bytes 56..63 are not zero");
  }
  EntryMeta meta;
  REQUIRE(decode_cache_entry(e, d, &k, &why, &meta));
  CHECK(meta.name_expression == key().name_expression);
  CHECK(meta.compiler == "NVRTC 13.0");
  CHECK(meta.digest == d);
  CHECK(meta.image_bytes == kernel().image.size());
}

TEST_CASE("failed compiles (empty images) are never stored") {
  const std::string dir = fresh_dir("f");
  ImageCache cache(dir);
  cache.store(key(), kernel(""));
  CompiledImage k;
  CHECK_FALSE(cache.load(key(), &k));
  CHECK(cache.stats().writes == 0);
  CHECK(count_files(parent(cache.entry_path(key()))) == 0);
}

TEST_CASE("concurrent writers of one key, threads: the entry is always valid") {
  const std::string dir = fresh_dir("t");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      ImageCache cache(dir);  // separate objects: no shared in-memory tier or lock
      for (int i = 0; i < 20; ++i) {
        cache.store(key(), kernel(std::string(1000 + 10 * t, (char)('a' + t))));
        CompiledImage k;
        ImageCache reader(dir);
        if (reader.load(key(), &k)) CHECK(k.image.size() >= 1000);  // never torn
        CHECK(reader.stats().corrupt == 0);
      }
    });
  for (auto& th : threads) th.join();
  ImageCache cache(dir);
  CompiledImage k;
  REQUIRE(cache.load(key(), &k));
  CHECK(k.image == std::string(k.image.size(), k.image[0]));  // one writer's complete image
  CHECK(count_files(parent(cache.entry_path(key()))) == 1);  // no temp files left behind
}

TEST_CASE("concurrent writers of one key, two processes") {
  const std::string dir = fresh_dir("p");
  std::vector<pid_t> kids;
  for (int p = 0; p < 2; ++p) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int bad = 0;
      for (int i = 0; i < 50; ++i) {
        ImageCache cache(dir);
        cache.store(key(), kernel(std::string(4096 + p, (char)('x' + p))));
        ImageCache reader(dir);
        CompiledImage k;
        if (!reader.load(key(), &k) || reader.stats().corrupt != 0) ++bad;
      }
      _exit(bad == 0 ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  ImageCache cache(dir);
  CompiledImage k;
  REQUIRE(cache.load(key(), &k));
  CHECK((k.image == std::string(4096, 'x') || k.image == std::string(4097, 'y')));
  CHECK(count_files(parent(cache.entry_path(key()))) == 1);
}

TEST_CASE("an unwritable directory degrades to memory-only") {
  // A path below a regular file can never be created, even as root.
  const std::string base = fresh_dir("u");
  spit(base, "a file, not a directory");
  ImageCache cache(base + "/cache");
  cache.store(key(), kernel());
  CHECK(cache.state() == "unavailable");
  CHECK(cache.stats().errors == 1);
  CompiledImage k;
  CHECK(cache.load(key(), &k));  // still served from memory
  CHECK(k.image == kernel().image);
  cache.store(key("second"), kernel());  // no second attempt, no second error
  CHECK(cache.stats().errors == 1);
  CHECK(cache.report_json().find("\"disk\": \"unavailable\"") != std::string::npos);
}

TEST_CASE("the disk cache can be turned off") {
  setenv("CAUSAL_CONV1D_CACHE_DIR", "off", 1);
  CHECK(CacheConfig::default_dir().empty());
  setenv("CAUSAL_CONV1D_CACHE_DIR", "/some/where", 1);
  CHECK(CacheConfig::default_dir() == "/some/where");
  unsetenv("CAUSAL_CONV1D_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(CacheConfig::default_dir() == "/xdg/causal-conv1d/kernels");
  unsetenv("XDG_CACHE_HOME");
  CHECK(CacheConfig::default_dir() == std::string(getenv("HOME")) + "/.cache/causal-conv1d/kernels");
  ImageCache cache("");
  cache.store(key(), kernel());
  CompiledImage k;
  CHECK(cache.load(key(), &k));
  CHECK(cache.entry_path(key()).empty());
  CHECK(cache.report_json().find("\"disk\": \"off\"") != std::string::npos);
}

TEST_CASE("hits touch the mtime, and the size cap evicts the least recently used") {
  const std::string dir = fresh_dir("l");
  const std::string image(40 * 1024, 'z');  // ~40 KB entries, cap 100 KB: room for two
  ImageCache writer(dir, 100 * 1024);
  const std::vector<std::string> names = {"a", "b"};
  for (const auto& n : names) writer.store(key(n), kernel(image));
  const std::string pa = writer.entry_path(key("a")), pb = writer.entry_path(key("b"));
  // Age both, then hit "a" from a fresh object: its mtime moves to now.
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  utimensat(AT_FDCWD, pa.c_str(), old, 0);
  utimensat(AT_FDCWD, pb.c_str(), old, 0);
  CompiledImage k;
  REQUIRE(ImageCache(dir, 100 * 1024).load(key("a"), &k));
  struct stat sa{}, sb{};
  stat(pa.c_str(), &sa);
  stat(pb.c_str(), &sb);
  CHECK(sa.st_mtime > sb.st_mtime);
  // A third entry exceeds the cap: "b" (least recently used) goes, "a" and "c" stay.
  ImageCache third(dir, 100 * 1024);
  third.store(key("c"), kernel(image));
  CHECK(third.stats().evictions == 1);
  CHECK(access(pa.c_str(), F_OK) == 0);
  CHECK(access(pb.c_str(), F_OK) != 0);
  CHECK(access(third.entry_path(key("c")).c_str(), F_OK) == 0);
}
