// kernel_source.cpp — the kernel sources in force: embedded, or CAUSAL_CONV1D_KERNEL_DIR.
#include "jit/kernel_source.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "jit/hash.h"
#include "ops/op.h"

namespace cc1d {

namespace {

bool is_kernel_file(const std::string& name) {
  auto ends = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".cu") || ends(".cuh") || ends(".h");
}

// Name/content pairs sorted by name, so the digest does not depend on readdir order.
using Files = std::vector<std::pair<std::string, std::string>>;

Files read_dir(const std::string& dir) {
  Files files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "CAUSAL_CONV1D_KERNEL_DIR='" + dir +
                                           "' cannot be opened; point it at a copy of kernels_src/ "
                                           "or unset it to use the embedded kernels");
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (!is_kernel_file(name)) continue;
    std::ifstream in(dir + "/" + name, std::ios::binary);
    if (!in) continue;  // a dangling link or unreadable file is not a kernel source
    std::ostringstream ss;
    ss << in.rdbuf();
    files.emplace_back(name, ss.str());
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

KernelSources load_kernel_sources() {
  Files files;
  KernelSources ks;
  const char* dir = std::getenv("CAUSAL_CONV1D_KERNEL_DIR");
  if (dir != nullptr && *dir != '\0') {
    ks.origin = dir;
    files = read_dir(dir);
  } else {
    ks.origin = "embedded";
    for (const EmbeddedFile& f : embedded_kernel_sources())
      files.emplace_back(f.name, std::string(f.data, f.size));
    std::sort(files.begin(), files.end());
  }
  Sha256 h;
  bool have_main = false;
  for (auto& [name, data] : files) {
    h.update_field(name);
    h.update_field(data);
    if (name == ks.main_name) {
      ks.main_source = std::move(data);
      have_main = true;
    } else {
      ks.header_names.push_back(name);
      ks.header_sources.push_back(std::move(data));
    }
  }
  if (!have_main)
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "kernel sources from " + ks.origin + " lack " + ks.main_name +
                                           "; point CAUSAL_CONV1D_KERNEL_DIR at a copy of "
                                           "kernels_src/ or unset it");
  ks.hash = h.hex_digest();
  return ks;
}

KernelSources op_kernel_sources(const KernelSources& all, const std::string& kernel_file) {
  auto source_of = [&](const std::string& name) -> const std::string& {
    for (size_t i = 0; i < all.header_names.size(); ++i)
      if (all.header_names[i] == name) return all.header_sources[i];
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "kernel sources from " + all.origin + " lack " + name + " (needed by " +
                                           kernel_file + "); point CAUSAL_CONV1D_KERNEL_DIR at a whole copy of "
                                           "kernels_src/ or unset it");
  };
  // The closure of kernel_file under #include "name" (kernels_src includes nothing else). NVRTC
  // is offered these files alone, so an include this scan missed fails the compile loudly rather
  // than leaving a file out of the hash.
  std::vector<std::string> names = {kernel_file};
  for (size_t i = 0; i < names.size(); ++i) {
    std::istringstream in(source_of(names[i]));
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find_first_not_of(" \t");
      if (at == std::string::npos || line.compare(at, 10, "#include \"") != 0) continue;
      const size_t end = line.find('"', at + 10);
      const std::string inc = line.substr(at + 10, end == std::string::npos ? std::string::npos : end - at - 10);
      if (std::find(names.begin(), names.end(), inc) == names.end()) names.push_back(inc);
    }
  }
  std::sort(names.begin(), names.end());
  KernelSources ks;
  ks.origin = all.origin;
  ks.main_name = "op_" + kernel_file.substr(0, kernel_file.find('.')) + ".cu";
  ks.main_source = "#include \"" + kernel_file + "\"\n";
  Sha256 h;
  h.update_field(ks.main_name);
  h.update_field(ks.main_source);
  for (const std::string& n : names) {
    ks.header_names.push_back(n);
    ks.header_sources.push_back(source_of(n));
    h.update_field(n);
    h.update_field(ks.header_sources.back());
  }
  ks.hash = h.hex_digest();
  return ks;
}

KernelSources kernel_sources_of(const KernelSources& all, const std::string& kernel) {
  const OpEntry* op = find_kernel_op(kernel);
  if (op == nullptr) fail(CC1D_ERR_INTERNAL, "no op lists the kernel " + kernel);
  return op_kernel_sources(all, kernel_file_of(*op));
}

std::string op_digests_json(const std::function<std::string(const OpEntry&)>& hash_of) {
  std::string j;
  for (const OpEntry* op : all_ops()) {
    if (op->kernels == nullptr) continue;
    std::string digest;
    try {
      digest = hash_of(*op);
    } catch (const Error& e) {
      digest = std::string("unavailable: ") + e.what();
    }
    j += (j.empty() ? "" : ", ") + json_quote(op->name) + ": " + json_quote(digest);
  }
  return j;
}

}  // namespace cc1d
