// One execution from a validated request to saved outputs: resolve staged files, build the
// SandboxSpec, Prepare -> Run -> Collect -> Destroy, and keep what the program wrote.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/executor.h"
#include "daemon/config/config.h"
#include "daemon/egress/egress_proxy.h"
#include "daemon/files/file_store.h"
#include "daemon/service/async_event.h"
#include "daemon/service/languages.h"
#include "daemon/service/requests.h"
#include "daemon/service/sandbox_egress.h"
#include "daemon/service/warm_pool.h"

namespace ci::daemon {

// A 4xx/5xx answer decided before or instead of running.
struct ApiError {
  int status;
  std::string detail;
};

// The answer when a sandbox could not be prepared: 503 with the api.md text when the backend is
// out of capacity (Status::Unavailable), else 500 (the log has the reason).
ApiError PrepareFailure(const Status& why);

struct OutputFile {
  std::string path;
  std::string file_id;
};

struct ExecutionPlan {
  std::string language;
  EgressPolicy egress;  // none: no network
  Program program;
  std::string code;
  std::optional<std::string> stdin_data;
  std::chrono::milliseconds timeout{2000};
  // Resolved file ids with validated paths; Execute adds the program's support files.
  std::vector<StagedFile> inputs;
  std::string client;        // whose request (the outputs are its files)
  bool lean_python = false;  // Python that imports no warm module, where that is cheaper
};

struct ExecutionResult {
  RunOutcome run;
  ResourceReport resources;
  std::vector<OutputFile> files;
  bool files_truncated = false;
  std::vector<std::string> results;     // rich results, each a JSON object (result_bundles.h)
  std::optional<EgressReport> network;  // with a policy: what the program reached or was refused
};

class ExecutionService {
 public:
  // `seccomp_profile_json`: the resolved profile text (LoadSeccompProfile), given to every sandbox.
  ExecutionService(const Config& config, Executor& executor, FileStore& store,
                   std::string seccomp_profile_json);

  // Validation that needs the file store, in the order of docs/api.md: every file_id resolved
  // (404; another client's file is one that does not exist), then every path checked (422).
  std::variant<ExecutionPlan, ApiError> Plan(const ExecuteRequest& request,
                                             const std::string& client) const;
  // The same for a bare list of files: ids resolved (404), paths checked (422); `reserved` (the
  // entrypoint) may not be written by a file.
  std::variant<std::vector<StagedFile>, ApiError> ResolveFiles(const std::vector<FileRef>& files,
                                                               std::string_view reserved,
                                                               const std::string& client) const;

  // Runs the plan. `sink` receives output as it is produced. `on_sandbox` is called with a kill
  // function once a sandbox exists (so the caller can kill it when the client leaves).
  asio::awaitable<std::variant<ExecutionResult, ApiError>> Execute(
      ExecutionPlan plan, OutputSink sink,
      const std::function<void(std::function<void()>)>& on_sandbox);

  // Runs `<interpreter> --version` of each language in a sandbox: fills Language::version and
  // proves at startup that sandboxes start. Returns the first failure. A language whose
  // interpreter fails is dropped; one that does not answer within `timeout` is kept.
  asio::awaitable<Status> ProbeLanguages(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Shutdown: kill every running sandbox now.
  void KillAll();
  // Executions and the startup probe with a sandbox or waiting for one: shutdown waits for them
  // (a sandbox still being prepared would outlive the daemon).
  size_t running() const { return live_.size() + preparing_; }
  const std::vector<Language>& languages() const { return languages_; }
  // The languages once a probe that is running has ended (at once when none runs): the list a
  // client sees, and the one a request is planned with, never has a language the probe drops.
  asio::awaitable<const std::vector<Language>*> ProbedLanguages();
  const SandboxSpec& spec() const { return spec_; }
  // The sandbox of one language's executions: for Python, spec() with its pre-started interpreter
  // (SandboxSpec::prestart_argv, taken where a warm pool prepares it ahead); for the others, spec()
  // (without the warm imports where there is a lean kind: other_spec_).
  const SandboxSpec& SpecFor(std::string_view language) const;
  // A plan's: its language's, or the lean Python one (ExecutionPlan::lean_python).
  const SandboxSpec& SpecFor(const ExecutionPlan& plan) const;
  // The warm pools this configuration asks for, one per distinct sandbox: languages whose
  // sandboxes are the same (bash and javascript) share one pool of their summed size.
  std::vector<WarmPoolConfig> WarmPools() const;
  const Config& config() const { return config_; }
  // What every sandbox's egress proxy shares (made once here, for sessions too).
  const EgressShared& egress() const { return egress_; }
  // The API keys' own egress rules (KeyLimits::egress), by client; unset: the daemon's for all.
  void SetKeyEgress(std::function<std::optional<std::vector<EgressRule>>(const std::string&)> f) {
    key_egress_ = std::move(f);
  }
  // `client`'s egress bounds (the daemon's, or its key's); an error when its key's are invalid.
  Result<EgressBounds> EgressBoundsOf(const std::string& client) const {
    return BoundsFor(config_, key_egress_ ? key_egress_(client) : std::nullopt);
  }
  // The sandbox every execution of this configuration gets.
  static SandboxSpec MakeSpec(const Config& config, std::string seccomp_profile_json);

 private:
  // The program's support files (Go's go.mod) the request does not stage itself, as inputs: in
  // temporary files that go with the plan's last input.
  Status StageSupportFiles(ExecutionPlan* plan) const;
  // spec_ with a pre-started Python interpreter that has `warm_imports` loaded.
  SandboxSpec PythonSpec(const std::vector<std::string>& warm_imports) const;
  // ProbeLanguages' work, while ProbedLanguages waits.
  asio::awaitable<Status> ProbeEachLanguage(std::chrono::milliseconds timeout);
  // The log line that says how to fix a local root without Go's precompiled library.
  void WarnWithoutGoStd() const;
  // Outputs the store could not keep are left out and set *truncated.
  std::vector<OutputFile> SaveOutputs(const ExecutionPlan& plan, const Collection& collection,
                                      const std::string& collect_dir, bool* truncated) const;

  const Config& config_;
  Executor& executor_;
  FileStore& store_;
  std::vector<Language> languages_;
  bool probing_ = false;                  // ProbeLanguages runs
  std::optional<AsyncEvent> probe_done_;  // notified when it ends
  const SandboxSpec spec_;  // every sandbox of this service: from the config, built once
  const SandboxSpec python_spec_;
  // Python with no warm import loaded, where WARM_IMPORTS names some and the backend keeps such
  // sandboxes apart (Executor::runs_lean_python): for programs that import none of them.
  const std::optional<SandboxSpec> python_lean_spec_;
  // The other languages' executions: spec_, without the warm imports where there is a lean kind
  // (their init is forked from that fork server: a smaller process to fork each program from).
  const SandboxSpec other_spec_;
  std::set<Sandbox*> live_;
  size_t preparing_ = 0;  // Prepare calls in flight
  const EgressShared egress_;
  std::function<std::optional<std::vector<EgressRule>>(const std::string&)> key_egress_;
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec);
};

}  // namespace ci::daemon
