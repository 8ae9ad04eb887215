#include "daemon/backends/local_options.h"

#include "daemon/service/python_program.h"

namespace ci::daemon {

runtime::LocalExecutorOptions LocalOptionsFromConfig(const Config& config) {
  runtime::LocalExecutorOptions options;
  options.cgroup_root = config.cgroup_root;
  options.sandbox_ids = {config.sandbox_id_first, config.sandbox_id_count};
  options.fork_server = config.fork_server && config.sandbox_rootfs == "host";
  options.warm_imports = PythonDriverModules();
  if (!config.warm_imports.empty()) options.lean_imports = options.warm_imports;
  options.warm_imports.insert(options.warm_imports.end(), config.warm_imports.begin(),
                              config.warm_imports.end());
  options.compiled_ahead = PythonCompiledAhead();
  options.sandbox_env = DefaultSandboxEnv();
  options.recycle_sandboxes = config.recycle_sandboxes;
  return options;
}

}  // namespace ci::daemon
