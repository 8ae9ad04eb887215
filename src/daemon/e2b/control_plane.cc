#include "daemon/e2b/control_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "core/json.h"
#include "core/random.h"
#include "core/rfc3339.h"
#include "core/short_id.h"
#include "core/unix_time.h"
#include "daemon/auth/secrets_equal.h"
#include "daemon/e2b/control_requests.h"
#include "daemon/front/request_steps.h"
#include "daemon/front/routes.h"
#include "daemon/service/sandbox_egress.h"

namespace ci::daemon::e2b {
namespace {

// What the SDK checks a sandbox's envd against (its feature gates); this server's sandbox plane
// answers as envd of this version.
constexpr std::string_view kEnvdVersion = "0.5.7";
// Deprecated, required by the Python SDK: E2B sends this constant.
constexpr std::string_view kClientId = "6532622b";

HttpResponse NotFound(const std::string& id) {
  return ErrorBody(404, "sandbox '" + id + "' not found");
}

HttpResponse FromApiError(const ApiError& e) {
  HttpResponse r = ErrorBody(e.status, e.detail);
  if (e.status == 429 || e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

void WriteMap(JsonWriter& w, std::string_view key, const std::map<std::string, std::string>& m) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  w.StartObject();
  for (const auto& [k, v] : m) WriteField(w, k, v);
  w.EndObject();
}

bool MetadataMatches(const std::map<std::string, std::string>& want,
                     const std::map<std::string, std::string>& has) {
  return std::all_of(want.begin(), want.end(), [&](const auto& kv) {
    auto it = has.find(kv.first);
    return it != has.end() && it->second == kv.second;
  });
}

// A sandbox's E2B record as its session keeps it (SessionManager::Attach): what the session does
// not know itself. The token is the sandbox's own secret, kept with its snapshot.
std::string AttachmentOf(const ControlPlane::Sandbox& s) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "template_id", s.template_id);
    WriteMap(w, "metadata", s.metadata);
    WriteMap(w, "env_vars", s.env_vars);
    WriteField(w, "access_token", s.access_token);
    w.Key("started_at");
    w.Double(s.started_at);
    w.EndObject();
  });
}

bool ReadMap(const rapidjson::Value& o, const char* key, std::map<std::string, std::string>* m) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsObject()) return false;
  for (const auto& kv : it->value.GetObject()) {
    if (!kv.value.IsString()) return false;
    (*m)[kv.name.GetString()] = kv.value.GetString();
  }
  return true;
}

std::optional<ControlPlane::Sandbox> SandboxFrom(const std::string& text) {
  rapidjson::Document d;
  std::string why;
  if (text.empty() || !ParseJson(text, d, why) || !d.IsObject()) return std::nullopt;
  ControlPlane::Sandbox s;
  for (auto [key, to] :
       {std::pair{"template_id", &s.template_id}, std::pair{"access_token", &s.access_token}}) {
    auto it = d.FindMember(key);
    if (it == d.MemberEnd() || !it->value.IsString()) return std::nullopt;
    *to = it->value.GetString();
  }
  auto started = d.FindMember("started_at");
  if (started == d.MemberEnd() || !started->value.IsNumber()) return std::nullopt;
  s.started_at = started->value.GetDouble();
  if (!ReadMap(d, "metadata", &s.metadata) || !ReadMap(d, "env_vars", &s.env_vars)) {
    return std::nullopt;
  }
  return s;
}

// E2B's SnapshotInfo: its id and the names it is known by.
std::string SnapshotJson(const SnapshotRecord& r) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "snapshotID", r.id);
    w.Key("names");
    w.StartArray();
    if (!r.name.empty()) WriteString(w, r.name);
    w.EndArray();
    w.EndObject();
  });
}

}  // namespace

HttpResponse ErrorBody(int status, std::string_view message) {
  return JsonResponse(status, JsonText([&](JsonWriter& w) {
                        w.StartObject();
                        w.Key("code");
                        w.Int(status);
                        WriteField(w, "message", message);
                        w.EndObject();
                      }));
}

ControlPlane::ControlPlane(const ExecutionService& service, SessionManager& sessions,
                           const SandboxSpec& spec)
    : service_(service), sessions_(sessions), spec_(spec) {}

