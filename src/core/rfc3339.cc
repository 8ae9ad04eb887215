#include "core/rfc3339.h"

#include <cstdio>
#include <ctime>

namespace ci {
namespace {

bool TwoDigits(const std::string& s, size_t at, int64_t& out) {
  if (at + 2 > s.size() || s[at] < '0' || s[at] > '9' || s[at + 1] < '0' || s[at + 1] > '9') {
    return false;
  }
  out = (s[at] - '0') * 10 + (s[at + 1] - '0');
  return true;
}

}  // namespace

std::string Rfc3339(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t ParseRfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  const std::string s(text);
  struct tm tm {};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return -1;
  }
  size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  }
  int64_t offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z') && i + 1 == s.size()) {
    offset = 0;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int64_t hh = 0, mm = 0;
    if (!TwoDigits(s, i + 1, hh) || !TwoDigits(s, i + 4, mm)) return -1;
    offset = (s[i] == '+' ? 1 : -1) * (hh * 3600 + mm * 60);
  } else {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) - offset;
}

}  // namespace ci
