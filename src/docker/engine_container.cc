#include "docker/engine_container.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>

#include "container/container_exec.h"
#include "core/json.h"
#include "core/sleep.h"
#include "docker/stdcopy.h"

namespace ci::docker {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// An exec's hijacked stream, demultiplexed (stdcopy.h) into the reader's sink.
class EngineExec final : public container::ExecStream {
 public:
  EngineExec(std::shared_ptr<EngineClient> client, std::string exec_id,
             std::unique_ptr<RawStream> stream)
      : client_(std::move(client)),
        exec_id_(std::move(exec_id)),
        stream_(std::move(stream)),
        demux_([this](FrameDemuxer::Stream s, std::string_view bytes) {
          (*sink_)(s == FrameDemuxer::Stream::kStdout   ? container::ExecOutput::kStdout
                   : s == FrameDemuxer::Stream::kStderr ? container::ExecOutput::kStderr
                                                        : container::ExecOutput::kSystemError,
                   bytes);
        }) {}

  asio::awaitable<Result<bool>> Read(const container::ExecOutputSink& sink) override {
    buf_.resize(container::kReadChunk);
    boost::system::error_code ec;
    size_t n = co_await stream_->ReadSome(asio::buffer(buf_), ec);
    if (ec) co_return Status::Error("reading the exec stream: " + ec.message());
    if (n == 0) co_return false;
    sink_ = &sink;
    bool fed = demux_.Feed(std::string_view(buf_.data(), n));
    sink_ = nullptr;
    if (!fed) co_return Status::Error("malformed exec stream frame");
    co_return true;
  }

  asio::awaitable<Status> WriteAll(std::string_view data) override {
    co_return co_await stream_->WriteAll(data);
  }
  asio::awaitable<void> CloseStdin() override {
    stream_->ShutdownSend();
    co_return;
  }
  void Close() override { stream_->Close(); }

  // Exec inspect; the stream can end a moment before the Engine records the exit code.
  asio::awaitable<Result<std::optional<int>>> ExitCode() override {
    std::string path = "/exec/" + exec_id_ + "/json";
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto r = co_await client_->Request("GET", path);
      if (!r.ok()) co_return r.status();
      if (!r->ok()) co_return HttpError("docker exec inspect", *r);
      rapidjson::Document doc;
      if (!container::ParseObject(r->body, doc))
        co_return Status::Error("docker exec inspect: bad JSON");
      bool running =
          doc.HasMember("Running") && doc["Running"].IsBool() && doc["Running"].GetBool();
      if (!running && doc.HasMember("ExitCode") && doc["ExitCode"].IsInt()) {
        co_return std::optional<int>(doc["ExitCode"].GetInt());
      }
      co_await Sleep(10ms);
    }
    co_return std::optional<int>();
  }

 private:
  std::shared_ptr<EngineClient> client_;
  std::string exec_id_;
  std::unique_ptr<RawStream> stream_;
  FrameDemuxer demux_;
  const container::ExecOutputSink* sink_ = nullptr;  // the Read in progress's
  std::string buf_;
};

class EngineContainer final : public container::ContainerApi {
 public:
  EngineContainer(asio::any_io_executor ex, std::shared_ptr<EngineClient> client,
                  EngineContainerInfo info, std::shared_ptr<container::Removals> removals)
      : ex_(std::move(ex)),
        client_(std::move(client)),
        info_(std::move(info)),
        removals_(std::move(removals)) {}

  asio::awaitable<Result<std::shared_ptr<container::ExecStream>>> Exec(
      const std::vector<std::string>& cmd, container::ExecStdin stdin_use) override {
    std::string body =
        std::string("{\"AttachStdin\":") + (stdin_use.attach ? "true" : "false") +
        ",\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,"
        "\"Privileged\":false,\"Cmd\":" +
        container::StringArray(cmd) + ",\"Env\":" + container::StringArray(info_.env) +
        ",\"WorkingDir\":" + JsonQuote(info_.cwd) + ",\"User\":" + JsonQuote(info_.user) + "}";
    std::string path = "/containers/" + info_.id + "/exec";
    auto created = co_await client_->Request("POST", path, body);
    if (!created.ok()) co_return created.status();
    // 404: the container was removed; 409: it is not running. Either way it is gone.
    if (created->status == 404 || created->status == 409) {
      co_return Status::Gone(HttpError("docker exec create", *created).message());
    }
    if (created->status != 201) co_return HttpError("docker exec create", *created);
    rapidjson::Document doc;
    if (!container::ParseObject(created->body, doc) || !doc.HasMember("Id") ||
        !doc["Id"].IsString()) {
      co_return Status::Error("docker exec create: no Id in the answer");
    }
    std::string exec_id = doc["Id"].GetString();
    std::string start_path = "/exec/" + exec_id + "/start";
    std::string start_body = "{\"Detach\":false,\"Tty\":false}";
    auto stream = co_await client_->Hijack(start_path, start_body);
    if (!stream.ok()) co_return stream.status();
    co_return std::shared_ptr<container::ExecStream>(
        std::make_shared<EngineExec>(client_, std::move(exec_id), std::move(stream).value()));
  }

