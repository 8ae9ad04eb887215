// Shared cgroup helpers and version detection.
#include "runtime/kernel/cgroups.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/random.h"
#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace cgfs {
namespace {
TestHooks* g_hooks = nullptr;
void Trace(const std::string& op) {
  if (g_hooks != nullptr) g_hooks->ops.push_back(op);
}
}  // namespace

void SetTestHooks(TestHooks* hooks) { g_hooks = hooks; }

SysError Mkdir(const std::string& path, bool exist_ok) {
  Trace("mkdir " + path);
  if (::mkdir(path.c_str(), 0755) == 0) {
    if (g_hooks != nullptr && g_hooks->after_mkdir) g_hooks->after_mkdir(path);
    return SysOk();
  }
  if (exist_ok && errno == EEXIST) return SysOk();
  return SysFailErr(errno, "mkdir " + path);
}

std::vector<std::string> ReadWords(const std::string& path) {
  std::vector<std::string> words;
  std::string text;
  if (!ReadFile(path, &text)) return words;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = text.find_first_not_of(" \t\n", pos);
    if (start == std::string::npos) break;
    size_t end = text.find_first_of(" \t\n", start);
    if (end == std::string::npos) end = text.size();
    words.push_back(text.substr(start, end - start));
    pos = end;
  }
  return words;
}

SysError WriteFile(const std::string& path, const std::string& value) {
  Trace("write " + path + " " + value);
  // O_CREAT only matters for the temp-dir tests; on cgroupfs the control files already exist.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return SysFailErr(errno, "open " + path);
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return SysFailErr(errno, "write '" + value + "' to " + path);
  if (static_cast<size_t>(n) != value.size()) return SysFailErr(EIO, "short write to " + path);
  return SysOk();
}

bool ReadFile(const std::string& path, std::string* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  out->clear();
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool ReadKey(const std::string& path, const std::string& key, uint64_t* value) {
  std::string text;
  if (!ReadFile(path, &text)) return false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ' ') {
      *value = std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
      return true;
    }
    pos = end + 1;
  }
  return false;
}

