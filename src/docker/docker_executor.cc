#include "docker/docker_executor.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "core/json.h"
#include "core/sparse_writer.h"
#include "docker/call_output.h"
#include "docker/cgroup_probe.h"
#include "docker/container_exec.h"
#include "docker/engine_client.h"
#include "docker/image_watch.h"
#include "docker/reaper.h"
#include "docker/stdcopy.h"
#include "docker/tar.h"

namespace ci::docker {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

// After the timeout kill, how long the program's stream may take to end before it is cut.
constexpr auto kKillGrace = 5s;

// Container removals in flight: Destroy does not wait for them, Drain does.
struct Removals {
  size_t in_flight = 0;
};

// Counted in `removals` by the caller.
asio::awaitable<void> Remove(Container c, std::shared_ptr<Removals> removals) {
  auto t0 = Clock::now();
  std::string del = "/containers/" + c.id + "?force=1&v=1";
  auto d = co_await c.client->Request("DELETE", del);
  --removals->in_flight;
  spdlog::debug("docker {}: removed in {} ms", c.id.substr(0, 12), (Clock::now() - t0) / 1ms);
  if (!d.ok()) {
    spdlog::error("removing container {}: {} (the reaper will retry)", c.id.substr(0, 12),
                  d.status().message());
  } else if (!d->ok() && d->status != 404) {
    spdlog::error("{} (the reaper will retry)",
                  HttpError("removing container " + c.id.substr(0, 12), *d).message());
  }
}

// A session's persistent interpreter (python_session.h): an exec running for the session's
// life whose stdin and output only the daemon holds. A detached pump routes its output to the
// call in flight (CallOutput splits it at the call's end marker) and drops the rest.
struct CallServer {
  explicit CallServer(const asio::any_io_executor& ex) : event(ex) {}
  std::shared_ptr<RawStream> stream;
  std::string exec_id;
  long pid = 0;  // its pid in the container, also its session id (a spared background program)
  bool alive = true;
  bool started = false;  // it printed its pid
  std::string first_line;
  CallOutput out[2];  // stdout, stderr
  OutputSink sink;    // the call in flight's; empty between calls
  asio::steady_timer event;
  // Idle CPU (python_session.h): the container's CPU while no run is active adds up over the
  // server's life against the CPU limit.
  bool busy = false;  // a run of the sandbox is active
  uint64_t window_start_ms = 0;
  uint64_t idle_ms = 0;
  void Notify() { event.cancel(); }
};

asio::awaitable<void> PumpCallServer(std::shared_ptr<CallServer> s) {
  FrameDemuxer demux([s](FrameDemuxer::Stream k, std::string_view bytes) {
    if (k == FrameDemuxer::Stream::kSystemError) return;
    const int i = k == FrameDemuxer::Stream::kStderr ? 1 : 0;
    if (!s->started) {
      if (i == 0 && s->first_line.size() < 64) s->first_line.append(bytes);
      if (s->first_line.find('\n') != std::string::npos) {
        s->started = true;
        s->Notify();
      }
      return;
    }
    std::string text = s->out[i].Feed(bytes);
    if (!text.empty() && s->sink) s->sink(i == 1 ? StreamKind::kStderr : StreamKind::kStdout, text);
    if (s->out[i].ended()) s->Notify();
  });
  Status pumped = co_await Pump(*s->stream, demux);
  if (!pumped.ok()) spdlog::debug("session interpreter stream: {}", pumped.message());
  s->alive = false;
  s->Notify();
}

// Waits for news of the server (or `d`, whichever first).
asio::awaitable<void> AwaitNews(CallServer& s, Clock::duration d) {
  s.event.expires_after(d);
  boost::system::error_code ec;
  co_await s.event.async_wait(asio::redirect_error(use_awaitable, ec));
}

uint64_t HostCpuMs(const HostCgroup& host) {
  return ParseCgroupFiles(ReadHostCgroupFiles(host)).cpu_ms;
}

// Between runs, once a second: kills everything but PID 1 (the interpreter too) once the
// container's idle CPU exceeds the limit. From the host only (a file read, and a kill with no
// exec that could race a run starting); through a remote Engine the next call checks instead.
asio::awaitable<void> WatchIdleCpu(std::shared_ptr<CallServer> s, HostCgroup host, pid_t init_pid,
                                   std::string id, uint64_t limit_ms) {
  while (s->alive) {
    co_await Sleep(1s);
    if (!s->alive || s->busy) continue;
    uint64_t cpu = HostCpuMs(host);
    uint64_t idle = s->idle_ms + (cpu > s->window_start_ms ? cpu - s->window_start_ms : 0);
    if (idle <= limit_ms) continue;
    spdlog::info("docker {}: the session's interpreter used {} ms of CPU between calls; killed",
                 id.substr(0, 12), idle);
    KillHostCgroupProcesses(host, init_pid, id);
    co_return;
  }
}

class DockerSandbox final : public Sandbox {
 public:
  DockerSandbox(Container c, uint32_t pids_limit, bool host_cgroups,
                std::shared_ptr<Removals> removals)
      : c_(std::move(c)),
        pids_limit_(pids_limit),
        host_cgroups_(host_cgroups),
        removals_(std::move(removals)) {}

