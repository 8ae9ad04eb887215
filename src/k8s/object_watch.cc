#include "k8s/object_watch.h"

#include <algorithm>

#include "core/json.h"
#include "k8s/pod_fields.h"

namespace ci::k8s {
namespace {

namespace asio = boost::asio;
using rapidjson::Value;
using Clock = std::chrono::steady_clock;

// The Status object of a watch ERROR event as an error (its message and code).
Status WatchError(const WatchedObject& o, const Value* status) {
  std::string out = "watching " + o.noun + " " + o.name + ": " + Str(status, "message");
  const Value* code = Member(status, "code");
  if (code != nullptr && code->IsInt())
    out.append(" (HTTP ").append(std::to_string(code->GetInt())).append(")");
  return Status::Error(out);
}

bool IsExpired(const Value* status) {
  const Value* code = Member(status, "code");
  return (code != nullptr && code->IsInt() && code->GetInt() == 410) ||
         Str(status, "reason") == "Expired" || Str(status, "reason") == "Gone";
}

struct Fresh {
  ObjectVerdict verdict;
  std::string resource_version;
};

// One GET of the object: its verdict and resourceVersion (a watch's restart point).
asio::awaitable<Result<Fresh>> GetFresh(ApiClient& api, const WatchedObject& o,
                                        const JudgeObject& judge) {
  const std::string path = o.collection + "/" + o.name;
  const std::string what = "reading " + o.noun + " " + o.name;
  auto got = co_await api.Request("GET", path, "");
  if (!got.ok()) co_return got.status().Context(what);
  Fresh f;
  if (got->status == 404) {
    f.verdict.decided = o.gone;
    co_return f;
  }
  if (!got->ok()) co_return ApiError(what, *got);
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(got->body, d, why)) co_return Status::Error(o.noun + " " + o.name + ": " + why);
  f.verdict = judge(d);
  f.resource_version = ResourceVersionOf(d);
  co_return f;
}

}  // namespace

std::string ObjectWatchPath(const std::string& collection, const std::string& name,
                            const std::string& resource_version, int64_t timeout_sec) {
  return collection + "?watch=1&fieldSelector=metadata.name%3D" + name +
         "&resourceVersion=" + resource_version + "&timeoutSeconds=" + std::to_string(timeout_sec);
}

int64_t CeilSeconds(Clock::duration d) {
  auto s = std::chrono::ceil<std::chrono::seconds>(d).count();
  return std::max<int64_t>(s, 1);
}

asio::awaitable<Status> WatchUntil(ApiClient& api, WatchedObject o, std::string rv,
                                   std::chrono::milliseconds timeout, JudgeObject judge) {
  const auto deadline = Clock::now() + timeout;
  std::string last = "no state seen yet";
  auto timed_out = [&] {
    return Status::Unavailable(o.timeout_reason,
                               o.noun + " " + o.name + " not " + o.goal + " after " +
                                   std::to_string((timeout.count() + 999) / 1000) + " s: " + last);
  };
  int empty_watches = 0;  // watches in a row the server ended at once, without an event
  for (;;) {
    if (rv.empty()) {  // no start point, or it expired (410): the object as it is now
      auto fresh = co_await GetFresh(api, o, judge);
      if (!fresh.ok()) co_return fresh.status();
      if (fresh->verdict.decided) co_return *fresh->verdict.decided;
      last = fresh->verdict.state;
      rv = fresh->resource_version;
    }
    const auto remaining = deadline - Clock::now();
    if (remaining <= Clock::duration::zero()) co_return timed_out();
    const std::string path = ObjectWatchPath(o.collection, o.name, rv, CeilSeconds(remaining));
    const auto read_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(remaining) + std::chrono::seconds(5);
    auto watch = co_await api.Watch(path, read_timeout);
    if (!watch.ok()) {
      // Some servers refuse an expired resourceVersion up front (410) instead of in an event.
      if (watch.status().message().find("(HTTP 410") != std::string::npos) {
        rv.clear();
        continue;
      }
      co_return watch.status();
    }
    LineStream& events = **watch;
    const auto watch_started = Clock::now();
    bool any_event = false;
    for (;;) {
      auto line = co_await events.Next();
      if (!line.ok()) {
        if (Clock::now() >= deadline) co_return timed_out();
        co_return line.status();
      }
      if (!line->has_value()) break;  // the server ended the watch (its timeoutSeconds)
      any_event = true;
      rapidjson::Document ev;
      std::string why;
      if (!ParseJson(**line, ev, why) || !ev.IsObject()) {
        co_return Status::Error("watching " + o.noun + " " + o.name +
                                ": an event that is not JSON: " + why);
      }
      const std::string type = Str(&ev, "type");
      const Value* object = Member(&ev, "object");
      if (type == "ERROR") {
        if (!IsExpired(object)) co_return WatchError(o, object);
        rv.clear();  // compacted: resume from a fresh GET
        break;
      }
      if (type == "DELETED") co_return o.gone;
      if (object == nullptr || !object->IsObject()) continue;
      const std::string object_rv = ResourceVersionOf(*object);
      if (!object_rv.empty()) rv = object_rv;
      if (type == "BOOKMARK" || Str(Member(object, "metadata"), "name") != o.name) continue;
      ObjectVerdict verdict = judge(*object);
      if (verdict.decided) co_return *verdict.decided;
      last = std::move(verdict.state);
    }
    events.Close();
    if (Clock::now() >= deadline) co_return timed_out();
    // Restarted from the last event (or a GET); a server that keeps ending watches at once would
    // otherwise be asked again and again until the deadline.
    const bool at_once = !any_event && Clock::now() - watch_started < std::chrono::seconds(1);
    empty_watches = at_once ? empty_watches + 1 : 0;
    if (empty_watches >= 3) {
      co_return Status::Error("watching " + o.noun + " " + o.name +
                              ": the API server ends the watch at once, three times; last "
                              "state: " +
                              last);
    }
  }
}

}  // namespace ci::k8s
