// The executor image (PYTHON_EXECUTOR_DOCKER_IMAGE): inspected at startup and pulled when missing
// (POST /images/create, its progress condensed into a few log lines), then re-inspected by a
// watchdog every `period` that pulls it again if it has disappeared. /health reads the state
// (present, missing, pulling, the last pull error); nothing here ever blocks an execution.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ci::docker {

namespace asio = boost::asio;

class EngineClient;

// "repo:tag" -> {"repo", "tag"}; "repo@sha256:x" and "repo:tag@sha256:x" -> {"repo", "sha256:x"}
// (the pull's fromImage and tag, as the docker CLI sends them); a registry port is not a tag.
struct ImageName {
  std::string repo;
  std::string tag;  // a tag or a digest
};
ImageName SplitImageRef(std::string_view normalized_ref);

// "12.3 MB" (decimal units, as docker prints them).
std::string HumanBytes(uint64_t n);

// The pull's JSON lines (wire-protocols.md A.1 CreateImageInfo) turned into a few log lines:
// general statuses ("Pulling from x", "Digest: ...", "Status: ..."), each layer's status
// changes ("Pulling fs layer", "Downloading", "Pull complete"), and at most one byte count line
// every `every` while layers download or extract. An errorDetail/error line is the failure.
class PullProgress {
 public:
  using Clock = std::chrono::steady_clock;
  PullProgress(std::function<void(const std::string&)> log, Clock::duration every,
               Clock::time_point start);
  void Feed(std::string_view line, Clock::time_point now);
  const std::optional<std::string>& error() const { return error_; }
  // "12.3 MB of 45.6 MB, 2 of 5 layers complete" (empty before any layer is known).
  std::string Summary() const;

 private:
  struct Layer {
    std::string status;
    uint64_t current = 0;
    uint64_t total = 0;
    bool complete = false;
  };
  std::function<void(const std::string&)> log_;
  Clock::duration every_;
  Clock::time_point last_line_;
  std::map<std::string, Layer> layers_;
  std::optional<std::string> error_;
};

struct ImageWatchOptions {
  std::string image;                        // normalised
  std::chrono::milliseconds period{60000};  // watchdog; 0: no watchdog, Check inspects itself
  std::chrono::milliseconds pull_timeout{30 * 60 * 1000};   // a whole pull
  std::chrono::milliseconds pull_idle_timeout{120 * 1000};  // no byte from the Engine for this
  std::chrono::milliseconds progress_every{5000};           // byte count log lines
};

// The agent's path from an image inspect's labels (ImageWatch::agent_path).
std::string AgentPathOf(std::string_view image_inspect);

class ImageWatch : public std::enable_shared_from_this<ImageWatch> {
 public:
  enum class Phase { kUnknown, kPresent, kMissing, kPulling };

  ImageWatch(asio::any_io_executor ex, std::shared_ptr<EngineClient> client, ImageWatchOptions o);

  // For /health. The first call inspects the image (awaited: the first answer is true) and
  // starts the watchdog, which pulls at once when it is missing. Without a watchdog (period 0)
  // every call inspects, and pulls (awaited) when the image is missing.
  asio::awaitable<Status> Check();
  // Inspects the image now unless it was inspected already: what it is (and its agent) is known
  // from then on, even before the watchdog's first look.
  asio::awaitable<void> Known();
  // Whether executions can use the image: an error (what is going on) while it is missing or
  // being pulled; ok when present or not known yet.
  Status Usable() const;
  // Container create answered "No such image" although the image was thought present: the
  // watchdog looks again now instead of at its next period.
  void Vanished();
  Phase phase() const { return phase_; }
  // Where the image's agent is (src/agent), as its labels say, when it speaks this daemon's
  // wire; empty otherwise (the image is driven by `docker exec`s). Known once inspected.
  const std::string& agent_path() const { return agent_path_; }

 private:
  asio::awaitable<void> Watch();
  asio::awaitable<void> Inspect();
  asio::awaitable<void> Pull();
  Status Describe() const;
  std::string Again() const;  // when the image is looked at next

  asio::any_io_executor ex_;
  std::shared_ptr<EngineClient> client_;
  ImageWatchOptions o_;
  Phase phase_ = Phase::kUnknown;
  std::string inspect_error_;  // the last inspect's transport/HTTP error
  std::string pull_error_;     // the last failed pull's reason
  std::string progress_;       // the running pull's summary
  std::string agent_path_;
  std::chrono::steady_clock::time_point pull_started_{};
  uint64_t epoch_ = 0;  // bumped at each pull's start and end: inspects asked across one are stale
  bool started_ = false;
  asio::steady_timer wake_;
};

}  // namespace ci::docker
