#include "daemon/service/execution_service.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "daemon/files/workspace_paths.h"
#include "daemon/service/output_buffer.h"
#include "daemon/service/python_imports.h"
#include "daemon/service/python_program.h"
#include "daemon/service/result_bundles.h"
#include "daemon/service/sandbox_egress.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;

// True when both files hold the same bytes (a staged input the program did not change).
bool SameContent(const std::string& a, const std::string& b) {
  int fa = open(a.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  int fb = open(b.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  bool same = fa >= 0 && fb >= 0;
  struct stat sa {
  }, sb{};
  if (same) same = fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0 && sa.st_size == sb.st_size;
  static thread_local char ba[65536], bb[65536];
  while (same) {
    ssize_t na = read(fa, ba, sizeof ba);
    ssize_t nb = na > 0 ? read(fb, bb, static_cast<size_t>(na)) : read(fb, bb, 1);
    if (na < 0 || nb != na)
      same = false;
    else if (na == 0)
      break;
    else
      same = std::memcmp(ba, bb, static_cast<size_t>(na)) == 0;
  }
  if (fa >= 0) close(fa);
  if (fb >= 0) close(fb);
  return same;
}

Result<std::string> WriteTempFile(const std::string& dir, std::string_view content) {
  std::string path = dir + "/entry-XXXXXX";
  int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return Status::Errno("creating " + path, errno);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      int err = errno;
      close(fd);
      unlink(path.c_str());
      return Status::Errno("writing " + path, err);
    }
    off += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

}  // namespace

ApiError PrepareFailure(const Status& why) {
  if (why.unavailable()) {
    return {503,
            "Executor capacity unavailable (" + why.unavailable_reason() + "): " + why.message()};
  }
  spdlog::error("sandbox could not be started: {} (run `code-interpreter doctor`)", why.message());
  return {500, "Internal Server Error"};
}

ExecutionService::ExecutionService(const Config& config, Executor& executor, FileStore& store,
                                   std::string seccomp_profile_json)
    : config_(config),
      executor_(executor),
      store_(store),
      // An image's root is not on this filesystem (the daemon may run in a container
      // without any interpreter): every language, and the startup probe keeps what runs.
      languages_(executor.root_on_this_host() ? AvailableLanguages(config.sandbox_rootfs)
                                              : KnownLanguages()),
      spec_(MakeSpec(config, std::move(seccomp_profile_json))),
      python_spec_(PythonSpec(config_.warm_imports)),
      python_lean_spec_(config_.warm_imports.empty() || !executor_.runs_lean_python()
                            ? std::nullopt
                            : std::optional<SandboxSpec>(PythonSpec({}))),
      other_spec_([this] {
        SandboxSpec spec = spec_;
        if (python_lean_spec_) spec.warm_imports.clear();  // forked from the lean one too
        return spec;
      }()),
      egress_(MakeEgressShared(config, store.incoming_dir())) {}

SandboxSpec ExecutionService::PythonSpec(const std::vector<std::string>& warm_imports) const {
  SandboxSpec spec = spec_;
  spec.warm_imports = warm_imports;
  spec.prestart_argv = PythonPrestartArgv(warm_imports);
  // The Docker agent's fork server (the local runtime has its own, runtime/parent/fork_server.h).
  if (config_.fork_server && executor_.runs_python_fork_server()) {
    spec.zygote_argv = PythonZygoteArgv(warm_imports);
  }
  return spec;
}

const SandboxSpec& ExecutionService::SpecFor(std::string_view language) const {
  return language == "python" ? python_spec_ : other_spec_;
}

const SandboxSpec& ExecutionService::SpecFor(const ExecutionPlan& plan) const {
  return plan.lean_python ? *python_lean_spec_ : SpecFor(plan.language);
}

std::vector<WarmPoolConfig> ExecutionService::WarmPools() const {
  std::vector<WarmPoolConfig> pools;
  for (const Language& language : languages_) {
    const size_t size = language.name == "python"       ? config_.warm_pool_size
                        : language.name == "bash"       ? config_.warm_pool_size_bash
                        : language.name == "javascript" ? config_.warm_pool_size_javascript
                        : language.name == "go"         ? config_.warm_pool_size_go
                                                        : 0;
    const SandboxSpec& spec = SpecFor(language.name);
    if (size == 0) continue;
    auto same = std::find_if(pools.begin(), pools.end(),
                             [&](const WarmPoolConfig& p) { return p.spec == spec; });
    if (same == pools.end()) {
      pools.push_back({language.name, spec, size});
    } else {
      same->name += "+" + language.name;
      same->size += size;
    }
    // Programs that import none of WARM_IMPORTS have a pool of their own, as large.
    if (language.name == "python" && python_lean_spec_) {
      pools.push_back({"python-lean", *python_lean_spec_, size});
    }
  }
  return pools;
}

std::variant<ExecutionPlan, ApiError> ExecutionService::Plan(const ExecuteRequest& request,
                                                             const std::string& client) const {
  auto program = BuildProgram(request.language, request.last_line_interactive,
                              config_.cpu_time_limit_sec, languages_);
  if (!program.ok()) return ApiError{422, program.status().message()};
  ExecutionPlan plan;
  plan.language = request.language;
  plan.program = std::move(program).value();
  plan.code = request.code;
  plan.lean_python = request.language == "python" && python_lean_spec_ &&
                     !MayImportWarmModules(request.code, config_.warm_imports);
  plan.stdin_data = request.stdin_data;
  plan.timeout = std::chrono::milliseconds(request.timeout_ms);
  plan.client = client;
  auto bounds = EgressBoundsOf(client);
  if (!bounds.ok()) return ApiError{403, bounds.status().message()};
  auto egress = EgressFor(request.network, bounds->fallback, bounds->max);
  if (!egress.ok()) return ApiError{422, egress.status().message()};
  plan.egress = std::move(egress).value();
  auto inputs = ResolveFiles(request.files, plan.program.entrypoint, client);
  if (auto* err = std::get_if<ApiError>(&inputs)) return *err;
  plan.inputs = std::move(std::get<std::vector<StagedFile>>(inputs));
  // The trust file is an input: returned only if the program changed it.
  if (!plan.egress.none()) AddEgressTo(egress_, nullptr, &plan.inputs);
  return plan;
}

namespace {

// Paths of one request that cannot all be files: the same one twice, or one below another
// (or below the entrypoint): staging them would fail half-way.
std::optional<std::string> PathClash(const std::vector<StagedFile>& files,
                                     std::string_view reserved) {
  std::set<std::string_view> seen;
  for (const StagedFile& f : files) {
    if (!seen.insert(f.workspace_path).second)
      return "File path '" + f.workspace_path + "' is given twice.";
  }
  for (const StagedFile& f : files) {
    for (size_t slash = f.workspace_path.find('/'); slash != std::string::npos;
         slash = f.workspace_path.find('/', slash + 1)) {
      const std::string_view dir = std::string_view(f.workspace_path).substr(0, slash);
      if (seen.count(dir) != 0 || dir == reserved) {
        return "File path '" + f.workspace_path + "' is below '" + std::string(dir) +
               "', which is a file" + (dir == reserved ? " (the execution entrypoint)." : ".");
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::variant<std::vector<StagedFile>, ApiError> ExecutionService::ResolveFiles(
    const std::vector<FileRef>& files, std::string_view reserved, const std::string& client) const {
  // Pinned, so that a delete while the execution waits or stages does not pull the bytes away
  // (a delete after this point removes the id; the execution still sees the file).
  std::vector<std::shared_ptr<const FileStore::Pinned>> pins;
  for (const auto& f : files) {
    auto pin = store_.Pin(f.file_id);
    if (!pin || !pin->meta().VisibleTo(client)) {
      return ApiError{404, "File with ID '" + f.file_id + "' not found for path '" + f.path + "'."};
    }
    pins.push_back(std::move(pin));
  }
  std::vector<StagedFile> out;
  for (size_t i = 0; i < files.size(); ++i) {
    auto path = NormalizeWorkspacePath(files[i].path, /*entrypoint_reserved=*/false);
    if (!path.ok()) return ApiError{422, path.status().message()};
    if (!reserved.empty() && *path == reserved) {
      return ApiError{422, "File path '" + *path + "' is reserved for the execution entrypoint."};
    }
    out.push_back({std::move(path).value(), pins[i]->path(), pins[i]});
  }
  if (std::optional<std::string> clash = PathClash(out, reserved)) return ApiError{422, *clash};
  return out;
}

SandboxSpec ExecutionService::MakeSpec(const Config& config, std::string seccomp_profile_json) {
  SandboxSpec spec;
  spec.rootfs = config.sandbox_rootfs;
  spec.env = DefaultSandboxEnv();
  spec.limits.memory_bytes = config.memory_limit_mb << 20;
  spec.limits.cpu_time_sec = config.cpu_time_limit_sec;
  spec.limits.pids = config.pids_limit;
  spec.limits.cpu_percent = config.cpu_quota_percent;
  spec.limits.workspace_bytes = config.workspace_size_mb << 20;
  spec.limits.tmp_bytes = config.tmp_size_mb << 20;
  spec.cgroup_root = config.cgroup_root;
  spec.warm_imports = config.warm_imports;  // sessions' interpreters too
  spec.security.seccomp_profile_json = std::move(seccomp_profile_json);
  spec.security.seccomp_profile_name =
      config.seccomp_profile == "default" || config.seccomp_profile == "strict"
          ? config.seccomp_profile
          : "file " + config.seccomp_profile;
  spec.security.seccomp_log_denied = config.seccomp_log_denied;
  return spec;
}

asio::awaitable<std::variant<ExecutionResult, ApiError>> ExecutionService::Execute(
    ExecutionPlan plan, OutputSink sink,
    const std::function<void(std::function<void()>)>& on_sandbox) {
  const ApiError internal{500, "Internal Server Error"};
  const SandboxSpec& spec = spec_;
  if (Status s = Validate(spec); !s.ok()) {
    spdlog::error("invalid sandbox spec: {}", s.message());
    co_return internal;
  }
  auto entry = WriteTempFile(store_.incoming_dir(), plan.code);
  if (!entry.ok()) {
    spdlog::error("staging the program: {}", entry.status().message());
    co_return internal;
  }
  if (auto staged = StageSupportFiles(&plan); !staged.ok()) {
    spdlog::error("staging the program's files: {}", staged.message());
    unlink(entry->c_str());
    co_return internal;
  }
  std::string collect_dir = store_.incoming_dir() + "/collect-XXXXXX";
  if (mkdtemp(collect_dir.data()) == nullptr) {
    spdlog::error("creating {}: {}", collect_dir, std::strerror(errno));
    unlink(entry->c_str());
    co_return internal;
  }

  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  auto t0 = Clock::now();
  auto t_prepared = t0;
  std::unique_ptr<Sandbox> sandbox;
  Sandbox* raw = nullptr;
  Result<RunOutcome> run = Status::Error("not run");
  Result<SandboxEgress> egress = Status::Error("no policy");
  // A sandbox can be gone before the program starts (a pooled container whose dockerd restarted,
  // a pod deleted meanwhile): then the program runs in another one, at most twice more.
  for (int attempt = 0;; ++attempt) {
    SandboxSpec spec = SpecFor(plan);
    spec.client = plan.client;
    if (!plan.egress.none()) AddEgressTo(egress_, &spec, nullptr);
    auto prepared = co_await Prepare(spec);
    t_prepared = Clock::now();
    if (!prepared.ok()) {
      unlink(entry->c_str());
      rmdir(collect_dir.c_str());
      co_return PrepareFailure(prepared.status());
    }
    sandbox = std::move(prepared).value();
    raw = sandbox.get();
    live_.insert(raw);
    on_sandbox([raw] { raw->Kill(); });
    if (!plan.egress.none()) {
      if (egress.ok()) co_await egress->Stop();  // the previous attempt's
      egress = co_await StartEgress(*sandbox, plan.egress, egress_);
      if (!egress.ok()) {
        spdlog::error("egress for a sandbox: {}", egress.status().message());
        co_await sandbox->Destroy();
        live_.erase(raw);
        unlink(entry->c_str());
        rmdir(collect_dir.c_str());
        co_return ApiError{
            503, "The sandbox's network could not be set up: " + egress.status().message()};
      }
    }
    RunPayload payload;
    payload.argv = plan.program.argv;
    if (!plan.program.go.empty()) payload.go = plan.program.go;
    payload.files = plan.inputs;
    payload.files.push_back({plan.program.entrypoint, *entry});
    payload.stdin_data = plan.stdin_data;
    payload.timeout = plan.timeout;
    payload.client = plan.client;
    run = co_await sandbox->Run(std::move(payload), sink);
    if (run.ok() || !run.status().gone() || !run.status().not_started() || attempt == 2) break;
    spdlog::warn("the sandbox was gone before the program started ({}): running it in another",
                 run.status().message());
    co_await sandbox->Destroy();
    live_.erase(raw);
    sandbox.reset();
  }

  ExecutionResult result;
  auto t_ran = Clock::now();
  if (egress.ok()) co_await egress->Stop();
  unlink(entry->c_str());
  Result<Collection> collection = Status::Error("not collected");
  if (run.ok()) {
    CollectLimits limits;
    limits.dest_dir = collect_dir;
    limits.max_files = config_.max_workspace_files;
    limits.max_total_bytes = config_.workspace_size_mb << 20;
    limits.skip_path = plan.program.entrypoint;
    collection = co_await sandbox->Collect(limits);
  }
  auto t_collected = Clock::now();
  result.resources = co_await sandbox->Destroy();
  if (egress.ok()) {
    result.network = co_await egress->Report();
    uint64_t in = 0, out = 0;
    for (const EgressDestination& d : result.network->reached) in += d.bytes_in, out += d.bytes_out;
    spdlog::info("egress: {} destination(s) reached ({} bytes in, {} out), {} refused",
                 result.network->reached.size(), in, out, result.network->refused_count);
  }
  auto t_destroyed = Clock::now();
  live_.erase(raw);
  sandbox.reset();

  if (!run.ok() || !collection.ok()) {
    const Status& why = run.ok() ? collection.status() : run.status();
    spdlog::warn("execution failed: {}", why.message());
    if (collection.ok()) {
      for (const auto& f : collection->files) unlink(f.host_path.c_str());
    }
    rmdir(collect_dir.c_str());
    co_return internal;
  }
  result.run = std::move(run).value();
  result.files_truncated = collection->truncated;
  result.results = TakeResultBundles(collection->files);
  result.files = SaveOutputs(plan, *collection, collect_dir, &result.files_truncated);
  spdlog::debug("timing: prepare {} ms, run {} ms, collect {} ms, destroy {} ms, save {} ms",
                (t_prepared - t0) / 1ms, (t_ran - t_prepared) / 1ms, (t_collected - t_ran) / 1ms,
                (t_destroyed - t_collected) / 1ms, ms_since(t_destroyed));
  rmdir(collect_dir.c_str());
  co_return result;
}

std::vector<OutputFile> ExecutionService::SaveOutputs(const ExecutionPlan& plan,
                                                      const Collection& collection,
                                                      const std::string& collect_dir,
                                                      bool* truncated) const {
  std::vector<OutputFile> out;
  for (const auto& f : collection.files) {
    bool unchanged = false;
    for (const auto& in : plan.inputs) {
      if (in.workspace_path == f.workspace_path) unchanged = SameContent(in.host_path, f.host_path);
    }
    if (unchanged) {
      unlink(f.host_path.c_str());
      continue;
    }
    // A program may name files with any bytes; the API speaks UTF-8 JSON.
    std::string path = SanitizeUtf8(f.workspace_path);
    FileStore::Full full = FileStore::Full::kNo;
    auto meta = store_.AdoptFile(f.host_path, path, &full, plan.client);
    if (!meta.ok()) {
      // Left out whole, and the response says files are missing (files_truncated).
      if (full == FileStore::Full::kShare) {
        spdlog::warn("output {} not kept: API key '{}' has used its share of the file store", path,
                     plan.client);
      } else if (full == FileStore::Full::kStore) {
        spdlog::warn("output {} not kept: the file store is full (FILE_STORAGE_MAX_MB={})", path,
                     config_.file_storage_max_mb);
      } else {
        spdlog::error("saving output {} from {}: {}", f.workspace_path, collect_dir,
                      meta.status().message());
      }
      unlink(f.host_path.c_str());
      *truncated = true;
      continue;
    }
    out.push_back({path, meta->file_id});
  }
  return out;
}

Status ExecutionService::StageSupportFiles(ExecutionPlan* plan) const {
  for (const SupportFile& f : plan->program.support_files) {
    auto same_path = [&f](const StagedFile& in) { return in.workspace_path == f.path; };
    if (std::any_of(plan->inputs.begin(), plan->inputs.end(), same_path)) continue;
    auto path = WriteTempFile(store_.incoming_dir(), f.content);
    if (!path.ok()) return path.status();
    // Removed with the last copy of the plan's inputs (the run's payload holds one too).
    std::shared_ptr<const void> remove(nullptr, [p = *path](const void*) { unlink(p.c_str()); });
    plan->inputs.push_back({f.path, *path, std::move(remove)});
  }
  return Status();
}

asio::awaitable<Result<std::unique_ptr<Sandbox>>> ExecutionService::Prepare(
    const SandboxSpec& spec) {
  ++preparing_;
  auto prepared = co_await executor_.Prepare(spec);
  --preparing_;
  co_return prepared;
}

asio::awaitable<const std::vector<Language>*> ExecutionService::ProbedLanguages() {
  if (probing_) co_await probe_done_->Wait();
  co_return &languages_;
}

asio::awaitable<Status> ExecutionService::ProbeLanguages(std::chrono::milliseconds timeout) {
  if (!probe_done_) probe_done_.emplace(co_await asio::this_coro::executor);
  probing_ = true;
  Status status = co_await ProbeEachLanguage(timeout);
  probing_ = false;
  probe_done_->Notify();
  co_return status;
}

asio::awaitable<Status> ExecutionService::ProbeEachLanguage(std::chrono::milliseconds timeout) {
  std::vector<Language> usable;
  for (auto& language : languages_) {
    auto sandbox = co_await Prepare(spec_);
    if (!sandbox.ok()) co_return sandbox.status().Context("starting a sandbox");
    live_.insert(sandbox->get());  // shutdown waits for it, or kills it
    std::string out;
    RunPayload payload;
    payload.argv = {language.interpreter, language.version_arg};
    payload.timeout = timeout;
    auto run = co_await (*sandbox)->Run(std::move(payload), [&out](StreamKind, std::string_view d) {
      if (out.size() < 4096) out.append(d);
    });
    co_await (*sandbox)->Destroy();
    live_.erase(sandbox->get());
    if (!run.ok()) co_return run.status().Context("running " + language.interpreter);
    // A slow machine (an emulated VM, a loaded host) may not answer in time: that says nothing
    // of the interpreter, so it stays, with its version unknown.
    if (run->timed_out) {
      spdlog::warn(
          "language {}: `{} {}` did not finish within {} ms in the sandbox; kept, "
          "version unknown",
          language.name, language.interpreter, language.version_arg, timeout.count());
      usable.push_back(language);
      continue;
    }
    // The backend's root may lack an interpreter the host has (node in the Docker image).
    if (run->exit_code != 0) {
      spdlog::warn("language {} dropped: `{} {}` failed in the sandbox ({})", language.name,
                   language.interpreter, language.version_arg,
                   run->exit_code ? "exit " + std::to_string(*run->exit_code) : "killed");
      continue;
    }
    language.version = ParseVersion(out);
    if (language.name == "go") WarnWithoutGoStd();
    usable.push_back(language);
  }
  languages_ = std::move(usable);
  co_return Status();
}

void ExecutionService::WarnWithoutGoStd() const {
  // An image's root is the image build's business (packaging/executor-image/build.sh).
  if (!executor_.root_on_this_host()) return;
  const std::string root = spec_.rootfs == "host" ? "" : spec_.rootfs;
  const std::string stamp = root + std::string(kGoStdDir) + "/go-version";
  if (access(stamp.c_str(), R_OK) == 0) return;
  spdlog::warn(
      "language go: {} is missing, so every Go program compiles the standard library it uses "
      "(seconds of CPU: most then end at CPU_TIME_LIMIT_SEC). {}",
      stamp,
      root.empty() ? "Run scripts/go-std.sh as root."
                   : "Run scripts/go-std.sh inside that root, with its own go (as "
                     "packaging/executor-image/build.sh does).");
}

void ExecutionService::KillAll() {
  for (Sandbox* s : live_) s->Kill();
}

}  // namespace ci::daemon
