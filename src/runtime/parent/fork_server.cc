#include "runtime/parent/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/signal_state.h"
#include "runtime/init/embedded_python.h"
#include "runtime/init/sandbox_init.h"
#include "runtime/parent/sandbox_parent.h"
#include "runtime/wire/fd_passing.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"

extern char** environ;

namespace ci::runtime {
namespace {

void ZygoteLog(const std::string& message) {
  std::fprintf(stderr, "code-interpreter zygote[%d]: %s\n", ::getpid(), message.c_str());
}

// Root runs the warm imports in a mount namespace of its own with a private /tmp: what an import
// writes or reads there (matplotlib's configuration and cache under MPLCONFIGDIR=/tmp/...) is
// nobody else's. Its shims inherit the namespace; they use /usr, /sys/fs/cgroup and /run only.
SysError PrivateTmp() {
  if (::geteuid() != 0) return SysOk();
  if (::unshare(CLONE_NEWNS) != 0) return SysFail("unshare mount namespace");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return SysFail("make mounts private");
  }
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") != 0) {
    return SysFail("mount tmpfs /tmp");
  }
  return SysOk();
}

// 'S' and five descriptors; false on EOF or a malformed message.
bool ReceiveRequest(std::vector<int>* fds) {
  char byte = 0;
  if (ReceiveWithFds(kZygoteControlFd, &byte, 1, fds) != 0) return false;
  return byte == 'S' && fds->size() == 5;
}

// The answer to a request: kZygoteSupervises.
void Reply() {
  int32_t value = kZygoteSupervises;
  (void)SendWithFds(kZygoteControlFd,
                    std::string_view(reinterpret_cast<char*>(&value), sizeof value), {});
}

// /proc/PID/cmdline of an init says "code-interpreter shim", the zygote's or a spawned shim's
// (the tests find a sandbox's parent by it): the zygote's "fork" is written over in place (the
// kernel shows this memory), which is why the subcommand has four letters.
void RenameToShim(char** argv) {
  if (std::strlen(argv[1]) == 4) std::memcpy(argv[1], "shim", 4);
}

// One sandbox the zygote is the parent of: the descriptors of the request (the daemon's
// lifecycle socket, the service socket, the program's stdio: fds 3..7 of a spawned shim), and what
// the sandbox holds once it started.
struct Sandbox {
  UniqueFd fds[5];
  bool started = false;  // the plan came and init runs
  SandboxParent parent;
};

// In init, the clone's child: the layout and state a spawned shim gives its init. Fds 3..7 are
// the request's, the go pipe is 8, and nothing else of the zygote's is left (not its control
// socket, not another sandbox's descriptors); a spawned shim's signal state (SIGPIPE ignored, the
// rest default, none blocked); cmdline "code-interpreter shim".
[[noreturn]] void BecomeInit(const Plan& plan, const Sandbox& sandbox, int go_fd,
                             char** zygote_argv) {
  RenameToShim(zygote_argv);
  ResetSignalState();
  ::signal(SIGPIPE, SIG_IGN);
  constexpr int kGoFd = kProgramStderrFd + 1;
  const int sources[6] = {sandbox.fds[0].get(), sandbox.fds[1].get(), sandbox.fds[2].get(),
                          sandbox.fds[3].get(), sandbox.fds[4].get(), go_fd};
  // Every source above all targets first, so no dup2 overwrites a source numbered 3..8.
  int high[6];
  for (int i = 0; i < 6; ++i) {
    high[i] = ::fcntl(sources[i], F_DUPFD, kGoFd + 1);
    if (high[i] < 0) ::_exit(1);
  }
  for (int i = 0; i < 6; ++i) {
    if (::dup2(high[i], kLifecycleFd + i) != kLifecycleFd + i) ::_exit(1);
  }
  ::close_range(kGoFd + 1, ~0U, 0);
  SandboxInitMain(plan, kGoFd);
}

struct Startup {
  std::vector<std::string> modules;  // the warm imports
  std::vector<std::string> sources;  // to compile ahead
};

