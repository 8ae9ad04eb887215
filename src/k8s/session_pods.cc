#include "k8s/session_pods.h"

#include <cctype>
#include <cstdlib>

#include "core/json.h"
#include "k8s/pod_fields.h"
#include "k8s/pod_spec.h"

namespace ci::k8s {
namespace {

// A decimal number of unix seconds (UnixSecondsText); false when it is not one.
bool ParseUnixSeconds(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0' && out > 0;
}

// The session an object's metadata describes (a pod's or a claim's); false when it is none.
bool ReadSession(const rapidjson::Value* meta, double now_unix, SessionPod& s) {
  const rapidjson::Value* annotations = Member(meta, "annotations");
  if (Member(meta, "deletionTimestamp") != nullptr) return false;
  s.identity.id = Str(Member(meta, "labels"), kSessionLabel);
  s.token = Str(annotations, kSessionTokenAnnotation);
  s.identity.client = Str(annotations, kSessionClientAnnotation);
  if (s.name.empty() || !IsSessionLabelValue(s.identity.id) || s.token.empty()) return false;
  return ParseUnixSeconds(Str(annotations, kSessionCreatedAnnotation), s.identity.created_at) &&
         ParseUnixSeconds(Str(annotations, kSessionExpiresAnnotation), s.identity.expires_at) &&
         s.identity.expires_at > now_unix;
}

std::string SessionSelector(std::string_view id) {
  // labelSelector=app=code-interpreter,component=session[,code-interpreter.session=ID]
  std::string q = std::string("labelSelector=") + kAppLabel + "%3D" + kAppValue + "%2C" +
                  kComponentLabel + "%3Dsession";
  if (!id.empty()) {
    q += "%2C";
    q += kSessionLabel;
    q += "%3D";
    q += id;
  }
  return q;
}

boost::asio::awaitable<Result<rapidjson::Document>> GetList(ApiClient& api, std::string path,
                                                            std::string what) {
  auto listed = co_await api.Request("GET", path, "");
  if (!listed.ok()) co_return listed.status().Context(what);
  if (!listed->ok()) co_return ApiError(what, *listed);
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(listed->body, d, why)) co_return Status::Error(what + ": " + why);
  co_return d;
}

double NowUnix() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

}  // namespace

bool IsSessionLabelValue(std::string_view id) {
  if (id.empty() || id.size() > 63) return false;
  for (char c : id) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return id.front() != '-' && id.back() != '-';
}

std::string SessionPodsPath(std::string_view ns, std::string_view id) {
  return "/api/v1/namespaces/" + std::string(ns) + "/pods?" + SessionSelector(id);
}

std::vector<SessionPod> SessionPodsFrom(const rapidjson::Value& pod_list, double now_unix) {
  std::vector<SessionPod> out;
  for (const rapidjson::Value* pod : Items(&pod_list, "items")) {
    if (Str(Member(pod, "status"), "phase") != "Running") continue;
    const rapidjson::Value* meta = Member(pod, "metadata");
    SessionPod s;
    s.name = Str(meta, "name");
    if (ReadSession(meta, now_unix, s)) out.push_back(std::move(s));
  }
  return out;
}

boost::asio::awaitable<Result<std::vector<SessionPod>>> ListSessionPods(ApiClient& api,
                                                                        std::string_view ns,
                                                                        std::string_view id) {
  std::string path = SessionPodsPath(ns, id);
  std::string what = "listing session pods in namespace " + std::string(ns);
  auto d = co_await GetList(api, std::move(path), std::move(what));
  if (!d.ok()) co_return d.status();
  co_return SessionPodsFrom(*d, NowUnix());
}

std::string SessionClaimsPath(std::string_view ns, std::string_view id) {
  return "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/" + std::string(ns) +
         "/sandboxclaims?" + SessionSelector(id);
}

std::vector<SessionPod> SessionClaimsFrom(const rapidjson::Value& claim_list, double now_unix) {
  std::vector<SessionPod> out;
  for (const rapidjson::Value* claim : Items(&claim_list, "items")) {
    const rapidjson::Value* meta = Member(claim, "metadata");
    SessionPod s;
    s.name = Str(Member(Member(claim, "status"), "sandbox"), "name");
    s.claim = Str(meta, "name");
    if (!s.claim.empty() && ReadSession(meta, now_unix, s)) out.push_back(std::move(s));
  }
  return out;
}

boost::asio::awaitable<Result<std::vector<SessionPod>>> ListSessionClaims(ApiClient& api,
                                                                          std::string_view ns,
                                                                          std::string_view id) {
  std::string path = SessionClaimsPath(ns, id);
  std::string what = "listing session claims in namespace " + std::string(ns);
  auto d = co_await GetList(api, std::move(path), std::move(what));
  if (!d.ok()) co_return d.status();
  co_return SessionClaimsFrom(*d, NowUnix());
}

}  // namespace ci::k8s
