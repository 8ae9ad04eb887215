#include "docker/image_watch.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <cstdio>

#include "agent/agent_wire.h"
#include "container/container_exec.h"
#include "core/json.h"
#include "core/query_escape.h"
#include "docker/engine_client.h"

namespace ci::docker {
namespace {

using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

std::string Seconds(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

const char* kBuildHint =
    "build it with packaging/executor-image/build.sh, or fix its registry or "
    "PYTHON_EXECUTOR_DOCKER_IMAGE";

}  // namespace

ImageName SplitImageRef(std::string_view ref) {
  ImageName n;
  if (size_t at = ref.find('@'); at != std::string_view::npos) {
    n.tag = std::string(ref.substr(at + 1));
    ref = ref.substr(0, at);
    size_t slash = ref.rfind('/');
    size_t colon = ref.rfind(':');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
      ref = ref.substr(0, colon);  // repo:tag@digest: the digest decides
    }
    n.repo = std::string(ref);
    return n;
  }
  size_t slash = ref.rfind('/');
  size_t colon = ref.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    n.repo = std::string(ref.substr(0, colon));
    n.tag = std::string(ref.substr(colon + 1));
  } else {
    n.repo = std::string(ref);
    n.tag = "latest";
  }
  return n;
}

std::string HumanBytes(uint64_t n) {
  char buf[32];
  if (n < 1000) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else if (n < 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f kB", static_cast<double>(n) / 1e3);
  } else if (n < 1000ull * 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(n) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(n) / 1e9);
  }
  return buf;
}

PullProgress::PullProgress(std::function<void(const std::string&)> log, Clock::duration every,
                           Clock::time_point start)
    : log_(std::move(log)), every_(every), last_line_(start) {}

void PullProgress::Feed(std::string_view line, Clock::time_point now) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return;
  rapidjson::Document doc;
  std::string why;
  if (!ParseJson(line, doc, why) || !doc.IsObject()) {
    spdlog::debug("image pull: unreadable progress line: {}", line.substr(0, 200));
    return;
  }
  auto str = [](const rapidjson::Value& v, const char* k) -> std::string {
    return v.IsObject() && v.HasMember(k) && v[k].IsString() ? v[k].GetString() : "";
  };
  auto num = [](const rapidjson::Value& v, const char* k) -> uint64_t {
    return v.IsObject() && v.HasMember(k) && v[k].IsUint64() ? v[k].GetUint64() : 0;
  };
  // errorDetail is the current field, error the deprecated one (API 1.48).
  std::string error;
  if (doc.HasMember("errorDetail")) error = str(doc["errorDetail"], "message");
  if (error.empty()) error = str(doc, "error");
  if (error.empty() && doc.HasMember("errorDetail")) error = "unknown error";
  if (!error.empty()) {
    if (!error_) error_ = error;
    return;
  }
  std::string status = str(doc, "status");
  std::string id = str(doc, "id");
  if (status.empty()) return;
  // "Pulling from <repo>" carries the tag (or the whole digested reference) as its id.
  if (id.empty() || status.rfind("Pulling from", 0) == 0) {
    log_(status);
    return;
  }
  Layer& l = layers_[id];
  bool transfer = status == "Downloading" || status == "Extracting";
  if (status == "Downloading" && doc.HasMember("progressDetail")) {
    const auto& d = doc["progressDetail"];
    l.current = num(d, "current");
    l.total = std::max(l.total, num(d, "total"));
  }
  if (status == "Download complete" || status == "Extracting" || status == "Pull complete" ||
      status == "Already exists") {
    l.current = l.total;
  }
  if (status == "Pull complete" || status == "Already exists") l.complete = true;
  if (status != l.status) {
    l.status = status;
    log_("layer " + id + ": " + status);
  }
  if (transfer && now - last_line_ >= every_) {
    last_line_ = now;
    log_(Summary());
  }
}

std::string PullProgress::Summary() const {
  if (layers_.empty()) return "";
  uint64_t done = 0, total = 0;
  size_t complete = 0;
  for (const auto& [id, l] : layers_) {
    done += l.current;
    total += l.total;
    if (l.complete) ++complete;
  }
  return HumanBytes(done) + " of " + HumanBytes(total) + " downloaded, " +
         std::to_string(complete) + " of " + std::to_string(layers_.size()) + " layers complete";
}

ImageWatch::ImageWatch(asio::any_io_executor ex, std::shared_ptr<EngineClient> client,
                       ImageWatchOptions o)
    : ex_(ex), client_(std::move(client)), o_(std::move(o)), wake_(ex) {}

asio::awaitable<Status> ImageWatch::Check() {
  if (o_.period.count() <= 0) {
    co_await Inspect();
    if (phase_ == Phase::kMissing) co_await Pull();
    co_return Describe();
  }
  if (!started_) {
    started_ = true;
    co_await Inspect();
    asio::co_spawn(ex_, Watch(), asio::detached);
  }
  co_return Describe();
}

asio::awaitable<void> ImageWatch::Known() {
  if (phase_ == Phase::kUnknown) co_await Inspect();
}

Status ImageWatch::Usable() const {
  // Without the progress: the same text for every execution refused during one pull.
  if (phase_ == Phase::kPulling) {
    return Status::Unavailable(
        "image", "Executor image " + o_.image +
                     " not available locally: pulling it (progress in /health and the log)");
  }
  if (phase_ == Phase::kMissing) return Status::Unavailable("image", Describe().message());
  return Status();
}

void ImageWatch::Vanished() {
  if (phase_ != Phase::kPresent) return;
  spdlog::warn(
      "executor image {} has disappeared (container create: no such image); checking it now",
      o_.image);
  phase_ = Phase::kUnknown;
  wake_.cancel();
}

