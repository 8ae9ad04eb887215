#include "daemon/e2b/process_requests.h"

#include <rapidjson/document.h>

#include <cctype>
#include <csignal>
#include <cstdint>

#include "core/base64.h"
#include "core/json.h"
#include "daemon/e2b/connect_rpc.h"
#include "daemon/e2b/proto_json.h"

namespace ci::daemon::e2b {
namespace {

using Value = rapidjson::Value;

Result<ProcessSelector> Selector(const Value& doc) {
  const Value* p = Member(doc, "process");
  if (p == nullptr || !p->IsObject()) {
    return Status::Error("process (the selector: {\"pid\": N} or {\"tag\": \"...\"}) is missing");
  }
  ProcessSelector out;
  if (const Value* pid = Member(*p, "pid")) {
    auto n = Uint32Field(*pid, "process.pid");
    if (!n.ok()) return n.status();
    out.pid = *n;
    return out;
  }
  if (Status s = StringField(*p, "tag", "process", &out.tag); !s.ok()) return s;
  if (out.tag.empty()) return Status::Error("process names neither a pid nor a tag");
  return out;
}

}  // namespace

Result<StartRequest> ParseStartRequest(std::string_view json) {
  auto parsed = ParseJsonObject(json, "the message");
  if (!parsed.ok()) return parsed.status();
  const rapidjson::Document& doc = *parsed;
  StartRequest out;
  const Value* p = Member(doc, "process");
  if (p == nullptr || !p->IsObject()) return Status::Error("process (its config) is missing");
  if (Status s = StringField(*p, "cmd", "process", &out.config.cmd); !s.ok()) return s;
  if (out.config.cmd.empty()) return Status::Error("process.cmd is missing");
  if (const Value* args = Member(*p, "args")) {
    if (!args->IsArray()) return Status::Error("process.args must be a list of strings");
    for (const Value& a : args->GetArray()) {
      if (!a.IsString()) return Status::Error("process.args must be a list of strings");
      out.config.args.emplace_back(a.GetString(), a.GetStringLength());
    }
  }
  if (const Value* envs = Member(*p, "envs")) {
    if (!envs->IsObject()) return Status::Error("process.envs must be an object of strings");
    for (const auto& m : envs->GetObject()) {
      if (!m.value.IsString()) return Status::Error("process.envs must be an object of strings");
      std::string key(m.name.GetString(), m.name.GetStringLength());
      if (key.empty() || key.find('=') != std::string::npos ||
          key.find('\0') != std::string::npos) {
        return Status::Error("process.envs has a key that cannot name a variable: '" + key + "'");
      }
      out.config.envs[key] = std::string(m.value.GetString(), m.value.GetStringLength());
    }
  }
  if (const Value* cwd = Member(*p, "cwd")) {
    if (!cwd->IsString()) return Status::Error("process.cwd must be a string");
    out.config.cwd = std::string(cwd->GetString(), cwd->GetStringLength());
  }
  if (const Value* tag = Member(doc, "tag")) {
    if (!tag->IsString()) return Status::Error("tag must be a string");
    out.tag = std::string(tag->GetString(), tag->GetStringLength());
  }
  if (const Value* in = Member(doc, "stdin")) {
    if (!in->IsBool()) return Status::Error("stdin must be true or false");
    out.stdin = in->GetBool();
  }
  out.pty = Member(doc, "pty") != nullptr;
  return out;
}

Status CheckListRequest(std::string_view json) {
  return ParseJsonObject(json, "the message").status();
}

Result<ProcessSelector> ParseSelectorRequest(std::string_view json) {
  auto parsed = ParseJsonObject(json, "the message");
  if (!parsed.ok()) return parsed.status();
  return Selector(*parsed);
}

Result<InputRequest> ParseInputRequest(std::string_view json) {
  auto parsed = ParseJsonObject(json, "the message");
  if (!parsed.ok()) return parsed.status();
  InputRequest out;
  auto which = Selector(*parsed);
  if (!which.ok()) return which.status();
  out.which = *which;
  const Value* input = Member(*parsed, "input");
  if (input == nullptr || !input->IsObject()) return Status::Error("input is missing");
  const Value* data = Member(*input, "stdin");
  if (data == nullptr) {
    data = Member(*input, "pty");
    out.pty = data != nullptr;
  }
  const std::string field = out.pty ? "input.pty" : "input.stdin";
  if (data == nullptr || !data->IsString()) {
    return Status::Error(field + " must be the bytes to write, in base64");
  }
  auto bytes = DecodeProtoBytes(std::string_view(data->GetString(), data->GetStringLength()));
  if (!bytes) return Status::Error(field + " is not base64");
  out.bytes = std::move(*bytes);
  return out;
}

Result<SignalRequest> ParseSignalRequest(std::string_view json) {
  auto parsed = ParseJsonObject(json, "the message");
  if (!parsed.ok()) return parsed.status();
  SignalRequest out;
  auto which = Selector(*parsed);
  if (!which.ok()) return which.status();
  out.which = *which;
  const Value* sig = Member(*parsed, "signal");
  if (sig != nullptr && sig->IsString()) {
    const std::string_view name(sig->GetString(), sig->GetStringLength());
    if (name == "SIGNAL_SIGTERM") out.signal = SIGTERM;
    if (name == "SIGNAL_SIGKILL") out.signal = SIGKILL;
  } else if (sig != nullptr && sig->IsInt() &&
             (sig->GetInt() == SIGTERM || sig->GetInt() == SIGKILL)) {
    out.signal = sig->GetInt();
  }
  if (out.signal == 0) {
    return Status::Error("signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL (15 or 9)");
  }
  return out;
}

Result<std::optional<std::string>> BasicAuthUser(std::optional<std::string_view> header) {
  if (!header) return std::optional<std::string>();
  std::string_view h = *header;
  const size_t space = h.find(' ');
  std::string scheme(h.substr(0, space));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (space == std::string_view::npos || scheme != "basic") {
    return Status::Error("Authorization must be Basic base64(user:)");
  }
  auto decoded = Base64Decode(h.substr(space + 1));
  if (!decoded) return Status::Error("Authorization's credentials are not base64");
  return std::optional<std::string>(decoded->substr(0, decoded->find(':')));
}

std::optional<RpcError> RefusedUser(std::optional<std::string_view> header) {
  auto user = BasicAuthUser(header);
  if (!user.ok()) return RpcError{"invalid_argument", user.status().message()};
  if (*user && **user != kUser) {
    return RpcError{"permission_denied", "user '" + **user +
                                             "' does not exist here: sandboxes run as '" +
                                             std::string(kUser) + "' (leave the user unset)"};
  }
  return std::nullopt;
}

}  // namespace ci::daemon::e2b
