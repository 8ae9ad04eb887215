// LocalSandbox::Collect: init walks /workspace and streams each regular file; the daemon writes
// them into fresh files of CollectLimits::dest_dir and re-checks the limits itself (init runs
// next to untrusted code, so its word on sizes is not trusted).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "core/sparse_writer.h"
#include "runtime/daemon/frame_io.h"
#include "runtime/daemon/local_sandbox.h"

namespace ci::runtime {
namespace {

using proto::Msg;

// Files written so far; removed again unless the collection succeeds.
class Receiver {
 public:
  explicit Receiver(const CollectLimits& limits) : limits_(limits) {}
  ~Receiver() {
    if (!committed_) {
      for (const auto& f : result_.files) ::unlink(f.host_path.c_str());
      if (!current_.host_path.empty()) ::unlink(current_.host_path.c_str());
    }
  }

  Status Begin(const std::string& payload) {
    proto::FileHeader h;
    if (!proto::Decode(payload, &h)) return Status::Error("malformed file header from init");
    if (file_.valid()) return Status::Error("file header inside a file from init");
    if (result_.files.size() >= limits_.max_files) return Status::Error("init exceeded max_files");
    // mkostemp creates with O_EXCL, so it never follows a planted symlink either.
    std::string path = limits_.dest_dir + "/collected-XXXXXX";
    int fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) return Status::Errno("creating a file in " + limits_.dest_dir, errno);
    file_.reset(fd);
    writer_.emplace(fd, path);  // zeros (a sparse file's holes) cost the host no disk
    current_ = {h.path, path, 0};
    return {};
  }

  Status Chunk(std::string_view data) {
    if (!file_.valid()) return Status::Error("file data outside a file from init");
    total_ += data.size();
    if (total_ > limits_.max_total_bytes) return Status::Error("init exceeded max_total_bytes");
    current_.size += data.size();
    return writer_->Write(data);
  }

  Status End() {
    if (!file_.valid()) return Status::Error("file end outside a file from init");
    Status s = writer_->Finish();
    writer_.reset();
    file_.reset();
    if (!s.ok()) return s;
    result_.files.push_back(std::move(current_));
    current_ = {};
    return {};
  }

  Collection Commit(bool truncated) {
    committed_ = true;
    result_.truncated = truncated;
    return std::move(result_);
  }

 private:
  const CollectLimits& limits_;
  Collection result_;
  CollectedFile current_;
  UniqueFd file_;
  std::optional<SparseWriter> writer_;  // on file_
  uint64_t total_ = 0;
  bool committed_ = false;
};

}  // namespace

asio::awaitable<Result<Collection>> CollectOnStrand(std::shared_ptr<SandboxCore> core,
                                                    CollectLimits limits) {
  if (core->killed) co_return DeadSandboxError(*core, "collect");
  if (core->frozen) co_return FrozenSandboxError("collect");
  if (core->state != SandboxCore::State::kReady && core->state != SandboxCore::State::kRan) {
    co_return Status::Error("collect: the sandbox is not available (running or destroyed)");
  }
  proto::CollectRequest req{limits.max_files, limits.max_total_bytes, limits.skip_path,
                            limits.modified_after_ns};
  const std::string encoded = proto::Encode(req);
  if (Status s = co_await WriteFrameAsync(core->service, Msg::kCollect, encoded); !s.ok()) {
    co_return s.Context("collect");
  }
  Receiver receiver(limits);
  for (;;) {
    Result<Frame> frame = co_await ReadFrameAsync(core->service);
    if (!frame.ok() || frame->eof) co_return DeadSandboxError(*core, "collect");
    Status s;
    switch (frame->type) {
      case Msg::kFileBegin:
        s = receiver.Begin(frame->payload);
        break;
      case Msg::kFileChunk:
        s = receiver.Chunk(frame->payload);
        break;
      case Msg::kFileEnd:
        s = receiver.End();
        break;
      case Msg::kCollectDone: {
        bool truncated = false;
        proto::DecodeCollectDone(frame->payload, &truncated);
        co_return receiver.Commit(truncated);
      }
      case Msg::kError: {
        std::string message;
        proto::DecodeError(frame->payload, &message);
        co_return Status::Error(message);
      }
      default:
        s = Status::Error(std::string("unexpected ") + proto::MsgName(frame->type));
    }
    // After a local failure the stream is out of step; the sandbox is not reusable anyway.
    if (!s.ok()) co_return s.Context("collect");
  }
}

}  // namespace ci::runtime
