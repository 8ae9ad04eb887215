#include "k8s/access_review.h"

#include "core/json.h"
#include "k8s/pod_fields.h"

namespace ci::k8s {

std::string AccessReviewJson(std::string_view ns, std::string_view verb, std::string_view resource,
                             std::string_view subresource) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "apiVersion", "authorization.k8s.io/v1");
    WriteField(w, "kind", "SelfSubjectAccessReview");
    w.Key("spec");
    w.StartObject();
    w.Key("resourceAttributes");
    w.StartObject();
    WriteField(w, "namespace", ns);
    WriteField(w, "verb", verb);
    WriteField(w, "resource", resource);
    WriteField(w, "subresource", subresource);
    w.EndObject();
    w.EndObject();
    w.EndObject();
  });
}

Result<bool> ReadAccessReview(std::string_view body) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(body, d, why) || !d.IsObject()) {
    return Status::Error("the access review's answer: " + why);
  }
  if (Str(&d, "kind") != "SelfSubjectAccessReview") {
    return Status::Error("the access review's answer is a " + Str(&d, "kind") + ", not a review");
  }
  const rapidjson::Value* allowed = Member(Member(&d, "status"), "allowed");
  return allowed && allowed->IsBool() && allowed->GetBool();
}

boost::asio::awaitable<Result<PodStreamAccess>> ReviewPodStreams(ApiClient& api, std::string ns) {
  static constexpr std::string_view kPath =
      "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
  PodStreamAccess access;
  for (const char* subresource : {"exec", "attach"}) {
    std::string& refused =
        subresource == std::string_view("exec") ? access.exec_refused : access.attach_refused;
    for (const char* verb : {"get", "create"}) {
      const std::string body = AccessReviewJson(ns, verb, "pods", subresource);
      auto r = co_await api.Request("POST", kPath, body);
      if (!r.ok()) co_return r.status();
      if (!r->ok()) co_return ApiError("reviewing access to pods/" + std::string(subresource), *r);
      Result<bool> allowed = ReadAccessReview(r->body);
      if (!allowed.ok()) co_return allowed.status();
      if (*allowed) continue;
      refused += (refused.empty() ? "" : " or ") + std::string(verb) + " pods/" + subresource;
    }
  }
  co_return access;
}

}  // namespace ci::k8s
