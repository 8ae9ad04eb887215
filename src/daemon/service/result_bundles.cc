#include "daemon/service/result_bundles.h"

#include <unistd.h>

#include <fstream>

#include "core/json.h"

namespace ci::daemon {
namespace {

constexpr std::string_view kTextFields[] = {"text", "html", "markdown", "svg",       "png",
                                            "jpeg", "pdf",  "latex",    "javascript"};

// The line's known fields, or "" when it is not a JSON object with at least one format.
std::string Bundle(std::string_view line) {
  auto doc = ParseJsonObject(line, "a result");
  if (!doc.ok()) return "";
  bool any = false;
  std::string text = JsonText([&](JsonWriter& w) {
    w.StartObject();
    auto main = doc->FindMember("is_main_result");
    w.Key("is_main_result");
    w.Bool(main != doc->MemberEnd() && main->value.IsBool() && main->value.GetBool());
    for (std::string_view field : kTextFields) {
      auto m = doc->FindMember(rapidjson::StringRef(field.data(), field.size()));
      if (m == doc->MemberEnd() || !m->value.IsString()) continue;
      WriteField(w, field, std::string_view(m->value.GetString(), m->value.GetStringLength()));
      any = true;
    }
    auto json = doc->FindMember("json");
    if (json != doc->MemberEnd()) {
      w.Key("json");
      json->value.Accept(w);
      any = true;
    }
    w.EndObject();
  });
  return any ? text : "";
}

}  // namespace

std::vector<std::string> TakeResultBundles(std::vector<CollectedFile>& files) {
  std::vector<std::string> out;
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (it->workspace_path != kResultsFile) continue;
    std::ifstream in(it->host_path, std::ios::binary);
    std::string line;
    while (out.size() < kMaxResults && std::getline(in, line)) {
      std::string bundle = Bundle(line);
      if (!bundle.empty()) out.push_back(std::move(bundle));
    }
    ::unlink(it->host_path.c_str());
    files.erase(it);
    break;
  }
  return out;
}

}  // namespace ci::daemon
