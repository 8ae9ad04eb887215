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

void WriteStrings(JsonWriter& w, const std::vector<std::string>& v) {
  w.StartArray();
  for (const auto& s : v) WriteString(w, s);
  w.EndArray();
}

void Key(JsonWriter& w, const char* k) { w.Key(k); }

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

std::string ContainerCreateJson(const SandboxSpec& spec, const ContainerOptions& o) {
  std::string ids = std::to_string(spec.uid) + ":" + std::to_string(spec.gid);
  std::vector<std::string> env = spec.env;
  for (const auto& e : o.extra.env) {
    std::string key = e.substr(0, e.find('=') + 1);
    std::erase_if(env, [&](const std::string& x) { return x.rfind(key, 0) == 0; });
    env.push_back(e);
  }
  std::map<std::string, std::string> labels = o.extra.labels;
  labels[kAppLabel] = kAppValue;
  labels[kComponentLabel] = o.component;
  labels[kExpiresLabel] = std::to_string(o.expires_at);
  // Hard CPU limit one second above the soft one, as the local runtime: SIGXCPU, then SIGKILL.
  // The kernel quotas of SandboxLimits as the local runtime sets them (soft = hard).
  const auto same = [](const char* name, uint64_t v) {
    return Ulimit{name, static_cast<int64_t>(v), static_cast<int64_t>(v)};
  };
  std::vector<Ulimit> ulimits = {{"cpu", spec.limits.cpu_time_sec, spec.limits.cpu_time_sec + 1},
                                 {"core", 0, 0},
                                 same("nofile", spec.limits.open_files),
                                 same("sigpending", spec.limits.queued_signals),
                                 same("msgqueue", spec.limits.message_queue_bytes),
                                 same("memlock", spec.limits.locked_memory_bytes)};
  if (o.cpu_rlimit_per_run) ulimits[0] = {"cpu", -1, -1};
  for (const auto& u : o.extra.ulimits) {
    std::erase_if(ulimits, [&](const Ulimit& x) { return x.name == u.name; });
    ulimits.push_back(u);
  }
  std::vector<std::string> security;
  if (spec.security.no_new_privs) security.push_back("no-new-privileges");
  if (!spec.security.seccomp_profile_json.empty()) {
    security.push_back("seccomp=" + spec.security.seccomp_profile_json);
  }
  std::string id_opts = ",uid=" + std::to_string(spec.uid) + ",gid=" + std::to_string(spec.gid);

  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Key(w, "Image");
  WriteString(w, o.image);
  Key(w, "Cmd");
  WriteStrings(w, o.cmd);
  Key(w, "Entrypoint");
  WriteStrings(w, {});
  Key(w, "User");
  WriteString(w, ids);
  Key(w, "WorkingDir");
  WriteString(w, spec.cwd);
  Key(w, "Hostname");
  WriteString(w, spec.hostname);
  Key(w, "Env");
  WriteStrings(w, env);
  Key(w, "Labels");
  w.StartObject();
  for (const auto& [k, v] : labels) {
    WriteString(w, k);
    WriteString(w, v);
  }
  w.EndObject();
  for (const char* k : {"AttachStdin", "AttachStdout", "AttachStderr", "Tty", "OpenStdin"}) {
    Key(w, k);
    w.Bool(false);
  }
  Key(w, "NetworkDisabled");
  w.Bool(o.network == "none");
  Key(w, "HostConfig");
  w.StartObject();
  Key(w, "NetworkMode");
  WriteString(w, o.network);
  Key(w, "CapDrop");
  WriteStrings(w, {"ALL"});
  Key(w, "SecurityOpt");
  WriteStrings(w, security);
  Key(w, "Privileged");
  w.Bool(false);
  Key(w, "PidsLimit");
  w.Int64(spec.limits.pids);
  Key(w, "Memory");
  w.Int64(static_cast<int64_t>(spec.limits.memory_bytes));
  Key(w, "MemorySwap");  // the total of memory and swap: equal means no swap
  w.Int64(static_cast<int64_t>(spec.limits.memory_bytes));
  Key(w, "Ulimits");
  w.StartArray();
  for (const auto& u : ulimits) {
    w.StartObject();
    Key(w, "Name");
    WriteString(w, u.name);
    Key(w, "Soft");
    w.Int64(u.soft);
    Key(w, "Hard");
    w.Int64(u.hard);
    w.EndObject();
  }
  w.EndArray();
  Key(w, "Tmpfs");
  w.StartObject();
  WriteString(w, "/workspace");
  WriteString(w, "rw,nosuid,nodev,size=" + std::to_string(spec.limits.workspace_bytes) +
                     ",mode=0755" + id_opts);
  WriteString(w, "/tmp");
  WriteString(w, "rw,nosuid,nodev,size=" + std::to_string(spec.limits.tmp_bytes) + ",mode=1777");
  w.EndObject();
  // Replaces Docker's defaults, so its /sys entries are kept (core/proc_masks.h has the rest).
  std::vector<std::string> masked = {"/sys/firmware", "/sys/devices/virtual/powercap"};
  for (const char* p : kMaskedProcFiles) masked.push_back(std::string("/proc/") + p);
  for (const char* p : kEmptyProcDirs) masked.push_back(std::string("/proc/") + p);
  std::vector<std::string> read_only;
  for (const char* p : kReadOnlyProcDirs) read_only.push_back(std::string("/proc/") + p);
  Key(w, "MaskedPaths");
  WriteStrings(w, masked);
  Key(w, "ReadonlyPaths");
  WriteStrings(w, read_only);
  Key(w, "ReadonlyRootfs");
  w.Bool(spec.security.read_only_root);
  // PID 1 must survive `kill -9 -1` from the timeout exec: the kernel never delivers a kill(-1)
  // to its namespace's init, but with Init (tini) the init's child would die and the container
  // with it (wire-protocols.md A.4). So no docker-init; PID 1 is our waiting command itself.
  Key(w, "Init");
  w.Bool(false);
  Key(w, "AutoRemove");
  w.Bool(false);
  Key(w, "ExtraHosts");
  WriteStrings(w, o.extra.extra_hosts);
  Key(w, "Dns");
  WriteStrings(w, o.extra.dns);
  Key(w, "RestartPolicy");
  w.StartObject();
  Key(w, "Name");
  WriteString(w, "no");
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace ci::docker
