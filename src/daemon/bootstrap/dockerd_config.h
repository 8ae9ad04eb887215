// The nested dockerd's configuration (Docker-in-Docker): its daemon.json and command line, as
// values. Pure, so the options it is given are tested on their own (golden JSON).
#pragma once

#include <string>
#include <vector>

namespace ci::daemon {

struct DockerdSettings {
  std::string dockerd = "/usr/sbin/dockerd";
  std::string data_root = "/var/lib/code-interpreter/docker";  // images and containers
  std::string run_dir = "/run/code-interpreter/dockerd";  // socket, pid file, exec root, config
  std::string storage_driver = "overlay2";                // or "vfs" when overlay2 cannot work here
  bool executor_network = false;  // executors join a bridge network (not "none")
  // Containers in a user namespace of dockerd's "dockremap" range. Off by default: the kernel
  // charges every container's per-user counters (inotify instances, ...) to the namespace's
  // owner, dockerd's root, so one sandbox could use up what root has (hostile-dind found it).
  bool userns_remap = false;
  // Where its containers' cgroups go ("" = dockerd's default, /docker of the cgroup namespace):
  // below the container's own cgroup when the daemon shares the host's (cgroup_nesting.h).
  std::string cgroup_parent;
};

std::string DockerdSocket(const DockerdSettings& s);          // run_dir + "/docker.sock"
std::string DockerdConfigFile(const DockerdSettings& s);      // run_dir + "/daemon.json"
std::string DockerdSeccompProfile(const DockerdSettings& s);  // run_dir + "/seccomp-executor.json"

// The daemon.json: its own data root, exec root, pid file and socket (never /var/run/docker.sock:
// nothing else in this container is meant to reach it), the storage driver, and what its
// containers get by default: no-new-privileges, our executor seccomp profile, no userland proxy,
// live-restore off. Without an executor network there is no bridge and no iptables at all, so no
// container can reach another (icc is moot: dockerd refuses icc=false without iptables); with one,
// a bridge with icc off.
std::string DaemonJson(const DockerdSettings& s);

// dockerd --config-file <run_dir>/daemon.json
std::vector<std::string> DockerdArgv(const DockerdSettings& s);

}  // namespace ci::daemon
