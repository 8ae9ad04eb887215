#include "daemon/bootstrap/dockerd_config.h"

#include "core/json.h"

namespace ci::daemon {

std::string DockerdSocket(const DockerdSettings& s) { return s.run_dir + "/docker.sock"; }
std::string DockerdConfigFile(const DockerdSettings& s) { return s.run_dir + "/daemon.json"; }
std::string DockerdSeccompProfile(const DockerdSettings& s) {
  return s.run_dir + "/seccomp-executor.json";
}

std::string DaemonJson(const DockerdSettings& s) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "data-root", s.data_root);
    WriteField(w, "exec-root", s.run_dir + "/exec");
    WriteField(w, "pidfile", s.run_dir + "/docker.pid");
    w.Key("hosts");
    w.StartArray();
    WriteString(w, "unix://" + DockerdSocket(s));
    w.EndArray();
    WriteField(w, "storage-driver", s.storage_driver);
    w.Key("no-new-privileges");
    w.Bool(true);
    WriteField(w, "seccomp-profile", DockerdSeccompProfile(s));
    w.Key("userland-proxy");
    w.Bool(false);
    w.Key("live-restore");
    w.Bool(false);
    if (s.executor_network) {
      w.Key("icc");
      w.Bool(false);
    } else {
      WriteField(w, "bridge", "none");
      w.Key("iptables");
      w.Bool(false);
      w.Key("ip-forward");
      w.Bool(false);
      w.Key("ip-masq");
      w.Bool(false);
    }
    if (s.userns_remap) WriteField(w, "userns-remap", "default");
    if (!s.cgroup_parent.empty()) WriteField(w, "cgroup-parent", s.cgroup_parent);
    WriteField(w, "log-level", "warn");
    w.EndObject();
  });
}

std::vector<std::string> DockerdArgv(const DockerdSettings& s) {
  return {s.dockerd, "--config-file", DockerdConfigFile(s)};
}

}  // namespace ci::daemon
