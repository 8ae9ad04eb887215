#include "daemon/bootstrap/nested_dockerd.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/pidfd.h"
#include "core/sleep.h"
#include "docker/engine_client.h"

extern char** environ;

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;

constexpr size_t kKeptLines = 30;

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out.flush());
}

bool OnOverlayfs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == OVERLAYFS_SUPER_MAGIC;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// dockerd logs with logrus: `time="..." level=warning msg="..."`; the level picks ours. Its
// info lines (mostly containerd's, one set per container) are debug here.
void LogLine(const std::string& line) {
  auto has = [&line](const char* level) { return line.find(level) != std::string::npos; };
  if (has("level=error") || has("level=fatal") || has("level=panic")) {
    spdlog::error("dockerd: {}", line);
  } else if (has("level=warning")) {
    spdlog::warn("dockerd: {}", line);
  } else if (has("level=info") || has("level=debug")) {
    spdlog::debug("dockerd: {}", line);
  } else {
    spdlog::info("dockerd: {}", line);
  }
}

// Removes what a previous run left that would stop dockerd from starting (dind does the same).
void RemoveStalePidFiles(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::remove(run_dir + "/docker.pid", ec);
  std::filesystem::remove(run_dir + "/exec/containerd/containerd.pid", ec);
}

}  // namespace

Downgrade UsernsRemapDowngrade(const std::string& reason) {
  return {"user-namespace remapping of the nested dockerd's containers", reason,
          "DIND_USERNS_REMAP=true where user namespaces work, if root's per-user kernel "
          "counters in the container may be shared with the sandboxes"};
}

NestedDockerd::NestedDockerd(asio::any_io_executor ex, DockerdSettings settings,
                             DockerdHardening hardening, std::string executor_seccomp_json)
    : ex_(std::move(ex)),
      settings_(std::move(settings)),
      hardening_(std::move(hardening)),
      executor_seccomp_json_(std::move(executor_seccomp_json)) {}

NestedDockerd::~NestedDockerd() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

Status NestedDockerd::WriteConfiguration() {
  std::error_code ec;
  for (const std::string& dir : {settings_.run_dir, settings_.data_root}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::Error("creating " + dir + ": " + ec.message());
  }
  ::chmod(settings_.run_dir.c_str(), 0700);  // the socket is the daemon's alone
  if (settings_.userns_remap) {
    // The remapped root must traverse to its part of the data root (dockerd refuses otherwise).
    for (std::filesystem::path p = settings_.data_root; p.has_relative_path();
         p = p.parent_path()) {
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0) ::chmod(p.c_str(), (st.st_mode & 07777) | S_IXOTH);
    }
  }
  RemoveStalePidFiles(settings_.run_dir);
  if (!WriteFile(DockerdSeccompProfile(settings_), executor_seccomp_json_) ||
      !WriteFile(DockerdConfigFile(settings_), DaemonJson(settings_))) {
    return Status::Error("writing the dockerd configuration in " + settings_.run_dir + ": " +
                         std::strerror(errno));
  }
  return Status();
}

Status NestedDockerd::Spawn() {
  std::vector<std::string> args = DockerdArgv(settings_);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Our environment, plus what the dind entrypoint exports (dockerd reads it to know it is in a
  // container).
  std::string container = "container=docker";
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "container=", 10) != 0) envp.push_back(*e);
  }
  envp.push_back(container.data());
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::Error(std::string("pipe: ") + strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return Status::Error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // The child: system calls only until execve.
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    const char* step = "";
    if (int err = ApplyDockerdHardening(hardening_, &step); err != 0) {
      const char* what = std::strerror(err);
      ::write(2, step, std::strlen(step));
      ::write(2, ": ", 2);
      ::write(2, what, std::strlen(what));
      ::_exit(126);
    }
    ::execve(argv[0], argv.data(), envp.data());
    const char* what = std::strerror(errno);
    ::write(2, "execve: ", 8);
    ::write(2, what, std::strlen(what));
    ::_exit(127);
  }
  ::close(out[1]);
  int pidfd = PidfdOpen(pid);
  if (pidfd < 0) {
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    return Status::Error(std::string("pidfd_open: ") + std::strerror(e));
  }
  pid_ = pid;
  started_at_ = std::chrono::steady_clock::now();
  spdlog::info("nested dockerd started (pid {}): {} --config-file {}", pid, settings_.dockerd,
               DockerdConfigFile(settings_));
  auto self = shared_from_this();
  asio::co_spawn(
      ex_, [self, fd = out[0]] { return self->ForwardLog(fd); }, asio::detached);
  asio::co_spawn(
      ex_, [self, pid, pidfd] { return self->Watch(pid, pidfd); }, asio::detached);
  return Status();
}

