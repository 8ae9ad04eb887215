// The one place the daemon knows its backends by name (EXECUTOR_BACKEND): how each is made from
// the configuration and what `doctor` checks for it. A new backend adds an entry in backends.cc
// and nothing else in src/daemon/.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/status.h"
#include "daemon/config/config.h"
#include "runtime/kernel/host_checks.h"

namespace ci::daemon {

// What bootstrap learned that a backend's report depends on.
struct BackendFacts {
  // The Docker Engine has a cgroup driver (not a rootless Engine on cgroup v1): it applies the
  // memory, pids and CPU limits it is given.
  bool docker_engine_applies_limits = true;
};

// The configured backend, or an error naming EXECUTOR_BACKEND or the backend's own variable that
// is wrong (startup stops with it). Logs what it connects to.
Result<std::unique_ptr<Executor>> MakeExecutor(const Config& config, asio::any_io_executor ex,
                                               const BackendFacts& facts = {});

// `doctor`'s informational sections for the backends other than local (local has its own).
struct BackendDoctorSection {
  std::string title;  // "docker (informational, for EXECUTOR_BACKEND=docker)"
  std::function<std::vector<runtime::HostFinding>()> probe;
};
std::vector<BackendDoctorSection> BackendDoctorSections();

}  // namespace ci::daemon
