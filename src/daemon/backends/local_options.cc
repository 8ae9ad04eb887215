#include "daemon/backends/local_options.h"

namespace ci::daemon {

runtime::LocalExecutorOptions LocalOptionsFromConfig(const Config& config) {
  runtime::LocalExecutorOptions options;
  options.cgroup_root = config.cgroup_root;
  options.sandbox_ids = {config.sandbox_id_first, config.sandbox_id_count};
  return options;
}

}  // namespace ci::daemon
