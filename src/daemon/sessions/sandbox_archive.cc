#include "daemon/sessions/sandbox_archive.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <csignal>

#include "core/json.h"
#include "daemon/service/async_event.h"
#include "daemon/sessions/session_programs.h"

namespace ci::daemon {
namespace {

constexpr size_t kMaxStderr = 64 << 10;

ProcessSpec TarProcess(std::vector<std::string> argv, bool stdin) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C.UTF-8"};
  spec.cwd = "/";
  spec.stdin = stdin;
  return spec;
}

std::string Ended(const ProcessEnd& end) {
  if (end.exit_code) return "exited with status " + std::to_string(*end.exit_code);
  if (end.signal) return "was killed by signal " + std::to_string(*end.signal);
  return end.error;
}

// tar's own complaints, one line each, without the JSON line the packer wrote first.
std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty()) out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// What tar said, but its closing "Exiting with failure status" line, at most 1 KiB.
std::string Said(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) {
    if (l.find("Exiting with failure status") != std::string::npos) continue;
    out += (out.empty() ? ": " : "; ") + l;
    if (out.size() > 1024) break;
  }
  return out.substr(0, 1024);
}

// The packer's first line: the processes it found (a JSON array of strings).
std::vector<std::string> TakeProcesses(std::vector<std::string>& lines) {
  std::vector<std::string> processes;
  rapidjson::Document doc;
  std::string why;
  if (lines.empty() || !ParseJson(lines.front(), doc, why) || !doc.IsArray()) return processes;
  for (const auto& p : doc.GetArray()) {
    if (p.IsString()) processes.emplace_back(p.GetString(), p.GetStringLength());
  }
  lines.erase(lines.begin());
  return processes;
}

}  // namespace

asio::awaitable<Status> PackSandbox(Sandbox& sandbox, SnapshotStore::Writer& out,
                                    std::vector<std::string>* lost) {
  std::vector<std::string> argv = {"python3", "-c", std::string(programs::kSnapshotPack)};
  ProcessSpec spec = TarProcess(std::move(argv), /*stdin=*/false);
  auto started = co_await sandbox.Spawn(std::move(spec));
  if (!started.ok()) co_return started.status();
  std::unique_ptr<SandboxProcess> tar = std::move(started).value();
  std::string errors;
  Status written;
  // The output is read on a coroutine of its own, so that a tar past its bound is killed from
  // here while its output is still drained (an engine's exec stream must be read to its end).
  auto executor = co_await asio::this_coro::executor;
  AsyncEvent changed(executor);
  bool ended = false, killed = false;
  ProcessEnd end;
  ProcessOutputSink sink = [&](StreamKind kind, std::string chunk) -> asio::awaitable<void> {
    if (kind == StreamKind::kStderr) {
      if (errors.size() < kMaxStderr) errors += chunk;
    } else if (written.ok()) {
      written = out.Write(chunk);
      if (!written.ok()) changed.Notify();
    }
    co_return;
  };
  asio::co_spawn(
      executor,
      [&]() -> asio::awaitable<void> {
        end = co_await tar->Wait(sink);
        ended = true;
        changed.Notify();
      },
      asio::detached);
  while (!ended) {
    if (!written.ok() && !killed) {
      killed = true;
      (void)co_await sandbox.Signal(tar->pid(), SIGKILL);
      continue;
    }
    co_await changed.Wait();
  }
  if (!written.ok()) co_return written;
  std::vector<std::string> lines = Lines(errors);
  std::vector<std::string> processes = TakeProcesses(lines);
  // 1: a file changed while it was read (a background process writing): kept as read.
  if (!end.exit_code || *end.exit_code > 1) {
    co_return Status::Error("tar in the sandbox " + Ended(end) + Said(lines));
  }
  for (auto& p : processes) lost->push_back(std::move(p));
  for (auto& l : lines) lost->push_back(std::move(l));
  co_return Status();
}

asio::awaitable<Status> UnpackSandbox(Sandbox& sandbox, const std::string& host_path) {
  int fd = open(host_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) co_return Status::Errno("opening " + host_path, errno);
  std::vector<std::string> argv = {"tar",
                                   "--extract",
                                   "--file=-",
                                   "--directory=/",
                                   "--preserve-permissions",
                                   "--skip-old-files",
                                   "--warning=no-timestamp"};
  ProcessSpec spec = TarProcess(std::move(argv), /*stdin=*/true);
  auto started = co_await sandbox.Spawn(std::move(spec));
  if (!started.ok()) {
    close(fd);
    co_return started.status();
  }
  std::unique_ptr<SandboxProcess> tar = std::move(started).value();
  Status fed;
  std::string chunk(256 << 10, '\0');
  ssize_t n;
  while (fed.ok() && (n = read(fd, chunk.data(), chunk.size())) > 0) {
    fed = co_await tar->WriteStdin(chunk.substr(0, n));
  }
  if (fed.ok() && n < 0) fed = Status::Errno("reading " + host_path, errno);
  close(fd);
  tar->CloseStdin();
  std::string errors;
  ProcessOutputSink sink = [&](StreamKind, std::string chunk) -> asio::awaitable<void> {
    if (errors.size() < kMaxStderr) errors += chunk;
    co_return;
  };
  ProcessEnd end = co_await tar->Wait(sink);
  if (end.exit_code && *end.exit_code == 0 && fed.ok()) co_return Status();
  std::vector<std::string> lines = Lines(errors);
  std::string said = "tar in the sandbox " + Ended(end) + Said(lines);
  if (!fed.ok()) said += " (" + fed.message() + ")";
  co_return Status::Error(said);
}

}  // namespace ci::daemon