  asio::awaitable<Result<RunOutcome>> Run(RunPayload payload, OutputSink sink) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (payload.background && !c_.session) {
      co_return Status::Error("run: background programs need a session sandbox");
    }
    if (payload.call && !c_.session) co_return Status::Error("run: calls need a session sandbox");
    // Any run marks the sandbox busy: the idle CPU watch leaves it alone meanwhile, and a run's
    // own CPU is not charged to the interpreter.
    struct Busy {
      std::shared_ptr<CallServer> s;
      const std::optional<HostCgroup>* host;
      ~Busy() {
        if (!s) return;
        s->busy = false;
        if (*host) s->window_start_ms = HostCpuMs(**host);
      }
    } busy{server_, &host_};
    if (server_) server_->busy = true;
    if (payload.call) co_return co_await ServeCall(std::move(payload), std::move(sink));
    auto t_stage = Clock::now();
    if (payload.background && payload.serves_calls) {
      Status staged = co_await Stage(payload.files);
      if (!staged.ok()) co_return staged.Context("staging files");
      co_return co_await StartCallServer(payload.argv);
    }
    if (payload.background) {
      Status staged = co_await Stage(payload.files);
      if (!staged.ok()) co_return staged.Context("staging files");
      if (killed_) co_return Status::Error("sandbox killed");
      auto bg = co_await RunBackground(payload.argv);
      co_return bg;
    }
    // Small files (the code) travel in the program's exec; others by a tar exec first.
    std::optional<std::vector<std::string>> inline_files = InlineFiles(payload.files);
    if (!inline_files) {
      Status staged = co_await Stage(payload.files);
      if (!staged.ok()) co_return staged.Context("staging files");
      if (killed_) co_return Status::Error("sandbox killed");
      inline_files.emplace();
    }

    struct RunState {
      std::shared_ptr<RawStream> stream;
      asio::steady_timer deadline;
      bool done = false;
      bool timed_out = false;
      explicit RunState(asio::any_io_executor ex) : deadline(std::move(ex)) {}
    };
    auto t0 = Clock::now();
    // Like local's init: once the program exits, whatever it left behind is killed, so a
    // background process holding its stdout (`sleep 300 &`) cannot keep the run going. The
    // wrapper is bash (kill(-1) spares it and PID 1) and passes the status on (128+N for a
    // death by signal N, as the Engine reports it).
    // A session's wrapper kills leftovers but spares background programs' sessions; it takes
    // the background list and the CPU seconds before the program's argv.
    std::string run = c_.session ? std::string(kSessionKillFunction) + kSessionRunScript
                                 : "\"$@\"; s=$?; kill -9 -1 2>/dev/null; exit $s";
    std::vector<std::string> argv = {"/bin/bash", "-c", run, "ci-run"};
    if (!inline_files->empty()) {
      // Inlined files first ("N path1 content1 ..."), then an exec into the wrapper above, so
      // that no process the program can see holds the contents in its command line.
      argv = {"/bin/bash", "-c",
              "n=$1; shift; while [ \"$n\" -gt 0 ]; do printf %s \"$2\" > \"$1\" || exit 126; "
              "shift 2; n=$((n - 1)); done; exec /bin/bash -c \"$0\" ci-run \"$@\"",
              run, std::to_string(inline_files->size() / 2)};
      argv.insert(argv.end(), inline_files->begin(), inline_files->end());
    }
    if (c_.session) {
      argv.push_back(BackgroundList());
      argv.push_back(std::to_string(c_.cpu_time_sec));
    }
    argv.insert(argv.end(), payload.argv.begin(), payload.argv.end());
    auto started = co_await StartExec(c_, argv, true);
    if (!started.ok()) co_return started.status().Context("starting the program");
    auto st = std::make_shared<RunState>(c_.ex);
    st->stream = started->stream;
    active_ = st->stream;

    // stdin: written whole, then half-closed so the program sees EOF.
    std::optional<std::string> input = std::move(payload.stdin_data);
    asio::co_spawn(
        c_.ex,
        [st, input = std::move(input)]() -> asio::awaitable<void> {
          if (input && !input->empty()) {
            Status w = co_await st->stream->WriteAll(*input);
            if (!w.ok()) spdlog::debug("stdin: {}", w.message());  // the program quit reading
          }
          st->stream->ShutdownSend();
        },
        asio::detached);
    // The deadline: kill the program's processes from a second exec, then cut the stream if it
    // still has not ended.
    st->deadline.expires_after(payload.timeout);
    asio::co_spawn(
        c_.ex,
        [st, c = c_, bg = BackgroundList()]() -> asio::awaitable<void> {
          boost::system::error_code ec;
          co_await st->deadline.async_wait(asio::redirect_error(use_awaitable, ec));
          if (ec || st->done) co_return;
          st->timed_out = true;
          const std::string* spared = c.session ? &bg : nullptr;
          Status k = co_await KillSandboxProcesses(c, spared);
          if (!k.ok()) spdlog::warn("docker {}: {}", c.id.substr(0, 12), k.message());
          if (st->done) co_return;
          st->deadline.expires_after(kKillGrace);
          co_await st->deadline.async_wait(asio::redirect_error(use_awaitable, ec));
          if (!ec && !st->done) st->stream->Close();
        },
        asio::detached);

