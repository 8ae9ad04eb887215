#include "common/fake_container.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <vector>

#include "container/sandbox_shell.h"
#include "core/sleep.h"

extern char** environ;

namespace ci::testing_support {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSandboxUser = "65532";

// Spawns argv with fds[i] as its fd i (-1: /dev/null); its pid, or an error.
Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<int>& fds) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] >= 0) {
      posix_spawn_file_actions_adddup2(&fa, fds[i], static_cast<int>(i));
    } else {
      posix_spawn_file_actions_addopen(&fa, static_cast<int>(i), "/dev/null", O_RDWR, 0);
    }
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return Status::Errno("spawning " + argv[0], err);
  return pid;
}

// One exec: nsenter's pid and the host ends of its pipes. Reading polls both streams (a test's
// streams are small and short-lived).
class FakeExec final : public container::ExecStream {
 public:
  FakeExec(pid_t pid, int in, int out, int err) : pid_(pid), in_(in), out_(out), err_(err) {}
  ~FakeExec() override {
    Close();
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  asio::awaitable<Result<bool>> Read(const container::ExecOutputSink& sink) override {
    for (;;) {
      if (out_ < 0 && err_ < 0) co_return false;
      pollfd p[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
      ::poll(p, 2, 0);
      bool got = false;
      for (int i = 0; i < 2; ++i) {
        if (p[i].fd < 0 || p[i].revents == 0) continue;
        char buf[16384];
        const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n > 0) {
          sink(i == 0 ? container::ExecOutput::kStdout : container::ExecOutput::kStderr,
               std::string_view(buf, static_cast<size_t>(n)));
          got = true;
        } else {
          ::close(p[i].fd);
          (i == 0 ? out_ : err_) = -1;
        }
      }
      if (got) co_return true;
      if (out_ >= 0 || err_ >= 0) co_await Sleep(1ms);
    }
  }

  asio::awaitable<Status> WriteAll(std::string_view data) override {
    while (!data.empty()) {
      if (in_ < 0) co_return Status::Error("stdin is closed");
      const ssize_t n = ::write(in_, data.data(), data.size());
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
      } else if (errno == EAGAIN) {
        co_await Sleep(1ms);
      } else {
        co_return Status::Errno("writing an exec's stdin", errno);
      }
    }
    co_return Status();
  }

  asio::awaitable<void> CloseStdin() override {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
    co_return;
  }

