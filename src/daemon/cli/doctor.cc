#include "daemon/cli/doctor.h"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/backends/backends.h"
#include "daemon/backends/local_options.h"
#include "daemon/backends/seccomp_profile.h"
#include "daemon/bootstrap/deployment_mode.h"
#include "daemon/cli/logging.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"
#include "daemon/service/execution_service.h"
#include "daemon/sessions/snapshot_mode.h"
#include "runtime/daemon/host_probe.h"
#include "runtime/daemon/local_executor.h"
#include "runtime/kernel/host_checks.h"

namespace ci::daemon {
namespace {

struct Tally {
  int ok = 0, warn = 0, fail = 0;
};

void Section(const char* title) { std::printf("\n== %s\n", title); }

// A failed check is FAIL when sandboxes cannot work without it, else WARN; `informational`
// sections (later backends) never FAIL.
void Print(const runtime::HostFinding& f, Tally* t, bool informational = false) {
  const char* level = "OK";
  if (!f.ok) level = f.required && !informational ? "FAIL" : "WARN";
  (f.ok ? t->ok : (level[0] == 'F' ? t->fail : t->warn))++;
  std::printf("  %-5s %s: %s\n", level, f.what.c_str(), f.detail.c_str());
  if (!f.ok && !f.fix.empty()) std::printf("        fix: %s\n", f.fix.c_str());
}

// A real sandbox start through the local executor, the same path `run` and the daemon take.
runtime::HostFinding SandboxStart(const Config& config) {
  runtime::HostFinding f{"sandbox start (python3 -c 'print(1)')", false, true, "", ""};
  f.fix = "see the FAILs above; `code-interpreter run -c 'print(1)'` shows the same error";
  auto seccomp = LoadSeccompProfile(config);
  if (!seccomp.ok()) {
    f.detail = seccomp.status().message();
    return f;
  }
  std::string dir = (std::filesystem::temp_directory_path() / "code-interpreter-doctor-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    f.detail = "mkdtemp failed";
    return f;
  }
  {
    auto store = FileStore::Open(dir + "/store");
    if (!store.ok()) {
      f.detail = store.status().message();
      std::filesystem::remove_all(dir);
      return f;
    }
    asio::io_context io(1);
    runtime::LocalExecutorOptions options = LocalOptionsFromConfig(config);
    auto executor = runtime::MakeLocalExecutor(io.get_executor(), options);
    ExecutionService service(config, *executor, **store, std::move(seccomp).value());
    ExecuteRequest request;
    request.code = "print(1)";
    request.language = "python";
    request.timeout_ms = 10000;
    auto plan = service.Plan(request, /*client=*/"");
    if (auto* err = std::get_if<ApiError>(&plan)) {
      f.detail = err->detail;
    } else {
      std::string out;
      OutputSink sink = [&out](StreamKind kind, std::string_view data) {
        if (kind == StreamKind::kStdout) out.append(data);
      };
      const auto start = std::chrono::steady_clock::now();
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            auto outcome = co_await service.Execute(std::get<ExecutionPlan>(plan), sink,
                                                    [](std::function<void()>) {});
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
            if (auto* e = std::get_if<ApiError>(&outcome)) {
              f.detail = e->detail;
            } else if (out != "1\n") {
              f.detail = "unexpected output '" + out + "'";
            } else {
              f.ok = true;
              f.detail = "printed 1; " + std::to_string(ms) + " ms for start, run and teardown";
            }
          },
          asio::detached);
      io.run();
    }
  }
  std::filesystem::remove_all(dir);
  if (f.ok) f.fix.clear();
  return f;
}

