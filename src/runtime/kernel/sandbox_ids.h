// Which host ids a sandbox's processes have, and how the shim claims them (src/runtime/README.md
// "Sandbox ids").
//
// The kernel keeps several quotas per *user*: pipe buffer pages and RLIMIT_NPROC per host uid,
// inotify instances, queued signals, POSIX message queue bytes and locked memory per uid in each
// user namespace, charged up the chain to the uid that created (owns) the namespace. A sandbox
// whose program runs as a uid shared with other sandboxes, or whose namespace root created, can
// use up those quotas for everyone. So, as root, every live sandbox gets a host uid/gid of its
// own from a configured range: its program runs as that id and its user namespace is created by
// it. Rootless, the program gets one of the daemon user's subordinate ids (/etc/subuid, mapped by
// newuidmap/newgidmap) when it has any; the namespace is then still the daemon user's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "runtime/kernel/sys_error.h"
#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {

struct IdRange {
  uint32_t first = 0;
  uint32_t count = 0;  // 0: no range
  bool empty() const { return count == 0; }
};

// 65536 ids just below 2^31: far above the ids distributions hand out to users (1000+), to
// subordinate ranges (100000 + 65536 per user) and to systemd's dynamic users (61184-65519).
constexpr IdRange kDefaultSandboxIds = {2147418112u, 65536u};

// Claims the lowest free index of [0, count) by taking an exclusive flock on <lock_dir>/<index>,
// held through *lock for as long as the sandbox lives (the kernel drops it when the shim is
// gone, however it ends). Sandboxes of every daemon on this host that use the same directory
// never share an index. ENOSPC when every index is taken.
SysError ClaimIdIndex(const std::string& lock_dir, uint32_t count, uint32_t* index, UniqueFd* lock);

// The daemon side: creates the lock directory (mode 0700) if needed and checks it is a directory
// owned by this user that nobody else may write. An error says what is wrong.
SysError PrepareIdLockDir(const std::string& dir);

// One user's subordinate ids from an /etc/subuid-style file ("name:first:count" or
// "uid:first:count" lines); the first entry for the user. Empty when none.
IdRange SubordinateIds(const std::string& file, const std::string& user, uid_t uid);

// Writes the maps of `child`'s user namespace: inside 0 (init) and `inside` (the program).
// - root (`program_uid`, `program_gid` from the range): "0 65534 1" and "<inside> <id> 1";
// - rootless with subordinate ids: newuidmap/newgidmap `<pid> 0 <euid> 1 <inside> <subid> 1`
//   (setuid helpers that check /etc/subuid; setgroups stays allowed, so init can drop the
//   daemon user's supplementary groups);
// - rootless without (`program_uid` == 0 marks it): the one id an unprivileged writer may map,
//   "<inside> <euid> 1", after "deny" to setgroups (user_namespaces(7)).
struct IdMaps {
  bool rootless = false;
  uint32_t inside_uid = 65532, inside_gid = 65532;
  uint32_t program_uid = 0, program_gid = 0;  // host ids of the program; 0: the one-id map
  std::string newuidmap = "newuidmap", newgidmap = "newgidmap";
};
SysError WriteIdMaps(pid_t child, const IdMaps& maps);

}  // namespace ci::runtime
