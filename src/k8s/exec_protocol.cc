#include "k8s/exec_protocol.h"

#include <cstdio>

#include "core/json.h"
#include "core/query_escape.h"

namespace ci::k8s {
namespace {

std::string_view StringMember(const rapidjson::Value& o, const char* key) {
  if (!o.IsObject() || !o.HasMember(key) || !o[key].IsString()) return {};
  return {o[key].GetString(), o[key].GetStringLength()};
}

// The ExitCode cause's message as 0..255, or nullopt.
std::optional<int> ExitCodeCause(const rapidjson::Value& status) {
  if (!status.HasMember("details") || !status["details"].IsObject()) return std::nullopt;
  const rapidjson::Value& details = status["details"];
  if (!details.HasMember("causes") || !details["causes"].IsArray()) return std::nullopt;
  for (const auto& cause : details["causes"].GetArray()) {
    if (StringMember(cause, "reason") != "ExitCode") continue;
    std::string_view m = StringMember(cause, "message");
    if (m.empty() || m.size() > 3) return std::nullopt;
    int code = 0;
    for (char c : m) {
      if (c < '0' || c > '9') return std::nullopt;
      code = code * 10 + (c - '0');
    }
    if (code > 255) return std::nullopt;
    return code;
  }
  return std::nullopt;
}

}  // namespace

std::string ExecRequestTarget(const ExecTarget& t) {
  std::string out = "/api/v1/namespaces/" + QueryEscape(t.namespace_) + "/pods/" +
                    QueryEscape(t.pod) + "/exec?container=" + QueryEscape(t.container);
  for (const std::string& arg : t.command) out.append("&command=").append(QueryEscape(arg));
  out.append(t.stdin ? "&stdin=true" : "&stdin=false");
  out.append("&stdout=true&stderr=true&tty=false");
  return out;
}

std::string AttachRequestTarget(std::string_view namespace_, std::string_view pod,
                                std::string_view container) {
  return "/api/v1/namespaces/" + QueryEscape(namespace_) + "/pods/" + QueryEscape(pod) +
         "/attach?container=" + QueryEscape(container) +
         "&stdin=true&stdout=true&stderr=true&tty=false";
}

std::string StdinMessage(std::string_view data) {
  std::string out(1, static_cast<char>(Channel::kStdin));
  out.append(data);
  return out;
}

std::string CloseStdinMessage() {
  return {static_cast<char>(kCloseSignal), static_cast<char>(Channel::kStdin)};
}

std::optional<ChannelMessage> ParseChannelMessage(std::string_view message) {
  if (message.empty()) return std::nullopt;
  return ChannelMessage{static_cast<uint8_t>(message[0]), message.substr(1)};
}

Result<int> ExitCodeFromStatus(std::string_view status_json) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(status_json, d, why) || !d.IsObject()) {
    return Status::Error("exec: the exit status on channel 3 is not a Status object: " + why);
  }
  std::string_view status = StringMember(d, "status");
  if (status == "Success") return 0;
  if (status == "Failure" && StringMember(d, "reason") == "NonZeroExitCode") {
    if (std::optional<int> code = ExitCodeCause(d)) return *code;
    return Status::Error("exec: NonZeroExitCode without a valid ExitCode cause");
  }
  std::string message(StringMember(d, "message"));
  return Status::Error("exec failed in the pod: " +
                       (message.empty() ? std::string(status_json) : message));
}

}  // namespace ci::k8s