// The daemon's first message (zygote.h); what arrived before an EOF or error, parsed as far as
// it goes.
Startup ReceiveStartup() {
  std::string text;
  char buf[16384];
  ssize_t n;
  // It ends at the first "\0\0" after the modules' '\0' (no source is empty).
  auto complete = [&text] {
    size_t modules_end = text.find('\0');
    return modules_end != std::string::npos &&
           text.find(std::string_view("\0\0", 2), modules_end) != std::string::npos;
  };
  while (!complete() && (n = ::recv(kZygoteControlFd, buf, sizeof buf, 0)) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  Startup startup;
  size_t modules_end = text.find('\0');
  std::string_view modules = std::string_view(text).substr(0, modules_end);
  for (size_t start = 0, end; (end = modules.find('\n', start)) != std::string_view::npos;
       start = end + 1) {
    startup.modules.emplace_back(modules.substr(start, end - start));
  }
  if (modules_end == std::string::npos) return startup;
  for (size_t start = modules_end + 1, end;
       (end = text.find('\0', start)) != std::string::npos && end > start; start = end + 1) {
    startup.sources.push_back(text.substr(start, end - start));
  }
  return startup;
}

// The plan arrived on the lifecycle socket: the sandbox starts, or it is dropped (a failure is
// on the service socket already; closing the lifecycle socket tells the daemon it is all gone).
bool Start(Sandbox* sandbox, char** argv) {
  proto::Msg type;
  std::string payload;
  Plan plan;
  if (proto::ReadFrame(sandbox->fds[0].get(), &type, &payload) != 0 || type != proto::Msg::kPlan ||
      !DecodePlan(payload, &plan)) {
    ReportSetupFailure(sandbox->fds[1].get(), "plan", SysFailErr(EPROTO, "no valid plan"));
    return false;
  }
  BeforeEmbeddedPythonFork();
  const bool started = StartSandbox(
      plan, sandbox->fds[1].get(), [&](int go_fd) { BecomeInit(plan, *sandbox, go_fd, argv); },
      &sandbox->parent);
  AfterEmbeddedPythonFork();
  if (!started) return false;
  // Init holds the service socket and the program's stdio now; without our copies, the daemon sees
  // EOF on them as soon as the sandbox is gone.
  for (int i = 1; i < 5; ++i) sandbox->fds[i].reset();
  sandbox->started = true;
  // The daemon finds the sandbox's cgroup from init (a shim's children would say it).
  (void)proto::WriteFrame(sandbox->fds[0].get(), proto::Msg::kInit,
                          std::to_string(sandbox->parent.init));
  return true;
}

// The zygote's loop: requests on the control socket, and for each sandbox its lifecycle socket
// and init's pidfd. It is the parent of every sandbox it started (what a shim is for one), so it
// goes on after the control socket closed until the last of them is gone.
void Serve(char** argv) {
  std::vector<std::unique_ptr<Sandbox>> live;
  bool serving = true;
  std::vector<struct pollfd> polled;
  while (serving || !live.empty()) {
    polled.assign(1, {serving ? kZygoteControlFd : -1, POLLIN, 0});
    for (const auto& s : live) {
      polled.push_back({s->parent.daemon_alive ? s->fds[0].get() : -1, POLLIN, 0});
      polled.push_back({s->started ? s->parent.init_pidfd.get() : -1, POLLIN, 0});
    }
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      ZygoteLog(std::string("poll: ") + std::strerror(errno));
      ::_exit(1);  // its inits die with it (their death signal); the daemon's reaper cleans up
    }
    const size_t polled_sandboxes = live.size();
    std::vector<bool> gone(polled_sandboxes, false);
    for (size_t i = 0; i < polled_sandboxes; ++i) {
      Sandbox* s = live[i].get();
      const short lifecycle = polled[1 + 2 * i].revents;
      const short exited = polled[2 + 2 * i].revents;
      if (exited & POLLIN) {  // dropped next: its lifecycle socket's EOF ends the daemon's wait
        FinishSandbox(&s->parent, s->fds[0].get());
        gone[i] = true;
      } else if (lifecycle & (POLLIN | POLLHUP | POLLERR)) {
        if (!s->started) {
          gone[i] = !Start(s, argv);
        } else {
          OnLifecycleReadable(&s->parent, s->fds[0].get());
        }
      }
    }
    for (size_t i = polled_sandboxes; i-- > 0;) {
      if (gone[i]) live.erase(live.begin() + static_cast<long>(i));
    }
    if (polled[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      std::vector<int> fds;
      if (!ReceiveRequest(&fds)) {
        for (int fd : fds) ::close(fd);
        serving = false;  // the daemon is gone or done with us
        continue;
      }
      auto sandbox = std::make_unique<Sandbox>();
      for (int i = 0; i < 5; ++i) sandbox->fds[i].reset(fds[i]);
      live.push_back(std::move(sandbox));
      Reply();
    }
  }
}

}  // namespace

int ZygoteMain(int argc, char** argv) {
  if (argc != 2) return 2;
  std::vector<std::string> env;
  char** entry = environ;
  if (*entry != nullptr && std::strcmp(*entry, kZygoteBindNow) == 0) ++entry;  // not the sandboxes'
  for (; *entry != nullptr; ++entry) env.emplace_back(*entry);
  Startup startup = ReceiveStartup();
  SysError e = PrivateTmp();
  if (e.ok() && ::chdir("/") != 0) e = SysFail("chdir /");
  if (e.ok()) e = LoadEmbeddedPython(env, startup.modules, startup.sources);
  if (!e.ok()) {
    std::string why = "F" + e.what + (e.err != 0 ? std::string(": ") + std::strerror(e.err) : "");
    (void)::send(kZygoteControlFd, why.data(), why.size(), MSG_NOSIGNAL);
    ZygoteLog(why.substr(1));
    return 1;
  }
  if (::send(kZygoteControlFd, "R", 1, MSG_NOSIGNAL) != 1) return 0;
  Serve(argv);
  return 0;
}

}  // namespace ci::runtime
