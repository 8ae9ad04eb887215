#include "daemon/cli/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "core/json.h"

namespace ci::daemon {
namespace {

class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    std::string_view request_id;
    if (text.size() > 2 && text.front() == '[') {
      if (auto end = text.find("] "); end != std::string_view::npos) {
        request_id = text.substr(1, end - 1);
        text.remove_prefix(end + 2);
      }
    }
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    WriteField(w, "time", Timestamp(msg.time));
    w.Key("level");
    auto level = spdlog::level::to_string_view(msg.level);
    WriteString(w, std::string_view(level.data(), level.size()));
    if (!request_id.empty()) {
      WriteField(w, "request_id", request_id);
    }
    WriteField(w, "msg", text);
    w.EndObject();
    dest.append(buf.GetString(), buf.GetString() + buf.GetSize());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }

 private:
  static std::string Timestamp(spdlog::log_clock::time_point t) {
    auto secs = std::chrono::system_clock::to_time_t(t);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()) % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char out[64];
    std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms.count()));
    return out;
  }
};

}  // namespace

void SetupLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("code-interpreter");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);  // stderr is unbuffered anyway; keeps ordering exact
  spdlog::set_default_logger(logger);
}

}  // namespace ci::daemon
