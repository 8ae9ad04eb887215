#include "docker/container_config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/json.h"
#include "core/proc_masks.h"

namespace ci::docker {
namespace {

Status BadArg(const std::string& why) {
  return Status::Error("invalid PYTHON_EXECUTOR_DOCKER_RUN_ARGS: " + why);
}

bool ParseLimit(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || v < -1) return false;
  out = v;
  return true;
}

Result<Ulimit> ParseUlimit(const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0) {
    return BadArg("--ulimit '" + v + "': expected NAME=SOFT[:HARD]");
  }
  Ulimit u;
  u.name = v.substr(0, eq);
  std::string limits = v.substr(eq + 1);
  size_t colon = limits.find(':');
  std::string soft = limits.substr(0, colon);
  std::string hard = colon == std::string::npos ? soft : limits.substr(colon + 1);
  if (!ParseLimit(soft, u.soft) || !ParseLimit(hard, u.hard)) {
    return BadArg("--ulimit '" + v + "': limits must be integers");
  }
  static const char* kNames[] = {"core",    "cpu",      "data",   "fsize",      "locks",
                                 "memlock", "msgqueue", "nice",   "nofile",     "nproc",
                                 "rss",     "rtprio",   "rttime", "sigpending", "stack"};
  if (std::find(std::begin(kNames), std::end(kNames), u.name) == std::end(kNames)) {
    return BadArg("--ulimit '" + v + "': unknown limit '" + u.name + "'");
  }
  return u;
}

}  // namespace

Result<std::vector<std::string>> ShellSplit(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else if (c == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return BadArg("unterminated ' quote");
      cur.append(text.substr(i + 1, close - i - 1));
      i = close;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("\"\\$`\n").find(text[j + 1]) != std::string_view::npos) {
          ++j;
        }
        cur.push_back(text[j]);
      }
      if (j >= text.size()) return BadArg("unterminated \" quote");
      i = j;
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return BadArg("trailing backslash");
      cur.push_back(text[++i]);
      in_word = true;
    } else {
      cur.push_back(c);
      in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(cur));
  return out;
}

Result<RunArgs> ParseRunArgs(std::string_view text) {
  auto words = ShellSplit(text);
  if (!words.ok()) return words.status();
  RunArgs a;
  const auto& w = *words;
  for (size_t i = 0; i < w.size(); ++i) {
    std::string flag = w[i], value;
    bool has_value = false;
    if (size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
      has_value = true;
    }
    static const char* kKnown[] = {"--label",    "-l",    "--env",   "-e",
                                   "--add-host", "--dns", "--ulimit"};
    if (std::find(std::begin(kKnown), std::end(kKnown), flag) == std::end(kKnown)) {
      return BadArg("'" + flag +
                    "' is not supported (allowed: --label/-l, --env/-e, --add-host, "
                    "--dns, --ulimit)");
    }
    if (!has_value) {
      if (i + 1 >= w.size()) return BadArg("'" + flag + "' needs a value");
      value = w[++i];
    }
    if (flag == "--label" || flag == "-l") {
      size_t eq = value.find('=');
      std::string key = value.substr(0, eq);
      if (key.empty()) return BadArg("--label '" + value + "': expected KEY=VALUE");
      if (key == kAppLabel || key == kComponentLabel || key == kExpiresLabel) {
        return BadArg("--label '" + key + "' is reserved by code-interpreter");
      }
      a.labels[key] = eq == std::string::npos ? "" : value.substr(eq + 1);
    } else if (flag == "--env" || flag == "-e") {
      if (value.empty() || value.front() == '=' || value.find('=') == std::string::npos) {
        return BadArg("--env '" + value + "': expected KEY=VALUE");
      }
      a.env.push_back(value);
    } else if (flag == "--add-host") {
      size_t colon = value.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
        return BadArg("--add-host '" + value + "': expected HOST:IP");
      }
      a.extra_hosts.push_back(value);
    } else if (flag == "--dns") {
      if (value.empty()) return BadArg("--dns needs an address");
      a.dns.push_back(value);
    } else {
      auto u = ParseUlimit(value);
      if (!u.ok()) return u.status();
      a.ulimits.push_back(*u);
    }
  }
  return a;
}