asio::awaitable<void> NestedDockerd::ForwardLog(int fd) {
  asio::posix::stream_descriptor in(ex_, fd);
  std::string pending;
  char buf[4096];
  for (;;) {
    boost::system::error_code ec;
    size_t n =
        co_await in.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
    if (ec || n == 0) break;
    pending.append(buf, n);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      LogLine(line);
      last_lines_.push_back(std::move(line));
      if (last_lines_.size() > kKeptLines) last_lines_.pop_front();
    }
  }
  if (!pending.empty()) {
    LogLine(pending);
    last_lines_.push_back(pending);
  }
}

asio::awaitable<void> NestedDockerd::Watch(pid_t pid, int pidfd) {
  asio::posix::stream_descriptor exited(ex_, pidfd);
  boost::system::error_code ec;
  co_await exited.async_wait(asio::posix::stream_descriptor::wait_read,
                             asio::redirect_error(use_awaitable, ec));
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (pid_ == pid) {
    pid_ = 0;
    answering_ = false;
  }
  last_exit_ = DescribeExit(status);
  if (stopping_) {
    spdlog::info("nested dockerd (pid {}) {}", pid, last_exit_);
    co_return;
  }
  if (!supervising_) co_return;  // Start() reports it
  spdlog::error("nested dockerd (pid {}) {}; restarting it in {} s", pid, last_exit_,
                backoff_.count());
  asio::co_spawn(
      ex_, [self = shared_from_this()] { return self->Restart(); }, asio::detached);
}

asio::awaitable<void> NestedDockerd::Restart() {
  // A dockerd that ran a good while is restarted at once; one that keeps failing, less often.
  if (std::chrono::steady_clock::now() - started_at_ > 60s) backoff_ = 1s;
  co_await Sleep(backoff_);
  backoff_ = std::min<std::chrono::seconds>(backoff_ * 2, 30s);
  if (stopping_) co_return;
  ++restarts_;
  RemoveStalePidFiles(settings_.run_dir);
  if (Status s = Spawn(); !s.ok()) {
    spdlog::error("nested dockerd: restart failed: {}; trying again in {} s", s.message(),
                  backoff_.count());
    asio::co_spawn(
        ex_, [self = shared_from_this()] { return self->Restart(); }, asio::detached);
    co_return;
  }
  const pid_t pid = pid_;
  if (co_await WaitForPing(pid, 120s)) {
    spdlog::info("nested dockerd (pid {}) answers again after restart {}", pid, restarts_);
  }
}

asio::awaitable<bool> NestedDockerd::WaitForPing(pid_t pid, std::chrono::seconds timeout) {
  docker::Endpoint ep;
  ep.socket_path = DockerdSocket(settings_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ == pid && std::chrono::steady_clock::now() < deadline) {
    docker::EngineClient client(ex_, ep, 2s);
    if (Status ping = co_await client.Negotiate(); ping.ok()) {
      answering_ = pid_ == pid;
      co_return answering_;
    }
    co_await Sleep(250ms);
  }
  co_return false;
}