    bool system_error = false;
    std::string system_text;
    FrameDemuxer demux([&](FrameDemuxer::Stream s, std::string_view bytes) {
      if (s == FrameDemuxer::Stream::kSystemError) {
        system_error = true;
        if (system_text.size() < kMaxErrorText) system_text.append(bytes);
        return;
      }
      sink(s == FrameDemuxer::Stream::kStderr ? StreamKind::kStderr : StreamKind::kStdout, bytes);
    });
    Status pumped = co_await Pump(*st->stream, demux);
    st->done = true;
    st->deadline.cancel();
    st->stream->Close();
    active_.reset();
    RunOutcome out;
    out.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
    out.timed_out = st->timed_out;
    if (killed_) co_return Status::Error("sandbox killed");
    if (!pumped.ok() && !st->timed_out) co_return pumped;
    if (system_error) co_return Status::Error("docker exec failed: " + system_text);
    auto t_ended = Clock::now();
    auto code = co_await ExecExitCode(c_, started->exec_id);
    if (!code.ok()) co_return code.status();
    auto t_inspected = Clock::now();
    // The Engine reports a death by signal N as 128+N, like a shell.
    if (code->has_value() && **code > 128 && **code <= 128 + 64) {
      out.signal = **code - 128;
    } else if (code->has_value()) {
      out.exit_code = **code;
    }
    if (out.timed_out) {
      out.exit_code.reset();
      if (!out.signal) out.signal = SIGKILL;
    }
    // Like local: nothing of the program outlives its run; then the cgroup's counters. A session's
    // wrapper has killed the leftovers already (sparing background programs); its counters are
    // the container's since its start: the run's CPU time is the difference.
    uint64_t cpu_before = report_.cpu_ms;
    co_await ReadCounters(!c_.session);
    out.cpu_ms = report_.cpu_ms;
    if (c_.session) out.cpu_ms = report_.cpu_ms > cpu_before ? report_.cpu_ms - cpu_before : 0;
    if (server_) server_->window_start_ms = report_.cpu_ms;  // this run's CPU is not idle CPU
    out.max_rss_kb = report_.memory_peak_bytes >> 10;
    spdlog::debug("docker {}: stage {} ms, exec+stream {} ms, inspect {} ms, counters {} ms",
                  c_.id.substr(0, 12), (t0 - t_stage) / 1ms, (t_ended - t0) / 1ms,
                  (t_inspected - t_ended) / 1ms, (Clock::now() - t_inspected) / 1ms);
    co_return out;
  }

