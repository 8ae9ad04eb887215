// Reading configuration from the environment, one variable at a time: an invalid value is an
// error naming the variable and what was expected, never a silent default. Shared by the daemon's
// configuration and each backend's own options.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci {

// `getenv` is injectable so tests need not touch the process environment.
using EnvLookup = std::function<const char*(const char*)>;

// Reads one variable at a time and remembers the first error, so LoadConfig reads like a table.
class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& getenv) : getenv_(getenv) {}

  template <typename T>
  void Int(const char* name, T& out, int64_t min, int64_t max) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    std::string_view s(raw);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(raw, &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
      Fail(name, raw, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
      return;
    }
    out = static_cast<T>(v);
  }

  void Double(const char* name, double& out, double min, double max) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    char* end = nullptr;
    double v = std::strtod(raw, &end);
    if (*raw == '\0' || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
      Fail(name, raw, "a number from " + Trim(min) + " to " + Trim(max));
      return;
    }
    out = v;
  }

  void String(const char* name, std::string& out, bool allow_empty = false) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    if (!allow_empty && *raw == '\0') {
      Fail(name, raw, "a non-empty value");
      return;
    }
    out = raw;
  }

  void Bool(const char* name, bool& out) {
    std::string v = out ? "true" : "false";
    Choice(name, v, {"true", "false", "1", "0", "yes", "no"});
    out = v == "true" || v == "1" || v == "yes";
  }

  // Case-insensitive choice; stores the lower-case form.
  void Choice(const char* name, std::string& out, const std::vector<std::string>& choices) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    std::string v(raw);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
      Fail(name, raw, "one of " + list);
      return;
    }
    out = v;
  }

  // "FIRST-LAST", inclusive, within [min, max].
  void Range(const char* name, uint32_t& first, uint32_t& count, int64_t min, int64_t max) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    char* end = nullptr;
    errno = 0;
    long long a = std::strtoll(raw, &end, 10);
    long long b = *end == '-' ? std::strtoll(end + 1, &end, 10) : -1;
    if (*raw == '\0' || *end != '\0' || errno == ERANGE || a < min || b > max || b < a) {
      Fail(
          name, raw,
          "FIRST-LAST with " + std::to_string(min) + " <= FIRST <= LAST <= " + std::to_string(max));
      return;
    }
    first = static_cast<uint32_t>(a);
    count = static_cast<uint32_t>(b - a + 1);
  }
  const Status& error() const { return error_; }

 private:
  static std::string Trim(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  void Fail(const char* name, const char* raw, const std::string& expected) {
    error_ = Status::Error(std::string("invalid environment variable ") + name + "='" + raw +
                           "': expected " + expected);
  }

  const EnvLookup& getenv_;
  Status error_;
};

}  // namespace ci
