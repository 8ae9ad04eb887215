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
  // labelSelector=app=code-interpreter,component=session[,code-interpreter.session=ID]
  std::string path = "/api/v1/namespaces/" + std::string(ns) + "/pods?labelSelector=" + kAppLabel +
                     "%3D" + kAppValue + "%2C" + kComponentLabel + "%3Dsession";
  if (!id.empty()) {
    path += "%2C";
    path += kSessionLabel;
    path += "%3D";
    path += id;
  }
  return path;
}

std::vector<SessionPod> SessionPodsFrom(const rapidjson::Value& pod_list, double now_unix) {
  std::vector<SessionPod> out;
  for (const rapidjson::Value* pod : Items(&pod_list, "items")) {
    const rapidjson::Value* meta = Member(pod, "metadata");
    const rapidjson::Value* annotations = Member(meta, "annotations");
    if (Member(meta, "deletionTimestamp") != nullptr) continue;
    if (Str(Member(pod, "status"), "phase") != "Running") continue;
    SessionPod s;
    s.name = Str(meta, "name");
    s.identity.id = Str(Member(meta, "labels"), kSessionLabel);
    s.token = Str(annotations, kSessionTokenAnnotation);
    s.identity.client = Str(annotations, kSessionClientAnnotation);
    if (s.name.empty() || !IsSessionLabelValue(s.identity.id) || s.token.empty()) continue;
    if (!ParseUnixSeconds(Str(annotations, kSessionCreatedAnnotation), s.identity.created_at) ||
        !ParseUnixSeconds(Str(annotations, kSessionExpiresAnnotation), s.identity.expires_at) ||
        s.identity.expires_at <= now_unix) {
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

boost::asio::awaitable<Result<std::vector<SessionPod>>> ListSessionPods(ApiClient& api,
                                                                        std::string_view ns,
                                                                        std::string_view id) {
  const std::string path = SessionPodsPath(ns, id);
  auto listed = co_await api.Request("GET", path, "");
  if (!listed.ok()) co_return listed.status().Context("listing session pods");
  if (!listed->ok())
    co_return ApiError("listing session pods in namespace " + std::string(ns), *listed);
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(listed->body, d, why)) co_return Status::Error("listing session pods: " + why);
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  co_return SessionPodsFrom(d, static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9);
}

}  // namespace ci::k8s