  asio::awaitable<Result<Collection>> Collect(CollectLimits limits) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (NothingToCollect(limits.skip_path)) co_return Collection{};
    // --sparse: a file with holes travels as its data and a map (GNU 'S' members), so a huge
    // sparse file costs the stream, and the host's disk, what it costs the workspace.
    std::vector<std::string> cmd = {"tar", "-c", "--sparse", "--format=gnu", "-C", c_.cwd,
                                    "-f",  "-",  "."};
    if (limits.modified_after_ns != 0) {  // GNU tar: regular files modified after the instant
      cmd.insert(cmd.begin() + 1,
                 fmt::format("--newer-mtime=@{}.{:09}", limits.modified_after_ns / 1000000000,
                             limits.modified_after_ns % 1000000000));
    }
    auto started = co_await StartExec(c_, cmd, false);
    if (!started.ok()) co_return started.status().Context("collecting files");
    active_ = started->stream;
    Collection out;
    uint64_t total = 0;
    int fd = -1;
    std::optional<SparseWriter> writer;  // on fd: zeros and holes stay holes on the host
    bool skipping = false;
    Status write_error;
    TarReader reader(
        {[&](const std::string& path, uint64_t size) {
           skipping = path == limits.skip_path || path.empty();
           if (skipping) return true;
           if (out.files.size() + 1 > limits.max_files) {
             out.truncated = true;
             return false;
           }
           // By apparent size; one that does not fit is passed over (its data is read, which
           // --sparse keeps to what the workspace really holds) and smaller ones still come.
           if (size > limits.max_total_bytes - total) {
             out.truncated = true;
             skipping = true;
             return true;
           }
           std::string host = limits.dest_dir + "/collected-XXXXXX";
           fd = ::mkostemp(host.data(), O_CLOEXEC);
           if (fd < 0) {
             write_error = Status::Errno("creating a file in " + limits.dest_dir, errno);
             return false;
           }
           writer.emplace(fd, host);
           out.files.push_back({path, host, size});
           total += size;
           return true;
         },
         [&](std::string_view data) -> Status { return skipping ? Status() : writer->Write(data); },
         [&]() -> Status {
           if (skipping || fd < 0) return Status();
           Status s = writer->Finish();
           writer.reset();
           ::close(fd);
           fd = -1;
           return s;
         },
         [&](uint64_t n) -> Status { return skipping ? Status() : writer->Hole(n); }});
    Status tar_error;
    std::string stderr_text;
    FrameDemuxer demux([&](FrameDemuxer::Stream s, std::string_view bytes) {
      if (s != FrameDemuxer::Stream::kStdout) {
        if (stderr_text.size() < kMaxErrorText) stderr_text.append(bytes);
        return;
      }
      if (!tar_error.ok() || reader.stopped() || reader.finished()) return;
      tar_error = reader.Feed(bytes);
    });
    std::function<bool()> stop = [&] {
      return !tar_error.ok() || reader.stopped() || !write_error.ok();
    };
    Status pumped = co_await Pump(*started->stream, demux, &stop);
    started->stream->Close();
    active_.reset();
    if (fd >= 0) ::close(fd);
    Status failed = !write_error.ok() ? write_error : !tar_error.ok() ? tar_error : pumped;
    if (killed_) failed = Status::Error("sandbox killed");
    if (failed.ok() && !reader.stopped() && !reader.finished()) {
      failed = Status::Error("tar of the workspace ended early: " + stderr_text);
    }
    if (!failed.ok()) {
      for (const auto& f : out.files) ::unlink(f.host_path.c_str());
      co_return failed.Context("collecting files");
    }
    if (!stderr_text.empty()) {
      spdlog::debug("docker {}: tar -c: {}", c_.id.substr(0, 12), stderr_text);
    }
    co_return out;
  }

  asio::awaitable<ResourceReport> Destroy() override {
    if (destroyed_) co_return report_;
    destroyed_ = true;
    auto t0 = Clock::now();
    if (active_) active_->Close();
    if (server_) server_->stream->Close();
    std::string path = "/containers/" + c_.id + "/json";
    auto r = co_await c_.client->Request("GET", path);
    rapidjson::Document doc;
    if (r.ok() && r->ok() && ParseObject(r->body, doc) && doc.HasMember("State") &&
        doc["State"].IsObject()) {
      const auto& state = doc["State"];
      report_.oom_killed = state.HasMember("OOMKilled") && state["OOMKilled"].IsBool() &&
                           state["OOMKilled"].GetBool();
    }
    // Docker flags OOMKilled only when PID 1 dies of it, never for an exec'd program, and has no
    // pids event: the cgroup's own counters tell. Read from the host they cost nothing, so read
    // them again (anything since Run); through an exec only when Run did not get them.
    if (!killed_ && (host_ || !counters_read_)) co_await ReadCounters(false);
    spdlog::debug("docker {}: destroy: inspect+probe {} ms", c_.id.substr(0, 12),
                  (Clock::now() - t0) / 1ms);
    // The removal (~100 ms of the Engine's time) runs after the answer: DockerExecutor::Drain
    // waits for it at shutdown, the reaper removes what a failure or a crash left.
    ++removals_->in_flight;
    asio::co_spawn(c_.ex, Remove(c_, removals_), asio::detached);
    co_return report_;
  }

  void Kill() override {
    if (killed_ || destroyed_) return;
    killed_ = true;
    if (active_) active_->Close();
    if (server_) server_->stream->Close();
    asio::co_spawn(
        c_.ex,
        [c = c_]() -> asio::awaitable<void> {
          std::string method = "POST", path = "/containers/" + c.id + "/kill";
          auto r = co_await c.client->Request(method, path);
          (void)r;  // Destroy removes it either way
        },
        asio::detached);
  }

 private:
  std::string BackgroundList() const {
    std::string out;
    for (long pid : background_) {
      if (!out.empty()) out += ' ';
      out += std::to_string(pid);  // appended: `" " + string&&` trips GCC 12 -Werror=restrict
    }
    return out;
  }

  // Session only: starts the program serving calls as an exec of its own, whose stdin and output
  // only the daemon holds; returns once it printed its pid (spared by later runs' kills).
  asio::awaitable<Result<RunOutcome>> StartCallServer(const std::vector<std::string>& argv) {
    auto t0 = Clock::now();
    if (server_) co_await EndCallServer();
    auto started = co_await StartExec(c_, argv, true);
    if (!started.ok()) co_return started.status().Context("starting the interpreter");
    auto s = std::make_shared<CallServer>(c_.ex);
    s->stream = started->stream;
    s->exec_id = started->exec_id;
    asio::co_spawn(c_.ex, PumpCallServer(s), asio::detached);
    while (!s->started && s->alive && Clock::now() - t0 < 30s) co_await AwaitNews(*s, 250ms);
    char* end = nullptr;
    long pid = std::strtol(s->first_line.c_str(), &end, 10);
    if (!s->started || pid <= 1 || end == nullptr || *end != '\n') {
      s->stream->Close();
      co_return Status::Error("starting the interpreter: it did not report its pid (" +
                              s->first_line + ")");
    }
    s->pid = pid;
    background_.push_back(pid);
    co_await ReadCounters(false);
    s->window_start_ms = report_.cpu_ms;
    server_ = s;
    if (host_ && c_.cpu_time_sec > 0) {
      asio::co_spawn(c_.ex,
                     WatchIdleCpu(s, *host_, init_pid_, c_.id, uint64_t{c_.cpu_time_sec} * 1000),
                     asio::detached);
    }
    RunOutcome out;
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    co_return out;
  }

  // Kills everything but PID 1 (the interpreter with it) and forgets the interpreter.
  asio::awaitable<void> EndCallServer() {
    auto s = std::move(server_);
    server_.reset();
    if (!s) co_return;
    if (s->alive) {
      bool killed = host_ && KillHostCgroupProcesses(*host_, init_pid_, c_.id);
      if (!killed) {
        Status k = co_await KillSandboxProcesses(c_, nullptr);
        if (!k.ok()) spdlog::warn("docker {}: {}", c_.id.substr(0, 12), k.message());
      }
      auto t0 = Clock::now();
      while (s->alive && Clock::now() - t0 < kKillGrace) co_await AwaitNews(*s, 100ms);
      s->stream->Close();
    }
    s->sink = nullptr;
    background_.erase(std::remove(background_.begin(), background_.end(), s->pid),
                      background_.end());
  }

  // A call (RunPayload::call): request, stdin and nonce on the interpreter's stdin; its output
  // to `sink` up to the end marker. Bounded from outside: the timeout, and the container's CPU
  // during the call (and idle since the last call) against the CPU limit.
  asio::awaitable<Result<RunOutcome>> ServeCall(RunPayload payload, OutputSink sink) {
    RunOutcome out;
    auto s = server_;
    if (s && !s->alive) co_await EndCallServer();
    if (!server_) {
      out.no_server = true;
      co_return out;
    }
    Status staged = co_await Stage(payload.files);
    if (!staged.ok()) co_return staged.Context("staging files");
    const uint64_t limit_ms = uint64_t{c_.cpu_time_sec} * 1000;
    co_await ReadCounters(false);
    s->idle_ms += report_.cpu_ms > s->window_start_ms ? report_.cpu_ms - s->window_start_ms : 0;
    if (limit_ms > 0 && s->idle_ms > limit_ms) {  // burnt it while no call ran
      co_await EndCallServer();
      out.no_server = true;
      co_return out;
    }
    const uint64_t cpu_start = report_.cpu_ms, oom_start = oom_kills_;
    const std::string nonce = RandomHex(16);
    for (auto& o : s->out) o.Begin(nonce);
    s->sink = sink;
    auto u32 = [](size_t n) {
      std::string b(4, '\0');
      for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
      return b;
    };
    const std::string& call = *payload.call;
    const std::string input = payload.stdin_data.value_or("");
    std::string frame = u32(call.size()) + call + u32(input.size()) + input + nonce;
    auto t0 = Clock::now();
    const auto deadline = t0 + payload.timeout;
    Status written = co_await s->stream->WriteAll(frame);
    if (!written.ok()) spdlog::debug("docker {}: call: {}", c_.id.substr(0, 12), written.message());
    const auto poll = host_ ? Clock::duration(250ms) : Clock::duration(1s);
    auto next_counters = t0;
    enum class End { kAnswered, kDied, kTimedOut, kCpu } end;
    for (;;) {
      if (s->out[0].ended() && s->out[1].ended()) {
        end = End::kAnswered;
        break;
      }
      if (!s->alive || killed_) {
        end = End::kDied;
        break;
      }
      auto now = Clock::now();
      if (now >= deadline) {
        end = End::kTimedOut;
        break;
      }
      if (now >= next_counters) {
        co_await ReadCounters(false);
        next_counters = Clock::now() + poll;
        out.cpu_ms = report_.cpu_ms > cpu_start ? report_.cpu_ms - cpu_start : 0;
        if (limit_ms > 0 && out.cpu_ms >= limit_ms) {
          end = End::kCpu;
          break;
        }
      }
      co_await AwaitNews(*s, std::min<Clock::duration>(poll, deadline - now));
    }
    s->sink = nullptr;
    if (killed_) co_return Status::Error("sandbox killed");
    std::optional<int> code;
    if (end == End::kDied) {
      auto c = co_await ExecExitCode(c_, s->exec_id);
      if (c.ok()) code = *c;
    }
    if (end != End::kAnswered) co_await EndCallServer();
    co_await ReadCounters(false);
    out.cpu_ms = report_.cpu_ms > cpu_start ? report_.cpu_ms - cpu_start : 0;
    out.oom_killed = oom_kills_ > oom_start;
    out.max_rss_kb = report_.memory_peak_bytes >> 10;  // the container's peak so far
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    s->window_start_ms = report_.cpu_ms;
    switch (end) {
      case End::kAnswered:
        if (s->out[1].flags() & 1) {
          out.timed_out = true;  // interrupted at its timeout, the state survives
        } else {
          out.exit_code = s->out[1].status();
        }
        break;
      case End::kTimedOut:
        out.timed_out = true;
        break;
      case End::kCpu:
        out.signal = SIGKILL;  // with cpu_ms past the limit: the cpu_limit verdict
        break;
      case End::kDied:
        if (code && *code > 128 && *code <= 128 + 64) {
          out.signal = *code - 128;
        } else if (code) {
          out.exit_code = *code;
        } else {
          out.signal = SIGKILL;
        }
        break;
    }
    co_return out;
  }

  // Session only: starts the program in a session of its own with stdio on /dev/null and returns
  // once it runs (no exit code); its session is spared by the kills of later runs.
  asio::awaitable<Result<RunOutcome>> RunBackground(const std::vector<std::string>& program) {
    auto t0 = Clock::now();
    std::vector<std::string> argv = {"/bin/bash", "-c", kStartBackgroundScript, "ci-bg"};
    argv.insert(argv.end(), program.begin(), program.end());
    auto started = co_await StartExec(c_, argv, false);
    if (!started.ok()) co_return started.status().Context("starting the background program");
    active_ = started->stream;
    std::string text;
    FrameDemuxer demux([&](FrameDemuxer::Stream, std::string_view b) {
      if (text.size() < kMaxErrorText) text.append(b);
    });
    Status pumped = co_await Pump(*started->stream, demux);
    started->stream->Close();
    active_.reset();
    if (killed_) co_return Status::Error("sandbox killed");
    if (!pumped.ok()) co_return pumped.Context("starting the background program");
    char* end = nullptr;
    long pid = std::strtol(text.c_str(), &end, 10);
    if (pid <= 1 || end == nullptr || (*end != '\n' && *end != '\0')) {
      co_return Status::Error("starting the background program: " + text);
    }
    background_.push_back(pid);
    RunOutcome out;
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    co_return out;
  }

  // Writes the files as a tar into `tar -x` running in the workspace.
  asio::awaitable<Status> Stage(const std::vector<StagedFile>& files) {
    if (files.empty()) co_return Status();
    std::vector<std::string> cmd = {"tar", "-x", "-C", c_.cwd, "-f", "-"};
    auto started = co_await StartExec(c_, cmd, true);
    if (!started.ok()) co_return started.status();
    active_ = started->stream;
    uint32_t uid = 65532, gid = 65532;
    std::set<std::string> dirs;
    Status written;
    std::string chunk(kReadChunk, '\0');
    for (const auto& f : files) {
      for (size_t slash = f.workspace_path.find('/'); slash != std::string::npos;
           slash = f.workspace_path.find('/', slash + 1)) {
        std::string dir = f.workspace_path.substr(0, slash);
        if (!dirs.insert(dir).second) continue;
        std::string header = TarHeader(dir, 0, true, 0755, uid, gid);
        written = co_await started->stream->WriteAll(header);
        if (!written.ok()) break;
      }
      if (!written.ok()) break;
      int fd = ::open(f.host_path.c_str(), O_RDONLY | O_CLOEXEC);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0) {
        written = Status::Errno(f.host_path, errno);
        if (fd >= 0) ::close(fd);
        break;
      }
      uint64_t size = static_cast<uint64_t>(st.st_size);
      std::string header = TarHeader(f.workspace_path, size, false, 0644, uid, gid);
      written = co_await started->stream->WriteAll(header);
      uint64_t left = size;
      while (written.ok() && left > 0) {
        ssize_t n = ::read(fd, chunk.data(), std::min<uint64_t>(left, chunk.size()));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          written = Status::Error("reading " + f.host_path + ": the file shrank");
          break;
        }
        std::string_view piece(chunk.data(), static_cast<size_t>(n));
        written = co_await started->stream->WriteAll(piece);
        left -= static_cast<uint64_t>(n);
      }
      ::close(fd);
      if (!written.ok()) break;
      std::string pad = TarPadding(size);
      written = co_await started->stream->WriteAll(pad);
      if (!written.ok()) break;
    }
    if (written.ok()) {
      std::string trailer = TarTrailer();
      written = co_await started->stream->WriteAll(trailer);
    }
    started->stream->ShutdownSend();
    std::string errors;
    FrameDemuxer demux([&](FrameDemuxer::Stream, std::string_view b) {
      if (errors.size() < kMaxErrorText) errors.append(b);
    });
    Status pumped = co_await Pump(*started->stream, demux);
    started->stream->Close();
    active_.reset();
    if (killed_) co_return Status::Error("sandbox killed");
    auto code = co_await ExecExitCode(c_, started->exec_id);
    if (!code.ok()) co_return code.status();
    if (!code->has_value() || **code != 0) {
      co_return Status::Error("tar -x failed" + (errors.empty() ? "" : ": " + errors) +
                              (written.ok() ? "" : " (" + written.message() + ")"));
    }
    if (!written.ok()) co_return written;
    co_return pumped;
  }

  // True when the workspace holds nothing but the entrypoint, as seen from the host through PID
  // 1's root (local Engine only; names are read, never followed), saving Collect's tar exec.
  bool NothingToCollect(const std::string& skip_path) const {
    if (!host_ || init_pid_ <= 0) return false;
    std::string path = "/proc/" + std::to_string(init_pid_) + "/root" + c_.cwd;
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;  // not root here: the tar exec tells
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      ::close(fd);
      return false;
    }
    bool nothing = true;
    for (;;) {
      errno = 0;
      const dirent* e = ::readdir(dir);
      if (e == nullptr) {
        nothing = nothing && errno == 0;
        break;
      }
      std::string_view name = e->d_name;
      if (name == "." || name == ".." || (name == skip_path && e->d_type == DT_REG)) continue;
      nothing = false;
      break;
    }
    ::closedir(dir);
    return nothing;
  }

  // The container's cgroup counters into report_ (flags only ever set), from the host when the
  // Engine is local, else from an exec. kill_leftovers: first kill every process but PID 1
  // (the exec probe always does).
  asio::awaitable<void> ReadCounters(bool kill_leftovers) {
    if (!host_checked_) {
      host_checked_ = true;
      co_await FindHostCgroup();
    }
    CgroupCounters counters;
    if (host_) {
      bool killed = !kill_leftovers || KillHostCgroupProcesses(*host_, init_pid_, c_.id);
      counters = ParseCgroupFiles(ReadHostCgroupFiles(*host_));
      if (!killed) {
        spdlog::debug("docker {}: could not kill leftovers from the host, using an exec",
                      c_.id.substr(0, 12));
        co_await ProbeInContainer();
      }
    } else {
      auto probed = co_await ProbeInContainer();
      if (!probed) co_return;
      counters = *probed;
    }
    counters_read_ = true;
    report_.oom_killed = report_.oom_killed || counters.oom_killed;
    oom_kills_ = std::max(oom_kills_, counters.oom_kills);
    report_.pids_limit_hit = report_.pids_limit_hit || counters.pids_limit_hit;
    if (counters.has_cpu) report_.cpu_ms = counters.cpu_ms;
    if (counters.memory_peak_bytes > 0) report_.memory_peak_bytes = counters.memory_peak_bytes;
  }

  // A unix socket may still lead to an Engine elsewhere (a VM): the container's PID 1 must be
  // visible here with a cgroup naming the container.
  asio::awaitable<void> FindHostCgroup() {
    if (!host_cgroups_ || c_.client->endpoint().kind != Endpoint::Kind::kUnix) co_return;
    std::string path = "/containers/" + c_.id + "/json";
    auto r = co_await c_.client->Request("GET", path);
    rapidjson::Document doc;
    if (!r.ok() || !r->ok() || !ParseObject(r->body, doc) || !doc.HasMember("State") ||
        !doc["State"].IsObject() || !doc["State"].HasMember("Pid") ||
        !doc["State"]["Pid"].IsInt() || doc["State"]["Pid"].GetInt() <= 0) {
      co_return;
    }
    init_pid_ = doc["State"]["Pid"].GetInt();
    auto slurp = [](const std::string& file) {
      std::ifstream in(file);
      std::ostringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    std::string own = slurp("/proc/" + std::to_string(init_pid_) + "/cgroup");
    std::string mountinfo = slurp("/proc/self/mountinfo");
    HostCgroup cg;
    std::string why;
    if (FindContainerCgroup(own, mountinfo, c_.id, &cg, &why)) {
      host_ = cg;
    } else {
      spdlog::debug("docker {}: cgroup not readable from here ({}), counters by exec",
                    c_.id.substr(0, 12), why);
    }
  }

  // The in-container probe (kill leftovers, print the counter files). When it cannot start (the
  // pids limit is full of a fork bomb's processes), the limit is raised a little through the
  // Engine's update call for the probe's own processes and it is tried again.
  asio::awaitable<std::optional<CgroupCounters>> ProbeInContainer() {
    // Sessions: no kill here, background programs live on (each run's wrapper killed the rest).
    const char* script = c_.session ? kInContainerCountersScript : kInContainerProbeScript;
    std::vector<std::string> cmd = {"/bin/sh", "-c", script};
    std::string why;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) {
        std::string path = "/containers/" + c_.id + "/update";
        std::string body =
            "{\"PidsLimit\":" + std::to_string(pids_limit_ + 16u * static_cast<uint32_t>(attempt)) +
            "}";
        auto u = co_await c_.client->Request("POST", path, body);
        if (!u.ok() || !u->ok())
          spdlog::debug("docker {}: raising the pids limit failed", c_.id.substr(0, 12));
        co_await Sleep(20ms);
      }
      auto started = co_await StartExec(c_, cmd, false);
      if (!started.ok()) {
        why = started.status().message();
        continue;
      }
      std::string text;
      FrameDemuxer demux([&](FrameDemuxer::Stream s, std::string_view b) {
        if (s == FrameDemuxer::Stream::kStdout && text.size() < 4 * kMaxErrorText) text.append(b);
      });
      Status pumped = co_await Pump(*started->stream, demux);
      started->stream->Close();
      auto code = co_await ExecExitCode(c_, started->exec_id);
      if (pumped.ok() && code.ok() && code->has_value() && **code == 0) {
        co_return ParseCgroupFiles(SplitProbeOutput(text));
      }
      why = !pumped.ok() ? pumped.message()
            : !code.ok() ? code.status().message()
                         : "exit status " + (code->has_value() ? std::to_string(**code)
                                                               : std::string("unknown"));
    }
    spdlog::warn("docker {}: cgroup probe failed: {}", c_.id.substr(0, 12), why);
    co_return std::nullopt;
  }

  Container c_;
  uint32_t pids_limit_;
  bool host_cgroups_;
  std::shared_ptr<Removals> removals_;
  bool counters_read_ = false;
  bool host_checked_ = false;
  std::optional<HostCgroup> host_;
  pid_t init_pid_ = 0;
  std::shared_ptr<RawStream> active_;
  std::vector<long> background_;        // sessions: pids (= session ids) of background programs
  std::shared_ptr<CallServer> server_;  // sessions: the program serving calls, if any
  uint64_t oom_kills_ = 0;              // the cgroup's OOM kill count, as last read
  bool killed_ = false;
  bool destroyed_ = false;
  ResourceReport report_;
};