  asio::awaitable<bool> SetPidsHeadroom(int step) override {
    std::string path = "/containers/" + info_.id + "/update";
    std::string body =
        "{\"PidsLimit\":" + std::to_string(info_.pids_limit + 16u * static_cast<uint32_t>(step)) +
        "}";
    auto u = co_await client_->Request("POST", path, body);
    if (step > 0) co_await Sleep(20ms);
    co_return u.ok() && u->ok();
  }

  // A unix socket may still lead to an Engine elsewhere (a VM): the caller checks that the
  // cgroup of this pid names the container.
  asio::awaitable<pid_t> HostInitPid() override {
    if (!info_.host_cgroups || client_->endpoint().kind != Endpoint::Kind::kUnix) co_return 0;
    rapidjson::Document doc;
    if (!co_await Inspect(doc) || !doc["State"].HasMember("Pid") || !doc["State"]["Pid"].IsInt()) {
      co_return 0;
    }
    co_return std::max(0, doc["State"]["Pid"].GetInt());
  }

  // Docker flags OOMKilled only when PID 1 dies of it; the removal (~100 ms of the Engine's
  // time) runs after the answer.
  asio::awaitable<void> Remove(ResourceReport& report) override {
    rapidjson::Document doc;
    if (co_await Inspect(doc)) {
      const auto& state = doc["State"];
      report.oom_killed =
          report.oom_killed || (state.HasMember("OOMKilled") && state["OOMKilled"].IsBool() &&
                                state["OOMKilled"].GetBool());
    }
    ++removals_->in_flight;
    asio::co_spawn(ex_, RemoveContainer(client_, info_.id, removals_), asio::detached);
  }

  // The Engine refuses a second pause (409) and an unpause of what runs (500): what it says
  // the state is then decides.
  asio::awaitable<Status> Pause(bool paused) override {
    std::string path = "/containers/" + info_.id + (paused ? "/pause" : "/unpause");
    auto r = co_await client_->Request("POST", path);
    if (!r.ok()) co_return r.status();
    if (r->ok()) co_return Status();
    if (r->status == 404) co_return Status::Gone(HttpError("docker pause", *r).message());
    rapidjson::Document doc;
    if (co_await Inspect(doc) && doc["State"].HasMember("Paused") &&
        doc["State"]["Paused"].IsBool() && doc["State"]["Paused"].GetBool() == paused) {
      co_return Status();
    }
    co_return HttpError(paused ? "docker pause" : "docker unpause", *r);
  }

  void Kill() override {
    asio::co_spawn(
        ex_,
        [client = client_, id = info_.id]() -> asio::awaitable<void> {
          std::string method = "POST", path = "/containers/" + id + "/kill";
          auto r = co_await client->Request(method, path);
          (void)r;  // Remove follows either way
        },
        asio::detached);
  }

 private:
  // GET /containers/{id}/json into `doc`; true when it has a State object.
  asio::awaitable<bool> Inspect(rapidjson::Document& doc) {
    std::string path = "/containers/" + info_.id + "/json";
    auto r = co_await client_->Request("GET", path);
    co_return r.ok() && r->ok() && container::ParseObject(r->body, doc) && doc.HasMember("State") &&
        doc["State"].IsObject();
  }

  // Counted in `removals` by the caller.
  static asio::awaitable<void> RemoveContainer(std::shared_ptr<EngineClient> client, std::string id,
                                               std::shared_ptr<container::Removals> removals) {
    auto t0 = Clock::now();
    std::string del = "/containers/" + id + "?force=1&v=1";
    auto d = co_await client->Request("DELETE", del);
    --removals->in_flight;
    spdlog::debug("docker {}: removed in {} ms", id.substr(0, 12), (Clock::now() - t0) / 1ms);
    if (!d.ok()) {
      spdlog::error("removing container {}: {} (the reaper will retry)", id.substr(0, 12),
                    d.status().message());
    } else if (!d->ok() && d->status != 404) {
      spdlog::error("{} (the reaper will retry)",
                    HttpError("removing container " + id.substr(0, 12), *d).message());
    }
  }

  asio::any_io_executor ex_;
  std::shared_ptr<EngineClient> client_;
  EngineContainerInfo info_;
  std::shared_ptr<container::Removals> removals_;
};

}  // namespace

std::shared_ptr<container::ContainerApi> MakeEngineContainer(
    asio::any_io_executor ex, std::shared_ptr<EngineClient> client, EngineContainerInfo info,
    std::shared_ptr<container::Removals> removals) {
  return std::make_shared<EngineContainer>(std::move(ex), std::move(client), std::move(info),
                                           std::move(removals));
}

}  // namespace ci::docker