std::string NormalizeImageRef(std::string_view ref) {
  std::string r(ref);
  if (r.find('@') != std::string::npos) return r;  // digested
  size_t slash = r.rfind('/');
  size_t colon = r.rfind(':');
  // A ':' after the last '/' is a tag; one before it is a registry port.
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) return r;
  return r + ":latest";
}

std::string LogOnlySeccompProfile(std::string_view profile_json) {
  rapidjson::Document d;
  std::string why;
  // The daemon compiled the profile at startup; one that does not parse is passed on for dockerd
  // to refuse by name.
  if (!ParseJson(profile_json, d, why) || !d.IsObject()) return std::string(profile_json);
  auto to_log = [&](rapidjson::Value& action) {
    if (action.IsString() && std::string_view(action.GetString()) != "SCMP_ACT_ALLOW") {
      action.SetString("SCMP_ACT_LOG", d.GetAllocator());
    }
  };
  if (d.HasMember("defaultAction")) to_log(d["defaultAction"]);
  if (d.HasMember("syscalls") && d["syscalls"].IsArray()) {
    for (auto& rule : d["syscalls"].GetArray()) {
      if (rule.IsObject() && rule.HasMember("action")) to_log(rule["action"]);
    }
  }
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  d.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

ContainerCreate ContainerCreateFromSpec(const SandboxSpec& spec, const ContainerOptions& o) {
  ContainerCreate c;
  c.image = o.image;
  c.cmd = o.cmd;
  c.agent = o.agent;
  c.user = std::to_string(spec.uid) + ":" + std::to_string(spec.gid);
  c.working_dir = spec.cwd;
  c.hostname = spec.hostname;
  c.env = spec.env;
  for (const auto& e : o.extra.env) {
    std::string key = e.substr(0, e.find('=') + 1);
    std::erase_if(c.env, [&](const std::string& x) { return x.rfind(key, 0) == 0; });
    c.env.push_back(e);
  }
  c.labels = o.extra.labels;
  c.labels[kAppLabel] = kAppValue;
  c.labels[kComponentLabel] = o.component;
  c.labels[kExpiresLabel] = std::to_string(o.expires_at);
  c.network_disabled = o.network == "none";
  c.network_mode = o.network;
  c.cap_drop = {"ALL"};
  if (spec.security.no_new_privs) c.security_opt.push_back("no-new-privileges");
  if (!spec.security.seccomp_profile_json.empty()) {
    c.seccomp_log_only = spec.security.seccomp_log_denied;
    std::string opt = "seccomp=";  // appended, not `"..." + string&&` (GCC 12 -Wrestrict)
    opt += c.seccomp_log_only ? LogOnlySeccompProfile(spec.security.seccomp_profile_json)
                              : spec.security.seccomp_profile_json;
    c.security_opt.push_back(std::move(opt));
  }
  c.seccomp_profile_name = spec.security.seccomp_profile_name;
  c.pids_limit = spec.limits.pids;
  c.memory = static_cast<int64_t>(spec.limits.memory_bytes);
  c.memory_swap = c.memory;
  if (spec.limits.cpu_percent > 0) {
    // The local runtime's cpu.max: percent of one CPU per 100 ms period.
    c.cpu_period = 100'000;
    c.cpu_quota = int64_t{spec.limits.cpu_percent} * 1000;
  }
  // Hard CPU limit one second above the soft one, as the local runtime: SIGXCPU, then SIGKILL;
  // the kernel quotas of SandboxLimits as the local runtime sets them (soft = hard).
  const auto same = [](const char* name, uint64_t v) {
    return Ulimit{name, static_cast<int64_t>(v), static_cast<int64_t>(v)};
  };
  c.ulimits = {{"cpu", spec.limits.cpu_time_sec, spec.limits.cpu_time_sec + 1},
               {"core", 0, 0},
               same("nofile", spec.limits.open_files),
               same("sigpending", spec.limits.queued_signals),
               same("msgqueue", spec.limits.message_queue_bytes),
               same("memlock", spec.limits.locked_memory_bytes)};
  if (o.cpu_rlimit_per_run) {
    c.ulimits[0] = {"cpu", -1, -1};
    c.cpu_rlimit_per_run = true;
    c.cpu_time_per_run_sec = spec.limits.cpu_time_sec;
  }
  for (const auto& u : o.extra.ulimits) {
    std::erase_if(c.ulimits, [&](const Ulimit& x) { return x.name == u.name; });
    c.ulimits.push_back(u);
  }
  std::string ids = ",uid=" + std::to_string(spec.uid) + ",gid=" + std::to_string(spec.gid);
  c.tmpfs["/workspace"] =
      "rw,exec,nosuid,nodev,size=" + std::to_string(spec.limits.workspace_bytes) + ",mode=0755" +
      ids;
  c.tmpfs["/tmp"] =
      "rw,exec,nosuid,nodev,size=" + std::to_string(spec.limits.tmp_bytes) + ",mode=1777";
  c.readonly_rootfs = spec.security.read_only_root;
  // Replaces Docker's defaults, so its /sys entries are kept (core/proc_masks.h has the rest).
  c.masked_paths = {"/sys/firmware", "/sys/devices/virtual/powercap"};
  for (const char* p : kMaskedProcFiles) c.masked_paths.push_back(std::string("/proc/") + p);
  for (const char* p : kEmptyProcDirs) c.masked_paths.push_back(std::string("/proc/") + p);
  for (const char* p : kReadOnlyProcDirs) c.readonly_paths.push_back(std::string("/proc/") + p);
  c.extra_hosts = o.extra.extra_hosts;
  c.dns = o.extra.dns;
  return c;
}

std::string ContainerCreateJson(const ContainerCreate& c) {
  return JsonText([&](JsonWriter& w) {
    json::FieldWriter v(w);
    w.StartObject();
    v("Image", c.image);
    v("Cmd", c.cmd);
    v("Entrypoint", std::vector<std::string>{});
    v("User", c.user);
    v("WorkingDir", c.working_dir);
    v("Hostname", c.hostname);
    v("Env", c.env);
    w.Key("Labels");
    w.StartObject();
    for (const auto& [key, value] : c.labels) {
      WriteString(w, key);
      WriteString(w, value);
    }
    w.EndObject();
    for (const char* k : {"AttachStdin", "AttachStdout", "AttachStderr", "OpenStdin"}) {
      w.Key(k);
      w.Bool(c.agent);
    }
    v("Tty", false);
    if (c.agent) v("StdinOnce", false);
    v("NetworkDisabled", c.network_disabled);
    w.Key("HostConfig");
    w.StartObject();
    v("NetworkMode", c.network_mode);
    v("CapDrop", c.cap_drop);
    v("SecurityOpt", c.security_opt);
    v("Privileged", false);
    v("PidsLimit", c.pids_limit);
    v("Memory", c.memory);
    v("MemorySwap", c.memory_swap);
    v("CpuPeriod", c.cpu_period);  // 0: dockerd's default (no cap without a quota)
    v("CpuQuota", c.cpu_quota);
    w.Key("Ulimits");
    w.StartArray();
    for (const auto& u : c.ulimits) {
      w.StartObject();
      v("Name", u.name);
      v("Soft", u.soft);
      v("Hard", u.hard);
      w.EndObject();
    }
    w.EndArray();
    w.Key("Tmpfs");
    w.StartObject();
    for (const char* mount : {"/workspace", "/tmp"}) {
      WriteString(w, mount);
      WriteString(w, c.tmpfs.at(mount));
    }
    w.EndObject();
    v("MaskedPaths", c.masked_paths);
    v("ReadonlyPaths", c.readonly_paths);
    v("ReadonlyRootfs", c.readonly_rootfs);
    // PID 1 must survive `kill -9 -1` from the timeout exec: the kernel never delivers a kill(-1)
    // to its namespace's init, but with Init (tini) the init's child would die and the container
    // with it (wire-protocols.md A.4). So no docker-init; PID 1 is our waiting command itself.
    v("Init", false);
    if (c.agent) {
      w.Key("LogConfig");
      w.StartObject();
      v("Type", "none");
      w.EndObject();
    }
    v("AutoRemove", false);
    v("ExtraHosts", c.extra_hosts);
    v("Dns", c.dns);
    w.Key("RestartPolicy");
    w.StartObject();
    v("Name", "no");
    w.EndObject();
    w.EndObject();
    w.EndObject();
  });
}

std::string ContainerCreateJson(const SandboxSpec& spec, const ContainerOptions& o) {
  return ContainerCreateJson(ContainerCreateFromSpec(spec, o));
}

std::vector<Measure> ContainerMeasures(const ContainerCreate& c) {
  using K = MeasureKind;
  auto has = [](const std::vector<std::string>& v, std::string_view prefix) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& x) {
      return x.compare(0, prefix.size(), prefix) == 0;
    });
  };
  // Every container has its own pid and mount namespace (no PidMode in the body); a user
  // namespace only with dockerd's userns-remap, which is not ours to claim.
  std::vector<Measure> m = {{K::kPidNamespace, 0, "docker"}, {K::kMountNamespace, 0, "docker"}};
  if (c.network_mode == "none") m.push_back({K::kNetworkNamespace, 0, "loopback only"});
  if (has(c.cap_drop, "ALL")) m.push_back({K::kNoCapabilities, 0, "docker CapDrop ALL"});
  if (c.readonly_rootfs) m.push_back({K::kReadOnlyRoot, 0, "docker"});
  if (has(c.security_opt, "no-new-privileges")) m.push_back({K::kNoNewPrivs, 0, "docker"});
  if (has(c.security_opt, "seccomp=") && !c.seccomp_log_only) {
    m.push_back(SeccompMeasure(c.seccomp_profile_name));
  }
  if (c.memory > 0) {
    m.push_back({K::kMemoryLimit, static_cast<uint64_t>(c.memory),
                 c.memory_swap == c.memory ? "docker, no swap" : "docker"});
  }
  if (c.pids_limit > 0) m.push_back({K::kPidsLimit, static_cast<uint64_t>(c.pids_limit), "docker"});
  if (c.cpu_quota > 0 && c.cpu_period > 0) {
    m.push_back(
        {K::kCpuCap, static_cast<uint64_t>(c.cpu_quota * 100 / c.cpu_period), "docker CpuQuota"});
  }
  const std::pair<const char*, K> quotas[] = {{"nofile", K::kOpenFilesLimit},
                                              {"sigpending", K::kQueuedSignalsLimit},
                                              {"msgqueue", K::kMessageQueueLimit},
                                              {"memlock", K::kLockedMemoryLimit}};
  for (const Ulimit& u : c.ulimits) {
    for (const auto& [name, kind] : quotas) {
      if (u.name == name && u.soft >= 0 && u.soft == u.hard) {
        m.push_back({kind, static_cast<uint64_t>(u.soft), "docker ulimit"});
      }
    }
    if (u.name == "cpu" && u.soft >= 0) {
      m.push_back({K::kCpuTime, static_cast<uint64_t>(u.soft), "RLIMIT_CPU"});
    } else if (u.name == "cpu" && c.cpu_rlimit_per_run) {
      m.push_back({K::kCpuTime, c.cpu_time_per_run_sec, "RLIMIT_CPU, set per call"});
    }
  }
  // No Tty in the body: nothing in the container has a controlling terminal.
  m.push_back({K::kNoTerminal, 0, "docker, no tty"});
  return m;
}

}  // namespace ci::docker