class DockerExecutor final : public Executor {
 public:
  DockerExecutor(asio::any_io_executor ex, DockerExecutorOptions opts)
      : ex_(ex),
        opts_(std::move(opts)),
        client_(std::make_shared<EngineClient>(ex, opts_.endpoint, opts_.api_timeout)),
        reaper_(std::make_shared<ReaperState>()) {
    ImageWatchOptions io;
    io.image = opts_.image;
    io.period = opts_.image_check_period;
    io.pull_timeout = opts_.pull_timeout;
    io.pull_idle_timeout = opts_.pull_idle_timeout;
    image_ = std::make_shared<ImageWatch>(ex, client_, io);
    reaper_->client = client_;
    reaper_->owner = OwnerHere();
    reaper_->started_at = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  }

  std::string_view name() const override { return "docker"; }
  bool supports_sessions() const override { return true; }

  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override {
    // While the image is missing or being pulled, executions fail at once and say so.
    if (Status s = image_->Usable(); !s.ok()) co_return s;
    if (Status s = co_await EnsureConnected(); !s.ok()) co_return s;
    const bool session = spec.session_expires_at != 0;
    std::string body = ContainerCreateJson(ContainerCreateFromSpec(spec, OptionsFor(spec)));
    std::string name = "ci-exec-" + RandomHex(8);
    if (session) name = "ci-session-" + RandomHex(8);
    std::string path = "/containers/create?name=" + name;
    auto created = co_await client_->Request("POST", path, body);
    if (!created.ok()) co_return created.status();
    if (created->status == 404) {
      // No such image: gone since the watchdog last looked (docker rmi, an image prune).
      image_->Vanished();
      if (Status s = image_->Usable(); !s.ok()) co_return s;
    }
    if (created->status != 201) {
      co_return HttpError("creating the executor container (image " + opts_.image + ")", *created);
    }
    rapidjson::Document doc;
    if (!ParseObject(created->body, doc) || !doc.HasMember("Id") || !doc["Id"].IsString()) {
      co_return Status::Error("docker container create: no Id in the answer");
    }
    Container c{client_,
                ex_,
                doc["Id"].GetString(),
                std::to_string(spec.uid) + ":" + std::to_string(spec.gid),
                spec.cwd,
                spec.env};
    for (const auto& e : opts_.extra.env) c.env.push_back(e);
    c.session = session;
    c.cpu_time_sec = spec.limits.cpu_time_sec;
    c.pids_limit = spec.limits.pids;
    auto sandbox =
        std::make_unique<DockerSandbox>(c, spec.limits.pids, opts_.host_cgroups, removals_);
    auto t_created = std::chrono::steady_clock::now();
    std::string start = "/containers/" + c.id + "/start";
    auto started = co_await client_->Request("POST", start);
    Status failed;
    if (!started.ok()) {
      failed = started.status();
    } else if (started->status != 204 && started->status != 304) {
      failed = HttpError("starting the executor container", *started);
    }
    if (!failed.ok()) {
      co_await sandbox->Destroy();
      co_return failed;
    }
    spdlog::debug("docker {}: started in {} ms", c.id.substr(0, 12),
                  (std::chrono::steady_clock::now() - t_created) / 1ms);
    co_return std::unique_ptr<Sandbox>(std::move(sandbox));
  }