  void Close() override {
    for (int* fd : {&in_, &out_, &err_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  bool finished() const override { return reaped_; }

  asio::awaitable<Result<std::optional<int>>> ExitCode() override {
    while (!reaped_) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else if (r < 0) {
        co_return Status::Errno("waitpid", errno);
      } else {
        co_await Sleep(1ms);
      }
    }
    co_return std::optional<int>(status_);
  }

 private:
  pid_t pid_;
  int in_, out_, err_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace

Result<std::shared_ptr<FakeContainer>> FakeContainer::Start() {
  int info[2];
  if (::pipe2(info, O_CLOEXEC) != 0) return Status::Errno("pipe", errno);
  std::vector<std::string> argv = {"bwrap",
                                   "--die-with-parent",
                                   "--unshare-pid",
                                   "--as-pid-1",
                                   "--unshare-ipc",
                                   "--unshare-net",
                                   "--unshare-uts",
                                   "--ro-bind",
                                   "/usr",
                                   "/usr",
                                   "--ro-bind",
                                   "/etc",
                                   "/etc",
                                   "--symlink",
                                   "usr/bin",
                                   "/bin",
                                   "--symlink",
                                   "usr/sbin",
                                   "/sbin",
                                   "--symlink",
                                   "usr/lib",
                                   "/lib",
                                   "--symlink",
                                   "usr/lib64",
                                   "/lib64",
                                   "--proc",
                                   "/proc",
                                   "--dev",
                                   "/dev",
                                   "--tmpfs",
                                   "/workspace",
                                   "--tmpfs",
                                   "/tmp",
                                   "--chdir",
                                   "/workspace",
                                   "--info-fd",
                                   "3"};
  for (const std::string& a : container::ContainerInitArgv(std::nullopt)) argv.push_back(a);
  Result<pid_t> bwrap = Spawn(argv, {-1, -1, 2, info[1]});
  ::close(info[1]);
  if (!bwrap.ok()) {
    ::close(info[0]);
    return bwrap.status();
  }
  // {"child-pid": N}: PID 1 of the container, as this host sees it.
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(info[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(info[0]);
  const size_t colon = text.find(':');
  const pid_t init = colon == std::string::npos ? 0 : std::atoi(text.c_str() + colon + 1);
  std::shared_ptr<FakeContainer> c(new FakeContainer(*bwrap, init));
  if (init <= 0) return Status::Error("bwrap did not start (is it installed?)");
  // bwrap reports the pid before the mounts are done: the container runs once its PID 1 has
  // exec'd the command (no longer bwrap).
  char bwrap_exe[PATH_MAX] = {}, exe[PATH_MAX] = {};
  if (::readlink(("/proc/" + std::to_string(*bwrap) + "/exe").c_str(), bwrap_exe,
                 sizeof bwrap_exe - 1) < 0) {
    return Status::Errno("readlink of bwrap's exe", errno);
  }
  const std::string init_exe = "/proc/" + std::to_string(init) + "/exe";
  for (int i = 0;; ++i) {
    std::fill(std::begin(exe), std::end(exe), '\0');
    if (::readlink(init_exe.c_str(), exe, sizeof exe - 1) > 0 &&
        std::string_view(exe) != std::string_view(bwrap_exe)) {
      break;
    }
    if (i == 5000) return Status::Error("the fake container's PID 1 never started");
    ::usleep(1000);
  }
  // The workspace and /tmp are the sandbox user's, as in the executor image.
  Result<pid_t> chown =
      Spawn({"nsenter", "-t", std::to_string(init), "-m", "--", "chown",
             std::string(kSandboxUser) + ":" + kSandboxUser, "/workspace", "/tmp"},
            {-1, -1, 2});
  int status = 0;
  if (!chown.ok() || ::waitpid(*chown, &status, 0) != *chown || status != 0) {
    return Status::Error("nsenter into the fake container failed (not root?)");
  }
  return c;
}

FakeContainer::~FakeContainer() { Kill(); }

asio::awaitable<Result<std::shared_ptr<container::ExecStream>>> FakeContainer::Exec(
    const std::vector<std::string>& cmd, container::ExecStdin stdin_use) {
  if (::kill(init_, 0) != 0) co_return Status::Gone("the fake container is gone");
  int in[2] = {-1, -1}, out[2], err[2];
  if ((stdin_use.attach && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    co_return Status::Errno("pipe", errno);
  }
  std::vector<std::string> argv = {"nsenter",
                                   "-t",
                                   std::to_string(init_),
                                   "-m",
                                   "-p",
                                   "-i",
                                   "-n",
                                   "-u",
                                   "--",
                                   "setpriv",
                                   std::string("--reuid=") + kSandboxUser,
                                   std::string("--regid=") + kSandboxUser,
                                   "--clear-groups",
                                   "--",
                                   "env",
                                   "-i",
                                   "--chdir=/workspace",
                                   "PATH=/usr/local/bin:/usr/bin:/bin",
                                   "HOME=/tmp",
                                   "setsid"};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  Result<pid_t> pid = Spawn(argv, {in[0], out[1], err[1]});
  for (int fd : {in[0], out[1], err[1]}) {
    if (fd >= 0) ::close(fd);
  }
  if (in[1] >= 0) ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  if (!pid.ok()) {
    for (int fd : {in[1], out[0], err[0]}) {
      if (fd >= 0) ::close(fd);
    }
    co_return pid.status();
  }
  co_return std::shared_ptr<container::ExecStream>(
      std::make_shared<FakeExec>(*pid, in[1], out[0], err[0]));
}

asio::awaitable<void> FakeContainer::Remove(ResourceReport&) {
  ++removals_;
  Kill();
  co_return;
}

void FakeContainer::Kill() {
  if (bwrap_ <= 0) return;
  ::kill(init_, SIGKILL);  // the pid namespace's init: everything in it goes
  ::kill(bwrap_, SIGKILL);
  ::waitpid(bwrap_, nullptr, 0);
  bwrap_ = 0;
}

}  // namespace ci::testing_support
