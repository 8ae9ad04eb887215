#include "runtime/kernel/sandbox_ids.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

// Runs newuidmap/newgidmap with `args` and waits; the helper's own message goes to the shim's
// stderr (the daemon's log).
SysError RunMapHelper(const std::string& helper, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(helper.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, helper.c_str(), nullptr, nullptr, argv.data(), envp);
  if (rc != 0) return SysFailErr(rc, "run " + helper + " (install the uidmap package)");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return SysFail("waitpid newuidmap");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return SysFailErr(EPERM, helper +
                                 " refused the map (are the daemon user's subordinate ids in "
                                 "/etc/subuid and /etc/subgid?)");
  }
  return SysOk();
}

std::string Line(uint32_t inside, uint32_t outside) {
  return std::to_string(inside) + " " + std::to_string(outside) + " 1\n";
}

}  // namespace

SysError ClaimIdIndex(const std::string& lock_dir, uint32_t count, uint32_t* index,
                      UniqueFd* lock) {
  for (uint32_t i = 0; i < count; ++i) {
    const std::string path = lock_dir + "/" + std::to_string(i);
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid()) return SysFailErr(errno, "open " + path);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      *index = i;
      *lock = std::move(fd);
      return SysOk();
    }
    if (errno != EWOULDBLOCK) return SysFailErr(errno, "flock " + path);
  }
  return SysFailErr(ENOSPC, "every one of the " + std::to_string(count) +
                                " sandbox ids is in use (widen SANDBOX_ID_RANGE)");
}

SysError PrepareIdLockDir(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), slash == std::string::npos ? 0700 : 0755) != 0 && errno != EEXIST) {
      return SysFailErr(errno, "mkdir " + part);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return SysFailErr(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return SysFailErr(EPERM, dir + " must be a directory owned by uid " +
                                 std::to_string(::geteuid()) + " that only it may write");
  }
  return SysOk();
}

IdRange SubordinateIds(const std::string& file, const std::string& user, uid_t uid) {
  std::string text;
  if (!cgfs::ReadFile(file, &text)) return {};
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string who = line.substr(0, a);
    if (who != user && who != std::to_string(uid)) continue;
    char* rest = nullptr;
    unsigned long first = std::strtoul(line.c_str() + a + 1, &rest, 10);
    if (rest != line.c_str() + b) continue;
    unsigned long count = std::strtoul(line.c_str() + b + 1, &rest, 10);
    if (count == 0 || first == 0 || first + count > 0xFFFFFFFFul) continue;
    return {static_cast<uint32_t>(first), static_cast<uint32_t>(count)};
  }
  return {};
}

SysError WriteIdMaps(pid_t child, const IdMaps& m) {
  const std::string proc = "/proc/" + std::to_string(child);
  if (m.rootless && m.program_uid == 0) {
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(proc + "/uid_map", Line(m.inside_uid, ::geteuid())));
    // Without CAP_SETGID in the parent namespace, gid_map is writable only once setgroups(2) is
    // disabled for good (user_namespaces(7)); otherwise the sandbox could drop a group that
    // denies it access.
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(proc + "/setgroups", "deny"));
    return cgfs::WriteFile(proc + "/gid_map", Line(m.inside_gid, ::getegid()));
  }
  if (m.rootless) {
    const std::string pid = std::to_string(child);
    CI_SYS_RETURN_IF_ERROR(RunMapHelper(
        m.newuidmap, {pid, "0", std::to_string(::geteuid()), "1", std::to_string(m.inside_uid),
                      std::to_string(m.program_uid), "1"}));
    return RunMapHelper(m.newgidmap,
                        {pid, "0", std::to_string(::getegid()), "1", std::to_string(m.inside_gid),
                         std::to_string(m.program_gid), "1"});
  }
  CI_SYS_RETURN_IF_ERROR(
      cgfs::WriteFile(proc + "/uid_map", Line(0, 65534) + Line(m.inside_uid, m.program_uid)));
  return cgfs::WriteFile(proc + "/gid_map", Line(0, 65534) + Line(m.inside_gid, m.program_gid));
}

}  // namespace ci::runtime