bool ReadU64(const std::string& path, uint64_t* value) {
  std::string text;
  if (!ReadFile(path, &text) || text.empty()) return false;
  *value = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

void KillListed(const std::string& procs_file) {
  std::string procs;
  if (!ReadFile(procs_file, &procs)) return;
  char* p = procs.data();
  while (*p != '\0') {
    char* end = nullptr;
    long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
    p = end;
    while (*p == '\n') ++p;
  }
}

SysError KillAndRmdir(const std::string& dir, const std::string& procs_file) {
  if (!Exists(dir)) return SysOk();
  int err = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    KillListed(procs_file);
    if (attempt == 0) {
      // A frozen cgroup (Sandbox::Freeze) keeps its killed tasks until it is thawed (v1).
      for (const CgroupFreezer& f : {CgroupFreezer{1, dir}, CgroupFreezer{2, dir}}) {
        if (Exists(f.control()) && FreezeAsked(f)) (void)WriteFrozen(f, false);
      }
      Trace("rmdir " + dir);
    }
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return SysOk();
    err = errno;
    if (err != EBUSY) break;
    // A killed task stays in the cgroup until it is fully torn down (mm freed, reaped).
    struct timespec ts = {0, 10 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
  return SysFailErr(err, "rmdir " + dir);
}

}  // namespace cgfs

std::string CgroupFreezer::control() const {
  return dir + (version == 2 ? "/cgroup.freeze" : "/freezer.state");
}

SysError WriteFrozen(const CgroupFreezer& f, bool frozen) {
  if (f.version == 2) return cgfs::WriteFile(f.control(), frozen ? "1" : "0");
  return cgfs::WriteFile(f.control(), frozen ? "FROZEN" : "THAWED");
}

bool IsFrozen(const CgroupFreezer& f) {
  if (f.version == 2) {
    uint64_t v = 0;
    return cgfs::ReadKey(f.dir + "/cgroup.events", "frozen", &v) && v == 1;
  }
  // Reading freezer.state is what moves a v1 cgroup from FREEZING to FROZEN.
  std::string state;
  return cgfs::ReadFile(f.control(), &state) && state.rfind("FROZEN", 0) == 0;
}

bool FreezeAsked(const CgroupFreezer& f) {
  std::string state;
  if (!cgfs::ReadFile(f.control(), &state)) return false;
  return f.version == 2 ? state.rfind("1", 0) == 0 : state.rfind("THAWED", 0) != 0;
}

SysError KillAndThaw(const CgroupFreezer& f) {
  if (!FreezeAsked(f)) return SysOk();
  if (f.version == 2 && cgfs::Exists(f.dir + "/cgroup.kill")) {
    (void)cgfs::WriteFile(f.dir + "/cgroup.kill", "1");
  } else {
    cgfs::KillListed(f.dir + "/cgroup.procs");
  }
  return WriteFrozen(f, false);
}

std::unique_ptr<Cgroup> MakeCgroup(const CgroupLayout& layout, std::string name) {
  if (layout.version == 2) return MakeCgroupV2(layout.root, std::move(name));
  return MakeCgroupV1(layout.root, std::move(name));
}

bool CgroupV1Usable(const std::string& root) {
  return cgfs::Exists(root + "/memory/memory.limit_in_bytes") && cgfs::Exists(root + "/pids");
}

std::string CgroupV1Missing(const std::string& root) {
  return "no cgroup v1 memory and pids mounts under " + root;
}

std::string CpuCapUnavailable(const CgroupLayout& layout) {
  if (layout.version == 1) {
    if (cgfs::Exists(layout.root + "/cpu/cpu.cfs_quota_us")) return "";
    return "no cgroup v1 cpu controller with CFS bandwidth control at " + layout.root + "/cpu";
  }
  if (layout.version == 2) {
    for (const std::string& c : cgfs::ReadWords(layout.root + "/cgroup.subtree_control")) {
      if (c == "cpu") return "";
    }
    return "the cpu controller is not enabled in " + layout.root + "/cgroup.subtree_control";
  }
  return "the sandboxes get no cgroup";
}

CgroupSetup SetUpCgroupsOnce(const std::string& configured_root) {
  if (!configured_root.empty()) return SetUpCgroups(configured_root, {});
  // Thread-safe one-time initialisation; the daemon moves itself at most once per process.
  static const CgroupSetup detected = SetUpCgroups("", {});
  return detected;
}

bool DetectCgroups(const std::string& configured_root, CgroupLayout* out, std::string* why_not) {
  CgroupProcInputs in;
  if (!configured_root.empty()) {
    if (cgfs::Exists(configured_root + "/cgroup.controllers")) {
      CgroupV2Probe p;
      p.own = configured_root;
      p.available = cgfs::ReadWords(configured_root + "/cgroup.controllers");
      for (const char* c : {"memory", "pids"}) {
        if (!p.Has(c)) {
          *why_not = MissingV2ControllerMessage(p, c);
          return false;
        }
      }
      *out = {2, configured_root};
      return true;
    }
    if (CgroupV1Usable(configured_root)) {
      *out = {1, configured_root};
      return true;
    }
    *why_not = "CGROUP_ROOT " + configured_root +
               " is neither a cgroup v2 directory (no cgroup.controllers) nor a v1 root with "
               "memory and pids mounts";
    return false;
  }
  CgroupV2Probe p = ProbeCgroupV2(in);
  if (p.error.empty() && p.Has("memory") && p.Has("pids")) {
    // After SetUpCgroups moved this process, its cgroup is the leaf <own>/daemon.
    std::string own = p.own;
    const std::string leaf = std::string("/") + kCgroupDaemonLeaf;
    if (own.size() > leaf.size() && own.compare(own.size() - leaf.size(), leaf.size(), leaf) == 0 &&
        cgfs::Exists(own.substr(0, own.size() - leaf.size()) + "/" + kCgroupParent)) {
      own.resize(own.size() - leaf.size());
    }
    *out = {2, own + "/" + kCgroupParent};
    return true;
  }
  if (CgroupV1Usable(in.v1_root)) {
    *out = {1, in.v1_root};
    return true;
  }
  if (!p.error.empty()) {
    *why_not = "no usable cgroups: " + p.error + "; and " + CgroupV1Missing(in.v1_root);
  } else {
    *why_not = MissingV2ControllerMessage(p, p.Has("memory") ? "pids" : "memory") +
               " (and there are " + CgroupV1Missing(in.v1_root) + ")";
  }
  return false;
}

std::string RandomCgroupName() {
  std::string name = RandomHex(8);
  if (name.empty()) {
    // getrandom cannot fail for 8 bytes once the pool is initialised; keep a unique fallback.
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", static_cast<unsigned>(::getpid()),
                  static_cast<unsigned>(::time(nullptr)));
    name = buf;
  }
  return name;
}

std::string SandboxCgroupName() { return std::to_string(::getpid()) + "-" + RandomCgroupName(); }

}  // namespace ci::runtime