  asio::awaitable<Status> Check() override {
    Status s = co_await client_->Negotiate();
    if (!s.ok()) co_return s;
    connected_ = true;
    // The daemon checks at startup and every HEALTH_CHECK_INTERVAL_SEC: the reaper rides on it
    // (first sweep at once, then at most every 60 s), detached so the check stays quick.
    if (!reaper_->running &&
        (!reaper_->first_done || Clock::now() - reaper_->last >= kReapPeriod)) {
      reaper_->last = Clock::now();
      asio::co_spawn(ex_, Reap(reaper_), asio::detached);
    }
    // The image: inspected at the first Check, then by its watchdog (every 60 s), which pulls it
    // when missing; this only reads its state (image_watch.h).
    Status image = co_await image_->Check();
    co_return image;
  }

  asio::awaitable<void> Drain() override {
    if (removals_->in_flight > 0) {
      spdlog::info("waiting for {} container removal(s)", removals_->in_flight);
    }
    while (removals_->in_flight > 0) co_await Sleep(10ms);
  }

  std::string network_isolation() const override {
    if (opts_.network == "none") return "none: docker NetworkMode none, loopback only";
    return "docker network " + opts_.network;
  }

  // Read from the ContainerCreate body that Prepare sends for this spec.
  Enforcement enforcement(const SandboxSpec& spec) const override {
    Enforcement e;
    const ContainerCreate body = ContainerCreateFromSpec(spec, OptionsFor(spec));
    e.enforced = ContainerMeasures(body);
    if (body.seccomp_log_only) {
      e.downgrades.push_back(SeccompLogOnly(SeccompMeasure(body.seccomp_profile_name)));
    }
    // Every container's program is host uid 65532 (no user namespace per container), so the
    // counters the kernel keeps per uid are shared by all containers.
    e.downgrades.push_back(
        {MeasureName({MeasureKind::kOwnHostIds}),
         "every container runs as host uid 65532: per-user kernel counters (pipe buffer pages, "
         "inotify instances, queued signals, processes) are shared by all containers",
         "use the local backend as root for a host uid per sandbox"});
    if (opts_.network != "none") {
      e.downgrades.push_back(
          {"network isolation",
           "PYTHON_EXECUTOR_DOCKER_NETWORK=" + opts_.network + " gives sandboxes a network",
           "unset PYTHON_EXECUTOR_DOCKER_NETWORK"});
    }
    return e;
  }

