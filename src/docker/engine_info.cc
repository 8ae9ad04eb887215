#include "docker/engine_info.h"

#include <rapidjson/document.h>

#include "core/json.h"
#include "docker/engine_client.h"

namespace ci::docker {
namespace {

std::string Str(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsString()) return "";
  return {it->value.GetString(), it->value.GetStringLength()};
}

std::vector<std::string> Strings(const rapidjson::Value& o, const char* key) {
  std::vector<std::string> out;
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsArray()) return out;
  for (const auto& e : it->value.GetArray()) {
    if (e.IsString()) out.emplace_back(e.GetString(), e.GetStringLength());
  }
  return out;
}

}  // namespace

Result<EngineInfo> ParseEngineInfo(std::string_view json) {
  rapidjson::Document doc;
  std::string why;
  if (!ParseJson(json, doc, why) || !doc.IsObject()) {
    return Status::Error("GET /info: not a JSON object: " + why);
  }
  EngineInfo info;
  info.server_version = Str(doc, "ServerVersion");
  info.cgroup_version = Str(doc, "CgroupVersion");
  info.cgroup_driver = Str(doc, "CgroupDriver");
  info.storage_driver = Str(doc, "Driver");
  info.warnings = Strings(doc, "Warnings");
  // Each option is "name=seccomp,profile=default" (API >= 1.26) or a bare name (older).
  for (const std::string& option : Strings(doc, "SecurityOptions")) {
    std::string name = option.rfind("name=", 0) == 0 ? option.substr(5) : option;
    name = name.substr(0, name.find(','));
    if (name == "rootless") info.rootless = true;
    info.security_options.push_back(name);
  }
  return info;
}

boost::asio::awaitable<Result<EngineInfo>> FetchEngineInfo(EngineClient& client) {
  auto r = co_await client.Request("GET", "/info");
  if (!r.ok()) co_return r.status();
  if (!r->ok()) co_return HttpError("docker GET /info", *r);
  co_return ParseEngineInfo(r->body);
}

}  // namespace ci::docker