bool ControlPlane::Claims(std::string_view path) {
  for (std::string_view root : {"/sandboxes", "/v2/sandboxes", "/snapshots", "/templates"}) {
    if (path == root || (path.starts_with(root) && path[root.size()] == '/')) return true;
  }
  return false;
}

boost::asio::awaitable<const ControlPlane::Sandbox*> ControlPlane::Find(const std::string& id,
                                                                        const std::string& client) {
  Sandbox* recovered = co_await Recover(id);
  if (recovered == nullptr || recovered->client != client) co_return nullptr;
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return nullptr;
  const bool alive = co_await sessions_.Exists(id, client);
  // Looked up again: another request may have killed it meanwhile.
  it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return nullptr;
  if (!alive) {
    sandboxes_.erase(it);  // its session ended: at its timeout, or deleted through /v1/sessions
    co_return nullptr;
  }
  co_return &it->second;
}

boost::asio::awaitable<const ControlPlane::Sandbox*> ControlPlane::FindByToken(
    const std::string& id, std::string_view token) {
  Sandbox* s = co_await Recover(id);
  if (s == nullptr || !SecretsEqual(s->access_token, token)) co_return nullptr;
  const std::string client = s->client;
  co_return co_await Find(id, client);
}

boost::asio::awaitable<const ControlPlane::Sandbox*> ControlPlane::FindById(const std::string& id) {
  Sandbox* s = co_await Recover(id);
  if (s == nullptr) co_return nullptr;
  const std::string client = s->client;
  co_return co_await Find(id, client);
}

boost::asio::awaitable<void> ControlPlane::Handle(HttpExchange& ex, uint64_t max_body_mb) {
  const std::string& method = ex.head().method;
  const std::string& path = ex.head().path;
  std::string body;
  if (method == "POST" || method == "PUT") {
    std::optional<std::string> read = co_await ReadJsonBody(ex, max_body_mb, ErrorBody);
    if (!read) co_return;
    body = std::move(*read);
  }
  if (path == "/snapshots" || path.starts_with("/templates")) co_return co_await Snapshots(ex);
  if (path == "/sandboxes" || path == "/v2/sandboxes") {
    if (method == "POST") co_return co_await Create(ex, body);
    if (method == "GET") co_return co_await List(ex, path == "/v2/sandboxes");
    co_return co_await ex.Respond(ErrorBody(405, "use GET or POST on " + path));
  }
  struct Route {
    std::string_view method, pattern;
  };
  static constexpr Route kRoutes[] = {
      {"GET", "/sandboxes/{id}"},
      {"DELETE", "/sandboxes/{id}"},
      {"POST", "/sandboxes/{id}/timeout"},
      {"POST", "/sandboxes/{id}/connect"},
      {"POST", "/v2/sandboxes/{id}/connect"},
      {"POST", "/sandboxes/{id}/resume"},
      {"POST", "/sandboxes/{id}/pause"},
      {"PUT", "/sandboxes/{id}/network"},
      {"POST", "/sandboxes/{id}/fork"},
      {"POST", "/sandboxes/{id}/snapshots"},
      // E2B's, not this server's yet: 501 for a live sandbox, never the SDK's "not found".
      {"GET", "/sandboxes/{id}/metrics"},
  };
  const Route* route = nullptr;
  std::string id;
  for (const Route& r : kRoutes) {
    if (auto v = MatchPath(r.pattern, path); v && r.method == method) {
      route = &r;
      id = std::move(*v);
    }
  }
  if (route == nullptr) {
    co_return co_await ex.Respond(ErrorBody(404, method + " " + path + " is not part of the API"));
  }
  const Sandbox* found = co_await Find(id, ex.client);
  if (found == nullptr) co_return co_await ex.Respond(NotFound(id));
  const std::string_view pattern = route->pattern;
  if (pattern == "/sandboxes/{id}" && method == "GET") {
    const std::string state = sessions_.StateOf(id);  // paused by the idle sweep, maybe
    if (!state.empty()) sandboxes_[id].paused = state != "running";
    co_return co_await ex.Respond(JsonResponse(200, DetailJson(sandboxes_[id], false)));
  }
  if (pattern == "/sandboxes/{id}") {  // DELETE
    sandboxes_.erase(id);
    co_await sessions_.Delete(id, ex.client);
    spdlog::info("e2b sandbox {} killed", ShortId(id));
    co_return co_await ex.Respond(NoContent());
  }
  if (pattern.ends_with("/timeout")) co_return co_await SetTimeout(ex, id, body);
  if (pattern.ends_with("/network")) co_return co_await UpdateNetwork(ex, id, body);
  if (pattern.ends_with("/connect") || pattern.ends_with("/resume")) {
    co_return co_await Connect(ex, id, body);
  }
  if (pattern.ends_with("/pause")) co_return co_await Pause(ex, id, body);
  if (pattern.ends_with("/fork")) co_return co_await Fork(ex, id, body);
  if (pattern.ends_with("/snapshots")) co_return co_await Snapshot(ex, id, body);
  const std::string_view what = pattern.substr(pattern.rfind('/') + 1);
  co_await ex.Respond(ErrorBody(501, "sandboxes' " + std::string(what) + " (E2B's " + method + " " +
                                         std::string(pattern) +
                                         ") is not supported by this server yet"));
}

