// cgroup mounts from /proc/<pid>/mountinfo, and where a cgroup path lives under them: one reader
// for the local runtime (its own cgroup v2) and the Docker backend (a container's cgroups).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ci {

struct CgroupMount {
  std::string root;    // the mount's root within the hierarchy ("/" or a cgroup path)
  std::string point;   // where it is mounted
  std::string fstype;  // "cgroup" (v1) or "cgroup2"
  std::vector<std::string> super_options;  // v1: the controllers ("memory", "pids", ...)
};

// The cgroup and cgroup2 lines of mountinfo contents, paths unescaped (\ooo).
std::vector<CgroupMount> ParseCgroupMounts(std::string_view mountinfo);

// The directory of cgroup `path` (as /proc/<pid>/cgroup names it) under the mount of `fstype`
// (for v1, with `controller` among its options) whose root is the longest prefix of `path` on
// component boundaries; `*mount` gets that mount's point. False when no mount holds it.
bool ResolveCgroupDir(const std::vector<CgroupMount>& mounts, std::string_view fstype,
                      std::string_view controller, const std::string& path, std::string* mount,
                      std::string* dir);

}  // namespace ci
