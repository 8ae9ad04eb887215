#include "daemon/sessions/python_state.h"

#include "core/json.h"

namespace ci::daemon {

std::string PythonStateRequest(std::string_view op, std::string_view path, int64_t timeout_ms) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "op", op);
    WriteField(w, "path", path);
    w.Key("timeout_ms");
    w.Int64(timeout_ms);
    w.EndObject();
  });
}

Result<PythonStateReport> ParsePythonStateReport(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t nl = text.rfind('\n');
  std::string_view line = nl == std::string_view::npos ? text : text.substr(nl + 1);
  rapidjson::Document doc;
  std::string why;
  if (line.empty() || !ParseJson(line, doc, why) || !doc.IsObject()) {
    return Status::Error("the interpreter's state call gave no report");
  }
  PythonStateReport r;
  if (auto it = doc.FindMember("error"); it != doc.MemberEnd() && it->value.IsString()) {
    r.error.assign(it->value.GetString(), it->value.GetStringLength());
  }
  if (auto it = doc.FindMember("kept"); it != doc.MemberEnd() && it->value.IsArray()) {
    for (const auto& k : it->value.GetArray()) {
      if (k.IsString()) r.kept.emplace_back(k.GetString(), k.GetStringLength());
    }
  }
  if (auto it = doc.FindMember("lost"); it != doc.MemberEnd() && it->value.IsArray()) {
    for (const auto& l : it->value.GetArray()) {
      if (!l.IsObject() || !l.HasMember("name") || !l["name"].IsString()) continue;
      std::string reason = l.HasMember("why") && l["why"].IsString() ? l["why"].GetString() : "";
      r.lost.emplace_back(l["name"].GetString(), std::move(reason));
    }
  }
  if (auto it = doc.FindMember("bytes"); it != doc.MemberEnd() && it->value.IsUint64()) {
    r.bytes = it->value.GetUint64();
  }
  return r;
}

}  // namespace ci::daemon