namespace {

// E2B's egress options as this server's policy (docs/egress.md "Sessions and E2B"): none without a
// proxy (the operator allows no network). E2B's deny-all (`0.0.0.0/0` in denyOut) or
// allow_internet_access false start from nothing, else from EGRESS_ALLOW; allowOut adds to it
// within EGRESS_ALLOW_MAX.
Result<std::optional<EgressPolicy>> E2bEgress(const NetworkOptions& o,
                                              const Result<EgressBounds>& bounds) {
  if (!bounds.ok()) return bounds.status();
  const std::vector<std::string> none;
  const std::vector<std::string>& allow = o.allow_out ? *o.allow_out : none;
  const std::vector<std::string>& deny = o.deny_out ? *o.deny_out : none;
  constexpr std::string_view kAllTraffic = "0.0.0.0/0";
  if (bounds->max.none()) {
    if (o.allow_internet_access.value_or(false) || !allow.empty()) {
      return Status::Error(
          "'allow_internet_access' and 'network.allowOut': sandboxes have no network on this "
          "server (EGRESS_ALLOW_MAX is unset)");
    }
    return std::optional<EgressPolicy>();
  }
  NetworkRequest request;
  request.allow_out = allow;
  for (const std::string& rule : deny) {
    if (rule != kAllTraffic) request.deny_out.push_back(rule);
  }
  auto policy = EgressFor(request, bounds->fallback, bounds->max);
  if (!policy.ok()) return policy.status();
  const bool deny_all = std::find(deny.begin(), deny.end(), kAllTraffic) != deny.end();
  if (o.allow_internet_access.value_or(true) && !deny_all) {
    const EgressPolicy& base = bounds->fallback;
    policy->allow.insert(policy->allow.end(), base.allow.begin(), base.allow.end());
    policy->deny.insert(policy->deny.end(), base.deny.begin(), base.deny.end());
  }
  return std::optional<EgressPolicy>(std::move(policy).value());
}

}  // namespace

boost::asio::awaitable<void> ControlPlane::UpdateNetwork(HttpExchange& ex, const std::string& id,
                                                         const std::string& body) {
  Result<NetworkOptions> request = ParseNetworkUpdate(body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorBody(400, request.status().message()));
  auto egress = E2bEgress(*request, service_.EgressBoundsOf(ex.client));
  if (!egress.ok()) co_return co_await ex.Respond(ErrorBody(400, egress.status().message()));
  if (!*egress) {
    co_return co_await ex.Respond(ErrorBody(409, "sandbox '" + id + "' has no network to change"));
  }
  const std::string now = (*egress)->ToString();
  auto refused = co_await sessions_.SetNetwork(id, ex.client, std::move(**egress));
  if (refused) co_return co_await ex.Respond(FromApiError(*refused));
  spdlog::info("e2b sandbox {}: network now {}", ShortId(id), now);
  co_await ex.Respond(NoContent());
}

