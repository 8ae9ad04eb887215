#include "container/workspace_collect.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <optional>

#include "container/tar.h"
#include "core/sparse_writer.h"

namespace ci::container {
namespace {

// The archive's members into host files within the limits: by apparent size, one that does not
// fit is passed over (its data is read, which --sparse keeps to what the workspace really holds)
// and smaller ones still come, with `truncated` set.
class CollectedFiles {
 public:
  explicit CollectedFiles(const CollectLimits& limits) : limits_(limits) {}
  ~CollectedFiles() {
    if (fd_ >= 0) ::close(fd_);
  }

  TarReader::Callbacks Callbacks() {
    return {[this](const std::string& path, uint64_t size) { return Begin(path, size); },
            [this](std::string_view data) { return skipping_ ? Status() : writer_->Write(data); },
            [this] { return End(); },
            [this](uint64_t n) { return skipping_ ? Status() : writer_->Hole(n); }};
  }
  Collection& collection() { return out_; }
  const Status& write_error() const { return write_error_; }
  void RemoveAll() {
    for (const auto& f : out_.files) ::unlink(f.host_path.c_str());
  }

 private:
  bool Begin(const std::string& path, uint64_t size) {
    skipping_ = path == limits_.skip_path || path.empty();
    if (skipping_) return true;
    if (out_.files.size() + 1 > limits_.max_files) {
      out_.truncated = true;
      return false;
    }
    if (size > limits_.max_total_bytes - total_) {
      out_.truncated = true;
      skipping_ = true;
      return true;
    }
    std::string host = limits_.dest_dir + "/collected-XXXXXX";
    fd_ = ::mkostemp(host.data(), O_CLOEXEC);
    if (fd_ < 0) {
      write_error_ = Status::Errno("creating a file in " + limits_.dest_dir, errno);
      return false;
    }
    writer_.emplace(fd_, host);
    out_.files.push_back({path, host, size});
    total_ += size;
    return true;
  }

  Status End() {
    if (skipping_ || fd_ < 0) return Status();
    Status s = writer_->Finish();
    writer_.reset();
    ::close(fd_);
    fd_ = -1;
    return s;
  }

  const CollectLimits& limits_;
  Collection out_;
  uint64_t total_ = 0;
  int fd_ = -1;
  std::optional<SparseWriter> writer_;  // on fd_: zeros and holes stay holes on the host
  bool skipping_ = false;
  Status write_error_;
};

// --sparse: a file with holes travels as its data and a map (GNU 'S' members), so a huge sparse
// file costs the stream, and the host's disk, what it costs the workspace.
std::vector<std::string> TarCommand(const CollectLimits& limits, const std::string& cwd) {
  std::vector<std::string> cmd = {"tar", "-c", "--sparse", "--format=gnu", "-C", cwd,
                                  "-f",  "-",  "."};
  if (limits.modified_after_ns != 0) {  // GNU tar: regular files modified after the instant
    cmd.insert(cmd.begin() + 1,
               fmt::format("--newer-mtime=@{}.{:09}", limits.modified_after_ns / 1000000000,
                           limits.modified_after_ns % 1000000000));
  }
  return cmd;
}

}  // namespace

bool WorkspaceHoldsNothing(pid_t init_pid, const std::string& cwd, const std::string& skip_path) {
  if (init_pid <= 0) return false;
  std::string path = "/proc/" + std::to_string(init_pid) + "/root" + cwd;
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

asio::awaitable<Result<Collection>> CollectWorkspace(const Container& c,
                                                     const CollectLimits& limits, ExecHold hold) {
  const std::vector<std::string> cmd = TarCommand(limits, c.cwd);
  const ExecStdin no_stdin;
  auto started = co_await c.api->Exec(cmd, no_stdin);
  if (!started.ok()) co_return started.status().Context("collecting files");
  std::shared_ptr<ExecStream> stream = *started;
  if (hold.active != nullptr) *hold.active = stream;
  CollectedFiles files(limits);
  TarReader reader(files.Callbacks());
  Status tar_error;
  std::string stderr_text;
  ExecOutputSink untar = [&](ExecOutput s, std::string_view bytes) {
    if (s != ExecOutput::kStdout) {
      if (stderr_text.size() < kMaxErrorText) stderr_text.append(bytes);
      return;
    }
    if (!tar_error.ok() || reader.stopped() || reader.finished()) return;
    tar_error = reader.Feed(bytes);
  };
  std::function<bool()> stop = [&] {
    return !tar_error.ok() || reader.stopped() || !files.write_error().ok();
  };
  Status pumped = co_await Pump(*stream, untar, &stop);
  stream->Close();
  if (hold.active != nullptr) hold.active->reset();
  Status failed = !files.write_error().ok() ? files.write_error()
                  : !tar_error.ok()         ? tar_error
                                            : pumped;
  if (hold.Killed()) failed = Status::Error("sandbox killed");
  if (failed.ok() && !reader.stopped() && !reader.finished()) {
    failed = Status::Error("tar of the workspace ended early: " + stderr_text);
  }
  if (!failed.ok()) {
    files.RemoveAll();
    co_return failed.Context("collecting files");
  }
  if (!stderr_text.empty()) spdlog::debug("{}: tar -c: {}", c.short_id(), stderr_text);
  co_return std::move(files.collection());
}

}  // namespace ci::container
