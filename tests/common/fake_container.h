// A container without an engine, for unit tests of what drives containers (src/container/): its
// PID 1 is ContainerInitArgv's shell under bwrap, in pid, ipc, network, uts and mount namespaces
// of its own (the host's /usr, /etc read-only; tmpfs /workspace and /tmp owned by the sandbox
// user), and each exec is nsenter into those namespaces, as that user, in /workspace, the leader
// of a session of its own, as runc makes it. The programs are real; only the engine is not.
// Needs root (nsenter) and bwrap: Start fails otherwise, and the tests skip.
#pragma once

#include <sys/types.h>

#include <memory>

#include "container/container_api.h"
#include "core/status.h"

namespace ci::testing_support {

class FakeContainer final : public container::ContainerApi,
                            public std::enable_shared_from_this<FakeContainer> {
 public:
  static Result<std::shared_ptr<FakeContainer>> Start();
  ~FakeContainer() override;

  asio::awaitable<Result<std::shared_ptr<container::ExecStream>>> Exec(
      const std::vector<std::string>& cmd, container::ExecStdin stdin_use) override;
  asio::awaitable<bool> SetPidsHeadroom(int) override { co_return false; }
  asio::awaitable<pid_t> HostInitPid() override { co_return 0; }
  asio::awaitable<void> Remove(ResourceReport& report) override;
  void Kill() override;

  pid_t init_pid() const { return init_; }
  int removals() const { return removals_; }

 private:
  FakeContainer(pid_t bwrap, pid_t init) : bwrap_(bwrap), init_(init) {}
  pid_t bwrap_;
  pid_t init_;  // PID 1 of the container, as this host sees it
  int removals_ = 0;
};

}  // namespace ci::testing_support