 private:
  // The container's options for `spec` (Prepare's and enforcement()'s).
  ContainerOptions OptionsFor(const SandboxSpec& spec) const {
    ContainerOptions o;
    o.image = opts_.image;
    o.network = opts_.network;
    o.extra = opts_.extra;
    o.extra.labels[kOwnerLabel] = reaper_->owner;
    // PID 1 only waits, with SIGCHLD ignored so the kernel reaps the orphans reparented to it:
    // zombies would keep their pids charged and a fork bomb's remains would fill the pids limit
    // for good (no exec could start). Not tini: kill(-1) would reach its child and end the
    // container. bash, because dash does not pass an ignored SIGCHLD on to exec.
    o.cmd = {"/bin/bash", "-c", "trap '' CHLD; exec sleep infinity"};
    o.expires_at = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch() + opts_.container_ttl)
                       .count();
    if (spec.session_expires_at != 0) {
      // A session ends by itself at its expiry, daemon or not: PID 1 sleeps until then (the
      // container stops; the reaper or the daemon removes it).
      int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
      int64_t left = std::max<int64_t>(1, spec.session_expires_at - now);
      o.cmd = {"/bin/bash", "-c", "trap '' CHLD; exec sleep " + std::to_string(left)};
      o.component = "session";
      o.expires_at = spec.session_expires_at;
      o.cpu_rlimit_per_run = true;
    }
    return o;
  }

  asio::awaitable<Status> EnsureConnected() {
    if (connected_) co_return Status();
    Status s = co_await client_->Negotiate();
    if (s.ok()) connected_ = true;
    co_return s;
  }

  asio::any_io_executor ex_;
  DockerExecutorOptions opts_;
  std::shared_ptr<EngineClient> client_;
  bool connected_ = false;
  std::shared_ptr<ReaperState> reaper_;
  std::shared_ptr<Removals> removals_ = std::make_shared<Removals>();
  std::shared_ptr<ImageWatch> image_;
};

}  // namespace

