#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

namespace cc1d {

namespace {

// Each line goes to the host's callback when one is set, else to stderr.
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set(cc1d_log_fn fn, void* user) {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    user_ = user;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (fn_ != nullptr) {
      const std::string text(msg.payload.data(), msg.payload.size());
      fn_(msg.level >= spdlog::level::err ? CC1D_LOG_ERROR : static_cast<int32_t>(msg.level), text.c_str(), user_);
      return;
    }
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  cc1d_log_fn fn_ = nullptr;
  void* user_ = nullptr;
};

// spdlog's levels trace..off are 0..6 with critical (5) in between; ours have no critical.
spdlog::level::level_enum to_spdlog(cc1d_log_level l) {
  return l >= CC1D_LOG_OFF ? spdlog::level::off : static_cast<spdlog::level::level_enum>(l);
}

cc1d_log_level level_from_env() {
  const char* v = std::getenv("CAUSAL_CONV1D_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return CC1D_LOG_WARN;
  const std::string s(v);
  const char* names[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int i = 0; i <= CC1D_LOG_OFF; ++i)
    if (s == names[i]) return static_cast<cc1d_log_level>(i);
  if (s == "warning") return CC1D_LOG_WARN;
  std::fprintf(stderr, "[causal_conv1d] warning: CAUSAL_CONV1D_LOG_LEVEL='%s' is not one of "
                       "trace|debug|info|warn|error|off; using warn\n", v);
  return CC1D_LOG_WARN;
}

struct Logger {
  std::shared_ptr<CallbackSink> sink = std::make_shared<CallbackSink>();
  spdlog::logger log{"causal_conv1d", sink};
  Logger() {
    log.set_pattern("[causal_conv1d] %l: %v");
    log.set_level(to_spdlog(level_from_env()));
  }
};

Logger& instance() {
  // A private logger, not registered globally, so a host program's spdlog is untouched.
  // Never destroyed: worker threads may log during exit.
  static Logger* l = new Logger();
  return *l;
}

}  // namespace

bool log_enabled(cc1d_log_level level) { return instance().log.should_log(to_spdlog(level)); }

void write_log(cc1d_log_level level, const std::string& line) {
  instance().log.log(to_spdlog(level), spdlog::string_view_t(line));
}

// printf's %.*f prints the same digits as fmt's {:.Nf} (both round the exact binary value, ties to
// even), and costs log.cpp no instantiation of fmt's floating-point code.
std::string fixed_text(double value, int decimals) {
  std::string text(std::snprintf(nullptr, 0, "%.*f", decimals, value), '\0');
  std::snprintf(&text[0], text.size() + 1, "%.*f", decimals, value);
  return text;
}

std::string fill_pattern(const char* pattern, std::initializer_list<std::string> args) {
  std::string line;
  auto arg = args.begin();
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (p[0] == '{' && p[1] == '}' && arg != args.end()) {
      line += *arg++;
      ++p;
    } else {
      line += *p;
    }
  }
  return line;
}

void set_log_callback(cc1d_log_fn fn, void* user) { instance().sink->set(fn, user); }

void set_log_level(cc1d_log_level level) { instance().log.set_level(to_spdlog(level)); }

cc1d_log_level log_level() {
  const auto l = instance().log.level();
  return l >= spdlog::level::critical ? (l == spdlog::level::critical ? CC1D_LOG_ERROR : CC1D_LOG_OFF)
                                      : static_cast<cc1d_log_level>(l);
}

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
  }
  write_log(CC1D_LOG_WARN, message);
}

}  // namespace cc1d