Status ImageWatch::Describe() const {
  std::string head = "Executor image " + o_.image + " not available locally";
  switch (phase_) {
    case Phase::kPresent:
      return Status();
    case Phase::kPulling:
      return Status::Error(head + ": pulling it (" +
                           (progress_.empty() ? std::string("started") : progress_) + ", " +
                           Seconds(Clock::now() - pull_started_) + " so far)");
    case Phase::kMissing:
      if (pull_error_.empty()) return Status::Error(head + " (" + kBuildHint + ")");
      return Status::Error(head + ": the pull failed: " + pull_error_ + " (" + kBuildHint + "; " +
                           Again() + ")");
    case Phase::kUnknown:
      break;
  }
  if (!inspect_error_.empty()) return Status::Error(inspect_error_);
  return Status::Error("Executor image " + o_.image + ": not checked yet");
}

std::string ImageWatch::Again() const {
  if (o_.period.count() <= 0) return "checked again at the next health check";
  return "checked again every " + Seconds(o_.period);
}

asio::awaitable<void> ImageWatch::Watch() {
  auto self = shared_from_this();  // the loop outlives nothing it does not hold
  for (;;) {
    if (phase_ == Phase::kMissing) co_await Pull();
    wake_.expires_after(o_.period);
    boost::system::error_code ec;
    co_await wake_.async_wait(asio::redirect_error(use_awaitable, ec));
    co_await Inspect();
  }
}

std::string AgentPathOf(std::string_view image_inspect) {
  rapidjson::Document doc;
  if (!container::ParseObject(std::string(image_inspect), doc) || !doc.HasMember("Config") ||
      !doc["Config"].IsObject()) {
    return "";
  }
  const auto& config = doc["Config"];
  if (!config.HasMember("Labels") || !config["Labels"].IsObject()) return "";
  const auto& labels = config["Labels"];
  auto label = [&](const char* key) -> std::string {
    auto it = labels.FindMember(key);
    return it != labels.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
  };
  if (label(agent::kAgentWireLabel) != std::to_string(agent::kWireVersion)) return "";
  std::string path = label(agent::kAgentPathLabel);
  return path.starts_with("/") ? path : "";
}

asio::awaitable<void> ImageWatch::Inspect() {
  std::string path = "/images/" + o_.image + "/json";
  const uint64_t epoch = epoch_;
  auto r = co_await client_->Request("GET", path);
  // A pull started or ended while this was asked: its answer may predate the pull (a 404 that
  // would hide the pull from /health and start another one), and the pull's own inspect decides.
  if (epoch != epoch_) co_return;
  Phase before = phase_;
  if (!r.ok()) {
    inspect_error_ = "inspecting image " + o_.image + ": " + r.status().message();
  } else if (r->status == 404) {
    inspect_error_.clear();
    phase_ = Phase::kMissing;
    if (before != Phase::kMissing) {
      spdlog::warn("executor image {} is not available locally: pulling it", o_.image);
    }
  } else if (!r->ok()) {
    inspect_error_ = HttpError("inspecting image " + o_.image, *r).message();
  } else {
    inspect_error_.clear();
    phase_ = Phase::kPresent;
    agent_path_ = AgentPathOf(r->body);
    if (before == Phase::kMissing) {
      spdlog::info("executor image {} is available again", o_.image);
    }
  }
  if (!inspect_error_.empty()) spdlog::debug("{}", inspect_error_);
}

asio::awaitable<void> ImageWatch::Pull() {
  if (phase_ == Phase::kPulling) co_return;  // one pull at a time (health checks without a watch)
  ImageName name = SplitImageRef(o_.image);
  std::string path =
      "/images/create?fromImage=" + QueryEscape(name.repo) + "&tag=" + QueryEscape(name.tag);
  phase_ = Phase::kPulling;
  ++epoch_;
  progress_.clear();
  pull_started_ = Clock::now();
  spdlog::info("pulling executor image {}", o_.image);
  std::string image = o_.image;
  PullProgress progress([image](const std::string& m) { spdlog::info("pulling {}: {}", image, m); },
                        o_.progress_every, pull_started_);
  LineSink sink = [this, &progress](std::string_view line) {
    progress.Feed(line, Clock::now());
    progress_ = progress.Summary();
    return true;
  };
  auto r = co_await client_->StreamLines("POST", path, sink, o_.pull_timeout, o_.pull_idle_timeout);
  std::string failed;
  if (!r.ok()) {
    failed = r.status().message();
  } else if (!r->ok()) {
    failed = HttpError("docker POST /images/create", *r).message();
  } else if (progress.error()) {
    failed = *progress.error();
  }
  progress_.clear();
  ++epoch_;
  if (failed.empty()) {
    co_await Inspect();  // confirms it, and a 404 now is a failure too
    if (phase_ != Phase::kPresent) {
      failed = "the Engine reported success but the image is still not there";
    }
  }
  if (!failed.empty()) {
    bool repeated = failed == pull_error_;
    pull_error_ = failed;
    phase_ = Phase::kMissing;
    if (repeated) {
      spdlog::info("pulling executor image {} failed again: {}", o_.image, failed);
    } else {
      spdlog::error(
          "pulling executor image {} failed after {}: {}. Executions fail until it is "
          "there: {}; {}",
          o_.image, Seconds(Clock::now() - pull_started_), failed, kBuildHint, Again());
    }
    co_return;
  }
  pull_error_.clear();
  spdlog::info("pulled executor image {} in {}", o_.image, Seconds(Clock::now() - pull_started_));
}

}  // namespace ci::docker