boost::asio::awaitable<void> ControlPlane::Create(HttpExchange& ex, const std::string& body) {
  Result<NewSandbox> request = ParseNewSandbox(body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorBody(400, request.status().message()));
  auto egress = E2bEgress(request->network, service_.EgressBoundsOf(ex.client));
  if (!egress.ok()) co_return co_await ex.Respond(ErrorBody(400, egress.status().message()));
  const std::string token = RandomHex(16);
  if (token.empty()) co_return co_await ex.Respond(ErrorBody(500, "no randomness for a token"));
  // The session may live kMaxTimeoutSec; the sandbox's own timeout ends it sooner (MoveEnd).
  // A snapshot's id or name as the template: the sandbox starts from it (createSnapshot).
  std::optional<SnapshotRecord> from;
  if (std::find(std::begin(kTemplates), std::end(kTemplates), request->template_id) ==
      std::end(kTemplates)) {
    auto snapshot = sessions_.SnapshotFor(request->template_id, ex.client);
    if (!std::holds_alternative<SnapshotRecord>(snapshot)) {
      co_return co_await ex.Respond(
          ErrorBody(400, "template '" + request->template_id +
                             "' is not available here: this server runs 'base' and "
                             "'code-interpreter-v1', and the snapshots of your key"));
    }
    from = std::get<SnapshotRecord>(std::move(snapshot));
  }
  std::vector<StagedFile> no_files;  // named: GCC 12 and temporaries in co_await expressions
  auto created = co_await sessions_.Create(std::move(no_files), kMaxTimeoutSec, ex.client,
                                           std::move(*egress), std::move(from));
  if (auto* e = std::get_if<ApiError>(&created)) co_return co_await ex.Respond(FromApiError(*e));
  const SessionSummary& session = std::get<SessionSummary>(created);
  Sandbox s;
  s.id = session.id;
  s.template_id = request->template_id;
  s.client = ex.client;
  s.metadata = std::move(request->metadata);
  s.env_vars = std::move(request->env_vars);
  s.access_token = token;
  s.started_at = session.created_at;
  s.end_at = session.expires_at;
  const std::string id = s.id;
  sessions_.Attach(id, ex.client, AttachmentOf(s));
  sandboxes_[id] = std::move(s);
  if (auto refused = co_await MoveEnd(id, ex.client, UnixNow() + double(request->timeout_sec))) {
    sandboxes_.erase(id);
    co_await sessions_.Delete(id, ex.client);
    co_return co_await ex.Respond(std::move(*refused));
  }
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return co_await ex.Respond(NotFound(id));
  spdlog::info("e2b sandbox {} created (template {}, timeout {} s)", ShortId(id),
               it->second.template_id, request->timeout_sec);
  co_await ex.Respond(JsonResponse(201, SandboxJson(it->second)));
}

const ControlPlane::Sandbox* ControlPlane::AddSandbox(const SessionSummary& session,
                                                      const Sandbox& like) {
  Sandbox s = like;
  s.id = session.id;
  s.access_token = RandomHex(16);
  if (s.access_token.empty()) return nullptr;
  s.started_at = session.created_at;
  s.end_at = session.expires_at;
  s.paused = false;
  sessions_.Attach(s.id, s.client, AttachmentOf(s));
  return &(sandboxes_[s.id] = std::move(s));
}

boost::asio::awaitable<ControlPlane::Sandbox*> ControlPlane::Recover(const std::string& id) {
  if (auto it = sandboxes_.find(id); it != sandboxes_.end()) co_return &it->second;
  auto attached = co_await sessions_.AttachmentOf(id);
  if (auto it = sandboxes_.find(id); it != sandboxes_.end()) co_return &it->second;  // meanwhile
  if (!attached) co_return nullptr;
  std::optional<Sandbox> s = SandboxFrom(attached->attachment);
  if (!s) co_return nullptr;
  s->id = id;
  s->client = attached->client;
  s->end_at = attached->summary.expires_at;
  s->paused = attached->summary.state != "running";
  spdlog::info("e2b sandbox {} found with its session (paused before a restart)", ShortId(id));
  co_return &(sandboxes_[id] = std::move(*s));
}

boost::asio::awaitable<void> ControlPlane::Pause(HttpExchange& ex, const std::string& id,
                                                 const std::string& body) {
  auto parsed = ParseJsonObject(body.empty() ? "{}" : body, "the body");
  if (!parsed.ok()) co_return co_await ex.Respond(ErrorBody(400, parsed.status().message()));
  bool memory = true;
  if (auto m = parsed->FindMember("memory"); m != parsed->MemberEnd() && !m->value.IsNull()) {
    if (!m->value.IsBool()) co_return co_await ex.Respond(ErrorBody(400, "'memory' is a bool"));
    memory = m->value.GetBool();
  }
  auto paused = co_await sessions_.Pause(id, ex.client, memory);
  if (auto* e = std::get_if<ApiError>(&paused)) co_return co_await ex.Respond(FromApiError(*e));
  auto it = sandboxes_.find(id);
  if (it != sandboxes_.end()) it->second.paused = true;
  spdlog::info("e2b sandbox {} paused ({})", ShortId(id), std::get<PauseOutcome>(paused).state);
  co_await ex.Respond(NoContent());
}

