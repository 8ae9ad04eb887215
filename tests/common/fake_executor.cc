#include "common/fake_executor.h"

#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/json.h"
#include "core/sleep.h"

namespace ci::testing_support {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

RunOutcome ExitedWith(int code) {
  RunOutcome out;
  out.exit_code = code;
  return out;
}

asio::awaitable<RunOutcome> ExitZero(FakeProcess& p) { co_return p.Exit(0); }

// The request of python_session.h's PythonSessionRequest, read as the server reads it.
std::optional<FakeCell> ParseCell(const std::string& request) {
  FakeCell cell;
  if (!json::Decode(request, &cell)) return std::nullopt;
  return cell;
}

int64_t MtimeNs(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

// One sandbox: a directory whose workspace/ is the program's /workspace.
class FakeSandbox final : public Sandbox {
 public:
  FakeSandbox(FakeExecutor& owner, int number, fs::path dir, bool session)
      : owner_(owner),
        number_(number),
        dir_(std::move(dir)),
        session_(session),
        timer_(owner.ex_) {}

  asio::awaitable<Result<RunOutcome>> Run(RunPayload payload, OutputSink sink) override {
    if (owner_.LostBeforeRun(number_)) {
      gone_ = true;
      co_return Usable().NotStarted();
    }
    if (Status s = Usable(); !s.ok()) co_return s;
    if (!session_ && ran_) co_return Status::Error("fake: an execution sandbox serves one run");
    ran_ = true;
    for (const StagedFile& f : payload.files) {
      if (Status s = Stage(f); !s.ok()) co_return s;
    }
    if (payload.background) {
      if (payload.serves_calls) {
        interpreter_.emplace();
        owner_.Count([](FakeCounts& c) { ++c.interpreters_started; });
      }
      co_return RunOutcome{};  // started; a background program has no exit status
    }
    std::optional<FakeCell> cell;
    if (payload.call) {
      if (!interpreter_) {
        RunOutcome none;
        none.no_server = true;
        co_return none;
      }
      cell = ParseCell(*payload.call);
      if (!cell) co_return Status::Error("fake: the call is not a python_session.h request");
    } else if (!payload.argv.empty() && payload.argv[0] == "true") {
      co_return ExitedWith(0);
    }
    owner_.Count([](FakeCounts& c) { ++c.runs_started; });
    const auto start = Clock::now();
    FakeProcess p(*this, payload, sink, start + payload.timeout);
    if (cell) {
      p.alarm_ = start + std::chrono::milliseconds(cell->timeout_ms);
      p.cell_ = std::move(cell);
    }
    FakeProgram program = owner_.Script(payload.call.has_value());
    RunOutcome out = co_await program(p);
    if (Status s = Usable(); !s.ok()) co_return s;
    if (p.timed_out_) {
      // Killed from outside at the run's timeout: no exit status, and a call's interpreter dies.
      out = RunOutcome{};
      out.timed_out = true;
      if (payload.call) interpreter_.reset();
    } else if (p.interrupted_) {
      // The cell's own alarm interrupted it: answer flag 1, the interpreter's state survives.
      out.exit_code.reset();
      out.timed_out = true;
    }
    out.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
    co_return out;
  }

  asio::awaitable<Result<Collection>> Collect(CollectLimits limits) override {
    if (Status s = Usable(); !s.ok()) co_return s;
    std::vector<fs::path> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(workspace(), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file() && !it->is_symlink()) found.push_back(it->path());
    }
    std::sort(found.begin(), found.end());
    Collection out;
    uint64_t total = 0;
    for (const fs::path& p : found) {
      std::string rel = fs::relative(p, workspace()).generic_string();
      if (rel == limits.skip_path || MtimeNs(p) <= limits.modified_after_ns) continue;
      uint64_t size = fs::file_size(p);
      if (out.files.size() >= limits.max_files || total + size > limits.max_total_bytes) {
        out.truncated = true;
        continue;
      }
      fs::path dest = fs::path(limits.dest_dir) / ("collected-" + std::to_string(out.files.size()));
      fs::copy_file(p, dest, ec);
      if (ec) co_return Status::Error("fake: collecting " + rel + ": " + ec.message());
      total += size;
      out.files.push_back({rel, dest.string(), size});
    }
    co_return out;
  }

  asio::awaitable<ResourceReport> Destroy() override {
    if (!destroyed_) {
      destroyed_ = true;
      Kill();
      std::error_code ec;
      fs::remove_all(dir_, ec);
      owner_.Count([](FakeCounts& c) { ++c.destroyed; });
    }
    co_return report_;
  }

  bool Alive() const override { return !owner_.DiedWhileIdle(number_); }

  void Kill() override {
    if (killed_) return;
    killed_ = true;
    timer_.cancel();
    if (!destroyed_) owner_.Count([](FakeCounts& c) { ++c.killed; });
  }

  fs::path workspace() const { return dir_ / "workspace"; }

 private:
  friend class FakeProcess;

  Status Usable() const {
    if (killed_) return Status::Error("fake: sandbox killed");
    if (gone_) return Status::Gone("fake: the sandbox's init died");
    return Status();
  }

  Status Stage(const StagedFile& f) {
    fs::path dest = workspace() / f.workspace_path;
    std::error_code ec;
    fs::create_directories(dest.parent_path(), ec);
    if (!ec) fs::copy_file(f.host_path, dest, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::Error("fake: staging " + f.workspace_path + ": " + ec.message());
    return Status();
  }

  FakeExecutor& owner_;
  const int number_;
  const fs::path dir_;
  const bool session_;
  asio::steady_timer timer_;  // the running program's sleep; Kill cancels it
  bool ran_ = false;
  bool killed_ = false;
  bool gone_ = false;
  bool destroyed_ = false;
  ResourceReport report_;
  std::optional<std::map<std::string, std::string>> interpreter_;  // a live server's namespace
};

FakeProcess::FakeProcess(FakeSandbox& sandbox, const RunPayload& payload, OutputSink& sink,
                         Clock::time_point deadline)
    : sandbox_(sandbox), payload_(payload), sink_(sink), deadline_(deadline) {}

std::map<std::string, std::string>& FakeProcess::globals() {
  if (!sandbox_.interpreter_) sandbox_.interpreter_.emplace();
  return *sandbox_.interpreter_;
}

int FakeProcess::sandbox_number() const { return sandbox_.number_; }

std::string FakeProcess::ReadFile(const std::string& path) const {
  std::ifstream in(sandbox_.workspace() / path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void FakeProcess::WriteFile(const std::string& path, std::string_view content) {
  fs::path p = sandbox_.workspace() / path;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(content.data(), content.size());
}

void FakeProcess::Write(StreamKind kind, std::string_view data) {
  if (!stopped() && !data.empty()) sink_(kind, data);
}

void FakeProcess::WriteInChunks(StreamKind kind, std::string_view data, size_t chunk) {
  for (size_t off = 0; off < data.size(); off += chunk) Write(kind, data.substr(off, chunk));
}

bool FakeProcess::stopped() const {
  return timed_out_ || interrupted_ || sandbox_.killed_ || sandbox_.gone_;
}

asio::awaitable<void> FakeProcess::Sleep(Clock::duration d) {
  if (stopped()) co_return;
  Clock::time_point until = std::min(Clock::now() + d, deadline_);
  if (alarm_) until = std::min(until, *alarm_);
  sandbox_.timer_.expires_at(until);
  boost::system::error_code ec;
  co_await sandbox_.timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (sandbox_.killed_) co_return;
  auto now = Clock::now();
  if (now >= deadline_) {
    timed_out_ = true;
  } else if (alarm_ && now >= *alarm_) {
    interrupted_ = true;
  }
}

asio::awaitable<void> FakeProcess::WaitFor(const FakeGate& gate) {
  while (!gate.is_open() && !stopped()) co_await Sleep(std::chrono::milliseconds(1));
}

RunOutcome FakeProcess::Exit(int code) const { return ExitedWith(code); }

RunOutcome FakeProcess::KilledBy(int signal) const {
  RunOutcome out;
  out.signal = signal;
  return out;
}

RunOutcome FakeProcess::OomKill() {
  sandbox_.report_.oom_killed = true;
  RunOutcome out = KilledBy(SIGKILL);
  if (cell_) {
    out.oom_killed = true;
    sandbox_.interpreter_.reset();
  }
  return out;
}

RunOutcome FakeProcess::HitPidsLimit(int code) {
  sandbox_.report_.pids_limit_hit = true;
  return Exit(code);
}

RunOutcome FakeProcess::LoseSandbox() {
  sandbox_.gone_ = true;
  sandbox_.timer_.cancel();
  return KilledBy(SIGKILL);
}

RunOutcome FakeProcess::EndInterpreter(int code) {
  sandbox_.interpreter_.reset();
  return Exit(code);
}

FakeExecutor::FakeExecutor(asio::any_io_executor ex, Options options)
    : ex_(std::move(ex)), options_(options), programs_(ExitZero), calls_(ExitZero) {
  std::string dir = (fs::temp_directory_path() / "fake-executor-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) std::abort();
  root_ = dir;
}

FakeExecutor::~FakeExecutor() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void FakeExecutor::RunPrograms(FakeProgram program) {
  std::lock_guard lock(mu_);
  programs_ = std::move(program);
}

void FakeExecutor::AnswerCalls(FakeProgram program) {
  std::lock_guard lock(mu_);
  calls_ = std::move(program);
}

void FakeExecutor::FailPrepare(Status why, int times) {
  std::lock_guard lock(mu_);
  for (int i = 0; i < times; ++i) prepare_failures_.push_back(why);
}

void FakeExecutor::HoldPrepares(const FakeGate* gate) {
  std::lock_guard lock(mu_);
  prepare_gate_ = gate;
}

void FakeExecutor::SetHealth(Status status) {
  std::lock_guard lock(mu_);
  health_ = std::move(status);
}

FakeCounts FakeExecutor::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

bool FakeExecutor::WaitUntil(const std::function<bool(const FakeCounts&)>& pred) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return pred(counts_); });
}

void FakeExecutor::Count(const std::function<void(FakeCounts&)>& change) {
  std::lock_guard lock(mu_);
  change(counts_);
  changed_.notify_all();
}

FakeProgram FakeExecutor::Script(bool call) const {
  std::lock_guard lock(mu_);
  return call ? calls_ : programs_;
}

void FakeExecutor::LoseBeforeRun(std::set<int> numbers) {
  std::lock_guard lock(mu_);
  lost_before_run_ = std::move(numbers);
}

void FakeExecutor::DieWhileIdle(std::set<int> numbers) {
  std::lock_guard lock(mu_);
  died_while_idle_ = std::move(numbers);
}

bool FakeExecutor::DiedWhileIdle(int number) const {
  std::lock_guard lock(mu_);
  return died_while_idle_.count(number) > 0;
}

bool FakeExecutor::LostBeforeRun(int number) const {
  std::lock_guard lock(mu_);
  return lost_before_run_.count(number) > 0;
}

asio::awaitable<Result<std::unique_ptr<Sandbox>>> FakeExecutor::Prepare(const SandboxSpec& spec) {
  co_await asio::post(ex_, asio::use_awaitable);  // never synchronous, like a real backend
  for (;;) {
    {
      std::lock_guard lock(mu_);  // HoldPrepares(nullptr) returns when no one looks at the gate
      if (prepare_gate_ == nullptr || prepare_gate_->is_open()) break;
    }
    co_await ci::Sleep(std::chrono::milliseconds(1));
  }
  std::optional<Status> failure;
  int number = 0;
  {
    std::lock_guard lock(mu_);
    if (!prepare_failures_.empty()) {
      failure = prepare_failures_.front();
      prepare_failures_.pop_front();
    } else {
      number = counts_.prepared + 1;
    }
  }
  if (failure) co_return *failure;
  const bool session = spec.session_expires_at != 0;
  if (session && !options_.sessions) co_return Status::Error("fake: no session sandboxes");
  fs::path dir = fs::path(root_) / ("sandbox-" + std::to_string(number));
  std::error_code ec;
  fs::create_directories(dir / "workspace", ec);
  if (ec) co_return Status::Error("fake: creating " + dir.string() + ": " + ec.message());
  Count([](FakeCounts& c) { ++c.prepared; });
  co_return std::make_unique<FakeSandbox>(*this, number, dir, session);
}

asio::awaitable<Status> FakeExecutor::Check() {
  std::lock_guard lock(mu_);
  co_return health_;
}

Enforcement FakeExecutor::enforcement(const SandboxSpec&) const {
  // Nothing: the fake isolates nothing, and says so.
  return {};
}

}  // namespace ci::testing_support
