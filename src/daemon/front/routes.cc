#include "daemon/front/routes.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace ci::daemon {
namespace {

// "/a//b/" -> {"a", "", "b", ""}: empty segments count, so "/v1/files/" is not "/v1/files".
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  path.remove_prefix(1);
  for (;;) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) return out;
    path.remove_prefix(slash + 1);
  }
}

bool IsParameter(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

std::optional<std::string> MatchPath(std::string_view pattern, std::string_view path) {
  if (!pattern.starts_with('/') || !path.starts_with('/')) return std::nullopt;
  std::vector<std::string_view> want = Segments(pattern), got = Segments(path);
  if (want.size() != got.size()) return std::nullopt;
  std::string value;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!IsParameter(want[i])) {
      if (want[i] != got[i]) return std::nullopt;
    } else if (got[i].empty()) {
      return std::nullopt;
    } else {
      value = PercentDecode(got[i]);
    }
  }
  return value;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> QueryParameter(std::string_view target, std::string_view name) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    std::string value(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    std::replace(value.begin(), value.end(), '+', ' ');
    return PercentDecode(value);
  }
  return std::nullopt;
}

}  // namespace ci::daemon
