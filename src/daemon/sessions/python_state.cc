#include "daemon/sessions/python_state.h"

#include "core/json.h"

namespace ci::daemon {

namespace {

struct LostName {
  std::string name;
  std::string why;
};
template <typename V, json::Message<LostName> M>
void Fields(V& v, M& m) {
  v("name", m.name);
  v("why", m.why);
}

// kept and lost are required unless the answer is an error.
template <typename V, json::Message<PythonStateReport> M>
void Fields(V& v, M& m) {
  v.Optional("error", m.error);
  if (m.error.empty()) {
    v("kept", m.kept);
  }
  v.Optional("bytes", m.bytes);
}

std::string_view LastLine(std::string_view text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return {};
  text = text.substr(0, end + 1);
  size_t start = text.rfind('\n');
  return start == std::string_view::npos ? text : text.substr(start + 1);
}

// The lost names, each {"name", "why"}; false when lost is missing or anything else.
bool ReadLost(const rapidjson::Value& doc, PythonStateReport& report) {
  if (!doc.HasMember("lost") || !doc["lost"].IsArray()) return false;
  for (const auto& item : doc["lost"].GetArray()) {
    if (!item.IsObject()) return false;
    LostName lost;
    json::FieldReader v(item);
    Fields(v, lost);
    if (!v.ok()) return false;
    report.lost.emplace_back(std::move(lost.name), std::move(lost.why));
  }
  return true;
}

}  // namespace

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

Result<PythonStateReport> ParsePythonStateReport(std::string_view stdout_text) {
  std::string_view line = LastLine(stdout_text);
  if (line.empty()) return Status::Error("the interpreter's state answer is empty");
  auto doc = ParseJsonObject(line, "the interpreter's state answer");
  if (!doc.ok()) return doc.status();
  PythonStateReport report;
  json::FieldReader fields(doc.value());
  Fields(fields, report);
  bool ok = fields.ok() && (!report.error.empty() || ReadLost(doc.value(), report));
  if (!ok) {
    std::string what = "the interpreter's state answer lacks kept, lost or bytes as they are: ";
    what.append(line.substr(0, 200));
    return Status::Error(what);
  }
  return report;
}

}  // namespace ci::daemon