// What the local backend enforces on this host and what it cannot (the same list /health shows):
// each downgrade is a warning with its fix.
std::vector<runtime::HostFinding> HardeningFindings(const Config& config) {
  std::vector<runtime::HostFinding> out;
  auto seccomp = LoadSeccompProfile(config);
  if (!seccomp.ok()) return {{"SECCOMP_PROFILE", false, true, seccomp.status().message(), ""}};
  asio::io_context io(1);
  runtime::LocalExecutorOptions options = LocalOptionsFromConfig(config);
  options.fork_server = false;  // the findings only: no sandbox starts here
  auto executor = runtime::MakeLocalExecutor(io.get_executor(), options);
  const SandboxSpec spec = ExecutionService::MakeSpec(config, std::move(seccomp).value());
  for (const Downgrade& d : executor->enforcement(spec).downgrades) {
    out.push_back({d.measure, false, false, d.reason, d.fix});
  }
  if (out.empty()) out.push_back({"every hardening measure", true, false, "enforced here", ""});
  return out;
}

}  // namespace

int DoctorCommand(int argc, char** /*argv*/) {
  if (argc > 0) {
    std::fprintf(stderr, "code-interpreter doctor: takes no arguments\n");
    return 2;
  }
  auto config = LoadConfig([](const char* name) { return std::getenv(name); });
  if (!config.ok()) {
    std::fprintf(stderr, "code-interpreter: %s\n", config.status().message().c_str());
    return 2;
  }
  // The sandbox start below logs through spdlog; only real problems belong in this report.
  SetupLogging("error", "plain");
  Tally t;
  std::printf("code-interpreter %s doctor: what this host offers the local sandboxes\n",
              CI_VERSION);

  Section("privileges");
  const bool root = ::geteuid() == 0;
  Print({"running as root", root, false, "euid " + std::to_string(::geteuid()),
         "rootless mode works with weaker limits (see docs/security.md \"Rootless\"); run as "
         "root for cgroup limits"},
        &t);

  Section("namespaces");
  for (const runtime::HostFinding& f : runtime::ProbeNamespaces()) Print(f, &t);

  Section("user namespace settings");
  runtime::HostCheckInputs in;
  in.rootless = runtime::RunsRootless();
  for (const runtime::HostFinding& f : CheckUserNamespaceHost(in)) {
    // The per-kind "<ns> namespaces" entries only look at /proc/self/ns; the section above
    // tried each kind for real.
    const std::string suffix = " namespaces";
    if (f.what.size() > suffix.size() &&
        f.what.compare(f.what.size() - suffix.size(), suffix.size(), suffix) == 0) {
      continue;
    }
    Print(f, &t);
  }

  Section("cgroups");
  for (const runtime::HostFinding& f : runtime::ProbeCgroups(config->cgroup_root)) Print(f, &t);

  Section("seccomp");
  for (const runtime::HostFinding& f : runtime::ProbeSeccomp()) Print(f, &t);

  Section("sandbox root filesystem");
  for (const runtime::HostFinding& f : runtime::ProbeRootfs(config->sandbox_rootfs)) Print(f, &t);

  Section("hardening downgrades (also listed by /health)");
  for (const runtime::HostFinding& f : HardeningFindings(*config)) Print(f, &t);

  Section("sandbox");
  std::fflush(stdout);
  Print(SandboxStart(*config), &t);

  for (const BackendDoctorSection& s : BackendDoctorSections()) {
    Section(s.title.c_str());
    for (const runtime::HostFinding& f : s.probe()) Print(f, &t, /*informational=*/true);
  }

  Section("session snapshots (informational, docs/sessions.md)");
  const SnapshotMode& snapshots = SessionSnapshotMode();
  Print({"paused sessions keep", true, false, snapshots.mode + " (" + snapshots.criu + ")", ""}, &t,
        /*informational=*/true);

  Section("deployment mode (informational, what EXECUTOR_BACKEND=auto picks here)");
  auto detected = DetectMode(HostFactsFromSystem([](const char* n) { return std::getenv(n); }));
  Print({"deployment mode", detected.ok(), false,
         detected.ok() ? std::string(DeploymentModeName(detected->mode)) + " (" + detected->why +
                             "): backend " + std::string(BackendOf(detected->mode))
                       : detected.status().message(),
         "see docs/deployment.md \"Deployment modes\""},
        &t, /*informational=*/true);

  std::printf("\n%d OK, %d WARN, %d FAIL\n", t.ok, t.warn, t.fail);
  return t.fail == 0 ? 0 : 1;
}

}  // namespace ci::daemon
