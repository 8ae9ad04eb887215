// The local backend's options from the configuration: the one place `serve`, `run` and `doctor`
// take them from.
#pragma once

#include "daemon/config/config.h"
#include "runtime/daemon/local_executor.h"

namespace ci::daemon {

runtime::LocalExecutorOptions LocalOptionsFromConfig(const Config& config);

}  // namespace ci::daemon