boost::asio::awaitable<void> ControlPlane::Fork(HttpExchange& ex, const std::string& id,
                                                const std::string& body) {
  auto parsed = ParseJsonObject(body.empty() ? "{}" : body, "the body");
  if (!parsed.ok()) co_return co_await ex.Respond(ErrorBody(400, parsed.status().message()));
  int64_t count = 1;
  if (auto c = parsed->FindMember("count"); c != parsed->MemberEnd() && !c->value.IsNull()) {
    if (!c->value.IsInt64() || c->value.GetInt64() < 1 || c->value.GetInt64() > 16) {
      co_return co_await ex.Respond(ErrorBody(400, "'count' must be from 1 to 16"));
    }
    count = c->value.GetInt64();
  }
  auto timeout = ParseTimeout(body.empty() ? "{}" : body, false);
  if (!timeout.ok()) co_return co_await ex.Respond(ErrorBody(400, timeout.status().message()));
  auto forks = co_await sessions_.Fork(id, ex.client, static_cast<uint32_t>(count), kMaxTimeoutSec);
  if (auto* e = std::get_if<ApiError>(&forks)) co_return co_await ex.Respond(FromApiError(*e));
  auto source = sandboxes_.find(id);
  if (source == sandboxes_.end()) co_return co_await ex.Respond(NotFound(id));
  const Sandbox like = source->second;
  std::vector<std::string> answers;
  for (const auto& f : std::get<0>(forks)) {
    const ApiError* failed = std::get_if<ApiError>(&f);
    const Sandbox* made = nullptr;
    if (failed == nullptr) {
      const SessionSummary& session = std::get<SessionSummary>(f);
      made = AddSandbox(session, like);
      const double end = UnixNow() + double(timeout->value_or(kDefaultTimeoutSec));
      std::optional<HttpResponse> refused;
      if (made != nullptr) refused = co_await MoveEnd(session.id, ex.client, end);
      if (refused) made = nullptr;
    }
    const std::string sandbox = made != nullptr ? SandboxJson(*made) : "";
    answers.push_back(JsonText([&](JsonWriter& w) {
      w.StartObject();
      if (made != nullptr) {
        w.Key("sandbox");
        w.RawValue(sandbox.c_str(), sandbox.size(), rapidjson::kObjectType);
      } else {
        w.Key("error");
        w.StartObject();
        w.Key("code");
        w.Int(failed ? failed->status : 500);
        WriteField(w, "message", failed ? failed->detail : "the fork could not be set up");
        w.EndObject();
      }
      w.EndObject();
    }));
  }
  std::string out = "[";
  for (size_t i = 0; i < answers.size(); ++i) out += (i ? "," : "") + answers[i];
  co_await ex.Respond(JsonResponse(200, out + "]"));
}

boost::asio::awaitable<void> ControlPlane::Snapshot(HttpExchange& ex, const std::string& id,
                                                    const std::string& body) {
  auto parsed = ParseJsonObject(body.empty() ? "{}" : body, "the body");
  if (!parsed.ok()) co_return co_await ex.Respond(ErrorBody(400, parsed.status().message()));
  std::string name;
  if (auto n = parsed->FindMember("name"); n != parsed->MemberEnd() && !n->value.IsNull()) {
    if (!n->value.IsString() || n->value.GetStringLength() > 128) {
      co_return co_await ex.Respond(ErrorBody(400, "'name' is a string of at most 128 bytes"));
    }
    name.assign(n->value.GetString(), n->value.GetStringLength());
  }
  auto taken = co_await sessions_.TakeSnapshot(id, ex.client, name);
  if (auto* e = std::get_if<ApiError>(&taken)) co_return co_await ex.Respond(FromApiError(*e));
  co_await ex.Respond(JsonResponse(201, SnapshotJson(std::get<SnapshotRecord>(taken))));
}