Result<DockerExecutorOptions> DockerOptionsFromEnv(const EnvLookup& getenv) {
  DockerExecutorOptions o;
  auto endpoint =
      ResolveEndpoint(getenv, [](const std::string& p) { return ::access(p.c_str(), F_OK) == 0; });
  if (!endpoint.ok()) return endpoint.status();
  o.endpoint = *endpoint;
  auto get = [&](const char* n) {
    const char* v = getenv(n);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (std::string image = get("PYTHON_EXECUTOR_DOCKER_IMAGE"); !image.empty()) {
    o.image = NormalizeImageRef(image);
  }
  if (std::string net = get("PYTHON_EXECUTOR_DOCKER_NETWORK"); !net.empty()) {
    if (net == "host" || net.rfind("container:", 0) == 0) {
      return Status::Error("invalid environment variable PYTHON_EXECUTOR_DOCKER_NETWORK='" + net +
                           "': host and container networks are not allowed for sandboxes");
    }
    o.network = net;
  }
  EnvReader env(getenv);
  int64_t pull_sec = -1, check_sec = -1;
  env.Int("PYTHON_EXECUTOR_DOCKER_PULL_TIMEOUT_SEC", pull_sec, 1, 86400);
  env.Int("PYTHON_EXECUTOR_DOCKER_IMAGE_CHECK_INTERVAL_SEC", check_sec, 1, 86400);
  if (!env.error().ok()) return env.error();
  if (pull_sec > 0) o.pull_timeout = std::chrono::seconds(pull_sec);
  if (check_sec > 0) o.image_check_period = std::chrono::seconds(check_sec);
  auto extra = ParseRunArgs(get("PYTHON_EXECUTOR_DOCKER_RUN_ARGS"));
  if (!extra.ok()) return extra.status();
  o.extra = *extra;
  return o;
}

std::unique_ptr<Executor> MakeDockerExecutor(asio::any_io_executor ex, DockerExecutorOptions opts) {
  return std::make_unique<DockerExecutor>(std::move(ex), std::move(opts));
}

}  // namespace ci::docker
