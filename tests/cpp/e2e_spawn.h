// e2e_spawn.h — runs test_fake_driver_e2e's child scenarios (this binary re-executed with
// --child <scenario>) in fresh processes, with the fake libcuda and a given environment, and
// collects their "KEY value" output lines. Shared by test_fake_driver_e2e.cpp and
// test_cache_fleet.cpp.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

using Env = std::vector<std::pair<std::string, std::string>>;

struct Child {
  int exit_code = -1;
  std::string out, err;
  // The value after "KEY " on the first line starting with it ("" if none).
  std::string line(const std::string& key) const;
  // Lines starting with `prefix`.
  int count(const std::string& prefix) const;
};

// A child that runs while the caller goes on.
struct Started {
  pid_t pid = -1;
  std::string out_path, err_path;
  std::string error;  // why it could not start
};

// Starts this binary with --child <scenario>; `env` is applied on top of the fake's defaults
// (an empty value unsets). finish() waits for it.
Started start_child(const std::string& scenario, const Env& env);
Child finish_child(const Started& s);
inline Child spawn(const std::string& scenario, const Env& env) { return finish_child(start_child(scenario, env)); }

std::string explain(const Child& c);

// A fresh temporary directory, removed at scope exit.
struct CacheDir {
  std::string path;
  CacheDir();
  ~CacheDir();
};

extern std::string g_self;  // this executable (set by main)