boost::asio::awaitable<void> ControlPlane::Snapshots(HttpExchange& ex) {
  const std::string& path = ex.head().path;
  if (ex.head().method == "GET" && path == "/snapshots") {
    const std::string sandbox = QueryParameter(ex.head().target, "sandboxID").value_or("");
    const std::string name = QueryParameter(ex.head().target, "name").value_or("");
    std::string out = "[";
    for (const SnapshotRecord& r : sessions_.Snapshots(ex.client)) {
      if ((!sandbox.empty() && r.session != sandbox) || (!name.empty() && r.name != name)) continue;
      out += (out.size() > 1 ? "," : "") + SnapshotJson(r);
    }
    co_return co_await ex.Respond(JsonResponse(200, out + "]"));
  }
  if (auto id = MatchPath("/templates/{id}", path); id && ex.head().method == "DELETE") {
    if (!sessions_.DeleteSnapshot(*id, ex.client)) {
      co_return co_await ex.Respond(ErrorBody(404, "snapshot '" + *id + "' not found"));
    }
    co_return co_await ex.Respond(NoContent());
  }
  co_await ex.Respond(ErrorBody(404, ex.head().method + " " + path + " is not part of the API"));
}

boost::asio::awaitable<std::optional<HttpResponse>> ControlPlane::MoveEnd(const std::string& id,
                                                                          const std::string& client,
                                                                          double end_at) {
  auto moved = co_await sessions_.SetExpiry(id, client, end_at);
  auto it = sandboxes_.find(id);  // again: another request may have killed it meanwhile
  if (it == sandboxes_.end()) co_return NotFound(id);
  if (auto* e = std::get_if<ApiError>(&moved)) {
    if (e->status == 409) {
      co_return ErrorBody(
          400, "a sandbox lives at most " + std::to_string(kMaxTimeoutSec) +
                   " s from its creation; sandbox '" + id + "' ends at " +
                   Rfc3339(static_cast<int64_t>(it->second.started_at) + kMaxTimeoutSec) +
                   " at the latest");
    }
    co_return FromApiError(*e);
  }
  it->second.end_at = end_at;
  co_return std::nullopt;
}

boost::asio::awaitable<void> ControlPlane::Connect(HttpExchange& ex, const std::string& id,
                                                   const std::string& body) {
  auto timeout = ParseTimeout(body, false);
  if (!timeout.ok()) co_return co_await ex.Respond(ErrorBody(400, timeout.status().message()));
  auto resumed = co_await sessions_.Resume(id, ex.client);
  if (auto* e = std::get_if<ApiError>(&resumed)) co_return co_await ex.Respond(FromApiError(*e));
  const bool was_running = std::get<ResumeOutcome>(resumed).was_running;
  // 2.0's /resume: a running sandbox is a conflict.
  if (was_running && ex.head().path.ends_with("/resume")) {
    co_return co_await ex.Respond(ErrorBody(409, "sandbox '" + id + "' is already running"));
  }
  auto found = sandboxes_.find(id);
  if (found == sandboxes_.end()) co_return co_await ex.Respond(NotFound(id));
  found->second.paused = false;
  if (!was_running) {
    for (const std::string& l : std::get<ResumeOutcome>(resumed).lost) {
      spdlog::info("e2b sandbox {} resumed without {}", ShortId(id), l);
    }
  }
  // Connecting only extends the sandbox's life (E2B's rule), up to its longest.
  const double latest = found->second.started_at + double(kMaxTimeoutSec);
  const double wanted = UnixNow() + double(timeout->value_or(kDefaultTimeoutSec));
  if (wanted > found->second.end_at) {
    if (auto refused = co_await MoveEnd(id, ex.client, std::min(wanted, latest))) {
      co_return co_await ex.Respond(std::move(*refused));
    }
  }
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return co_await ex.Respond(NotFound(id));
  const int status = was_running ? 200 : 201;
  co_await ex.Respond(JsonResponse(status, SandboxJson(it->second)));
}

boost::asio::awaitable<void> ControlPlane::SetTimeout(HttpExchange& ex, const std::string& id,
                                                      const std::string& body) {
  auto timeout = ParseTimeout(body, true);
  if (!timeout.ok()) co_return co_await ex.Respond(ErrorBody(400, timeout.status().message()));
  if (auto refused = co_await MoveEnd(id, ex.client, UnixNow() + double(**timeout))) {
    co_return co_await ex.Respond(std::move(*refused));
  }
  co_await ex.Respond(NoContent());
}

