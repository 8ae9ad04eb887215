#include "core/mountinfo.h"

#include <algorithm>

namespace ci {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    size_t end = s.find(sep);
    out.push_back(s.substr(0, end));
    if (end == std::string_view::npos) return out;
    s.remove_prefix(end + 1);
  }
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (std::string_view f : Split(line, ' ')) {
    if (!f.empty()) out.push_back(f);
  }
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// `root` is a path prefix of `path` on component boundaries ("/a" of "/a/b", not of "/ab").
bool IsPathPrefix(const std::string& root, const std::string& path) {
  if (root == "/") return true;
  return path.compare(0, root.size(), root) == 0 &&
         (path.size() == root.size() || path[root.size()] == '/');
}

}  // namespace

std::vector<CgroupMount> ParseCgroupMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> out;
  for (std::string_view line : Split(mountinfo, '\n')) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    std::vector<std::string_view> f = Fields(line);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash < 5 || dash + 1 >= f.size()) continue;
    std::string_view fstype = f[dash + 1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m{Unescape(f[3]), Unescape(f[4]), std::string(fstype), {}};
    if (dash + 3 < f.size()) {
      for (std::string_view o : Split(f[dash + 3], ',')) m.super_options.emplace_back(o);
    }
    out.push_back(std::move(m));
  }
  return out;
}

bool ResolveCgroupDir(const std::vector<CgroupMount>& mounts, std::string_view fstype,
                      std::string_view controller, const std::string& path, std::string* mount,
                      std::string* dir) {
  size_t best_root = 0;
  bool found = false;
  for (const CgroupMount& m : mounts) {
    if (m.fstype != fstype) continue;
    if (!controller.empty() && std::find(m.super_options.begin(), m.super_options.end(),
                                         controller) == m.super_options.end()) {
      continue;
    }
    // Both the mount's root and the path are relative to the reader's cgroup namespace's root.
    if (!IsPathPrefix(m.root, path)) continue;
    if (found && m.root.size() <= best_root) continue;
    std::string rel = m.root == "/" ? path : path.substr(m.root.size());
    *mount = m.point;
    *dir = m.point + (rel == "/" ? "" : rel);
    best_root = m.root.size();
    found = true;
  }
  return found;
}

}  // namespace ci