asio::awaitable<Status> NestedDockerd::Start(std::chrono::seconds timeout) {
  if (settings_.storage_driver == "overlay2" && OnOverlayfs(settings_.data_root)) {
    settings_.storage_driver = "vfs";
    downgrades_.push_back(
        {"overlay2 storage for the nested dockerd",
         settings_.data_root + " is on overlayfs, where overlay2 cannot mount: vfs copies every "
                               "layer (slow, large)",
         "mount a volume at " + settings_.data_root + " (the image declares it: docker run -v)"});
  }
  if (!settings_.userns_remap) {
    downgrades_.push_back(UsernsRemapDowngrade(
        "off (DIND_USERNS_REMAP=false, the default): executors run as uid 65532 of the "
        "container's namespace (with userns-remap the kernel would charge every container's "
        "per-user counters, such as inotify instances, to dockerd's root instead)"));
  }
  for (int attempt = 0;; ++attempt) {
    if (Status s = WriteConfiguration(); !s.ok()) co_return s;
    last_lines_.clear();
    if (Status s = Spawn(); !s.ok()) co_return Status::Error("starting dockerd: " + s.message());
    const std::string socket = DockerdSocket(settings_);
    if (co_await WaitForPing(pid_, timeout)) {
      supervising_ = true;
      spdlog::info("nested dockerd answers on {} (storage {})", socket, settings_.storage_driver);
      co_return Status();
    }
    if (pid_ > 0) {
      co_await Stop(5s);
      stopping_ = false;
      co_return Status::Error("dockerd did not answer on " + socket + " within " +
                              std::to_string(timeout.count()) +
                              " s; its last lines: " + LastLines());
    }
    co_await Sleep(100ms);  // the log's last lines
    const std::string why = last_lines_.empty() ? last_exit_ : last_lines_.back();
    bool overlay_failed = LastLines().find("overlay") != std::string::npos;
    if (attempt < 2 && settings_.storage_driver == "overlay2" && overlay_failed) {
      spdlog::warn("nested dockerd could not use overlay2 here; starting it again with vfs");
      settings_.storage_driver = "vfs";
      downgrades_.push_back(
          {"overlay2 storage for the nested dockerd",
           "overlay2 does not work on " + settings_.data_root + ": " + why,
           "mount a volume on an ext4 or xfs filesystem at " + settings_.data_root});
      continue;
    }
    // userns-remap needs subordinate ids for "dockremap" (dockerd adds them) and user
    // namespaces: where it cannot start with it, dockerd starts without.
    if (attempt < 2 && settings_.userns_remap) {
      spdlog::warn("nested dockerd did not start with userns-remap; starting it again without");
      settings_.userns_remap = false;
      downgrades_.push_back(UsernsRemapDowngrade("dockerd did not start with it: " + why));
      continue;
    }
    co_return Status::Error("dockerd " + last_exit_ +
                            " at startup; its last lines: " + LastLines());
  }
}

asio::awaitable<void> NestedDockerd::Stop(std::chrono::seconds grace) {
  stopping_ = true;
  if (pid_ <= 0) co_return;
  spdlog::info("stopping the nested dockerd (pid {})", pid_);
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) co_await Sleep(50ms);
  if (pid_ > 0) {
    spdlog::warn("nested dockerd (pid {}) did not stop within {} s: killing it", pid_,
                 grace.count());
    ::kill(pid_, SIGKILL);
    while (pid_ > 0) co_await Sleep(50ms);
  }
}

NestedDockerdReport NestedDockerd::Report() const {
  NestedDockerdReport r;
  r.pid = pid_;
  r.answering = answering_;
  r.restarts = restarts_;
  r.storage_driver = settings_.storage_driver;
  r.last_exit = restarts_ > 0 ? last_exit_ : "";
  for (const auto& c : hardening_.dropped) r.dropped_capabilities.push_back(c.name);
  if (pid_ > 0) {
    if (auto s = ReadProcessSecurity(pid_); s.ok()) {
      r.security = *s;
      r.security_read = true;
    }
  }
  return r;
}

std::string NestedDockerd::LastLines() const {
  std::string out;
  size_t from = last_lines_.size() > 5 ? last_lines_.size() - 5 : 0;
  for (size_t i = from; i < last_lines_.size(); ++i)
    out += (out.empty() ? "" : " | ") + last_lines_[i];
  return out.empty() ? "(none)" : out;
}

}  // namespace ci::daemon