boost::asio::awaitable<void> ControlPlane::List(HttpExchange& ex, bool paged) {
  Result<ListQuery> query = ParseListQuery(ex.head().target);
  if (!query.ok()) co_return co_await ex.Respond(ErrorBody(400, query.status().message()));
  std::vector<SessionSummary> live = co_await sessions_.List(ex.client);
  std::vector<const Sandbox*> mine;
  for (const SessionSummary& l : live) {
    Sandbox* s = co_await Recover(l.id);
    if (s != nullptr) s->paused = l.state != "running";
  }
  std::erase_if(sandboxes_, [&](const auto& entry) {
    const Sandbox& s = entry.second;
    if (s.client != ex.client) return false;
    const bool alive = std::any_of(live.begin(), live.end(),
                                   [&](const SessionSummary& l) { return l.id == s.id; });
    if (!alive) return true;
    const bool wanted = s.paused ? query->paused : query->running;
    if (wanted && MetadataMatches(query->metadata, s.metadata)) mine.push_back(&s);
    return false;
  });
  std::sort(mine.begin(), mine.end(), [](const Sandbox* a, const Sandbox* b) {
    return std::tie(a->started_at, a->id) < std::tie(b->started_at, b->id);
  });
  size_t from = 0;
  if (!query->next_token.empty()) {
    auto it = std::find_if(mine.begin(), mine.end(),
                           [&](const Sandbox* s) { return s->id == query->next_token; });
    if (it == mine.end()) {
      co_return co_await ex.Respond(
          ErrorBody(400, "'nextToken' names no sandbox of this listing any more"));
    }
    from = static_cast<size_t>(it - mine.begin()) + 1;
  }
  const size_t to = paged ? std::min(mine.size(), from + query->limit) : mine.size();
  std::string json = "[";
  for (size_t i = from; i < to; ++i) {
    if (i > from) json += ",";
    json += DetailJson(*mine[i], true);
  }
  json += "]";
  HttpResponse r = JsonResponse(200, std::move(json));
  if (to < mine.size()) r.headers.emplace_back("X-Next-Token", mine[to - 1]->id);
  r.headers.emplace_back("X-Total-Running", std::to_string(mine.size()));
  co_await ex.Respond(std::move(r));
}

std::string ControlPlane::SandboxJson(const Sandbox& s) const {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "sandboxID", s.id);
    WriteField(w, "templateID", s.template_id);
    WriteField(w, "clientID", kClientId);
    WriteField(w, "envdVersion", kEnvdVersion);
    WriteField(w, "envdAccessToken", s.access_token);
    WriteField(w, "trafficAccessToken", s.access_token);
    w.Key("domain");
    w.Null();
    w.EndObject();
  });
}

std::string ControlPlane::DetailJson(const Sandbox& s, bool listed) const {
  const unsigned cores = spec_.limits.cpu_percent > 0
                             ? (spec_.limits.cpu_percent + 99) / 100
                             : std::max(1u, std::thread::hardware_concurrency());
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "sandboxID", s.id);
    WriteField(w, "templateID", s.template_id);
    WriteField(w, "clientID", kClientId);
    WriteField(w, "startedAt", Rfc3339(static_cast<int64_t>(s.started_at)));
    WriteField(w, "endAt", Rfc3339(static_cast<int64_t>(std::ceil(s.end_at))));
    w.Key("cpuCount");
    w.Uint(cores);
    w.Key("memoryMB");
    w.Uint64(spec_.limits.memory_bytes >> 20);
    w.Key("diskSizeMB");
    w.Uint64(spec_.limits.workspace_bytes >> 20);
    WriteField(w, "state", s.paused ? "paused" : "running");
    WriteField(w, "envdVersion", kEnvdVersion);
    WriteMap(w, "metadata", s.metadata);
    if (!listed) {
      WriteField(w, "envdAccessToken", s.access_token);
      w.Key("domain");
      w.Null();
      w.Key("allowInternetAccess");
      w.Bool(false);
    }
    w.EndObject();
  });
}

}  // namespace ci::daemon::e2b
