#include "daemon/api/request_parsing.h"

#include <algorithm>

#include "core/json.h"

namespace ci::daemon {
namespace {

using rapidjson::Value;

std::string Str(const Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

Status ParseFiles(const Value& v, std::vector<FileRef>& out) {
  if (!v.IsArray()) return Status::Error("Field 'files' must be an array.");
  for (const auto& f : v.GetArray()) {
    if (!f.IsObject() || !f.HasMember("path") || !f.HasMember("file_id") || !f["path"].IsString() ||
        !f["file_id"].IsString()) {
      return Status::Error("Each file must include both 'path' and 'file_id'.");
    }
    out.push_back({Str(f["path"]), Str(f["file_id"])});
  }
  return {};
}

Status ParseTimeout(const rapidjson::Document& doc, int64_t max_timeout_ms, int64_t* out) {
  auto it = doc.FindMember("timeout_ms");
  if (it == doc.MemberEnd()) return {};
  // IsInt64 is false for 1.0 and for numbers beyond int64: both are not integers to us.
  if (!it->value.IsInt64()) return Status::Error("Field 'timeout_ms' must be an integer.");
  *out = it->value.GetInt64();
  if (*out < 1) return Status::Error("timeout_ms must be greater than or equal to 1");
  if (*out > max_timeout_ms) {
    return Status::Error("timeout_ms exceeds maximum of " + std::to_string(max_timeout_ms) + " ms");
  }
  return {};
}

// A required string field, with the API's two error texts.
Result<std::string> RequiredString(const rapidjson::Document& doc, const std::string& name) {
  auto it = doc.FindMember(name.c_str());
  if (it == doc.MemberEnd()) return Status::Error("Field '" + name + "' is required.");
  if (!it->value.IsString()) return Status::Error("Field '" + name + "' must be a string.");
  return Str(it->value);
}

Status ParseObject(std::string_view body, rapidjson::Document& doc) {
  std::string why;
  if (!ParseJson(body, doc, why)) return Status::Error("Invalid request body: " + why);
  if (!doc.IsObject()) return Status::Error("Invalid request body: expected a JSON object");
  return {};
}

// `network`: {"allow_out": [rule...], "deny_out": [rule...]} (docs/egress.md), both optional.
Result<NetworkRequest> ParseNetwork(const rapidjson::Value& v) {
  const Status bad = Status::Error(
      "Field 'network' must be an object with 'allow_out' and 'deny_out', lists of strings.");
  if (!v.IsObject()) return bad;
  NetworkRequest out;
  for (const auto& m : v.GetObject()) {
    const std::string key = Str(m.name);
    std::vector<std::string>* into = key == "allow_out"  ? &out.allow_out
                                     : key == "deny_out" ? &out.deny_out
                                                         : nullptr;
    if (into == nullptr || !m.value.IsArray()) return bad;
    for (const auto& item : m.value.GetArray()) {
      if (!item.IsString()) return bad;
      into->push_back(Str(item));
    }
  }
  return out;
}

}  // namespace

Result<ExecuteRequest> ParseExecuteRequest(std::string_view body, int64_t max_timeout_ms) {
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;

  ExecuteRequest r;
  Result<std::string> code = RequiredString(doc, "code");
  if (!code.ok()) return code.status();
  r.code = std::move(code).value();

  if (auto it = doc.FindMember("stdin"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsString()) return Status::Error("Field 'stdin' must be a string or null.");
    r.stdin_data = Str(it->value);
  }
  if (Status s = ParseTimeout(doc, max_timeout_ms, &r.timeout_ms); !s.ok()) return s;
  if (auto it = doc.FindMember("last_line_interactive"); it != doc.MemberEnd()) {
    if (!it->value.IsBool()) {
      return Status::Error("Field 'last_line_interactive' must be a boolean.");
    }
    r.last_line_interactive = it->value.GetBool();
  }
  if (auto it = doc.FindMember("files"); it != doc.MemberEnd()) {
    if (Status s = ParseFiles(it->value, r.files); !s.ok()) return s;
  }
  if (auto it = doc.FindMember("language"); it != doc.MemberEnd()) {
    if (!it->value.IsString()) return Status::Error("Field 'language' must be a string.");
    r.language = Str(it->value);
  }
  if (auto it = doc.FindMember("network"); it != doc.MemberEnd() && !it->value.IsNull()) {
    auto network = ParseNetwork(it->value);
    if (!network.ok()) return network.status();
    r.network = std::move(network).value();
  }
  return r;
}

Result<SessionCreateRequest> ParseSessionCreateRequest(std::string_view body) {
  SessionCreateRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  if (auto it = doc.FindMember("ttl_seconds"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 1 || it->value.GetInt64() > 86400) {
      return Status::Error("ttl_seconds must be an integer between 1 and 86400.");
    }
    r.ttl_seconds = it->value.GetInt64();
  }
  if (auto it = doc.FindMember("files"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (Status s = ParseFiles(it->value, r.files); !s.ok()) return s;
  }
  if (auto it = doc.FindMember("network"); it != doc.MemberEnd() && !it->value.IsNull()) {
    auto network = ParseNetwork(it->value);
    if (!network.ok()) return network.status();
    r.network = std::move(network).value();
  }
  if (auto it = doc.FindMember("snapshot"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsString() || it->value.GetStringLength() == 0) {
      return Status::Error("snapshot must be a snapshot's id or name (a string).");
    }
    r.snapshot = std::string(it->value.GetString(), it->value.GetStringLength());
  }
  return r;
}

namespace {

bool Blank(std::string_view body) {
  return body.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

Status ParseIgnoredBody(std::string_view body) {
  if (Blank(body)) return Status();
  rapidjson::Document doc;
  return ParseObject(body, doc);
}

Result<bool> ParsePauseRequest(std::string_view body) {
  if (Blank(body)) return true;
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  auto it = doc.FindMember("memory");
  if (it == doc.MemberEnd() || it->value.IsNull()) return true;
  if (!it->value.IsBool()) return Status::Error("memory must be true or false.");
  return it->value.GetBool();
}

Result<ForkRequest> ParseForkRequest(std::string_view body) {
  ForkRequest r;
  if (Blank(body)) return r;
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  if (auto it = doc.FindMember("count"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 1 || it->value.GetInt64() > 16) {
      return Status::Error("count must be an integer between 1 and 16.");
    }
    r.count = static_cast<uint32_t>(it->value.GetInt64());
  }
  if (auto it = doc.FindMember("ttl_seconds"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 1 || it->value.GetInt64() > 86400) {
      return Status::Error("ttl_seconds must be an integer between 1 and 86400.");
    }
    r.ttl_seconds = it->value.GetInt64();
  }
  return r;
}

Result<std::string> ParseSnapshotRequest(std::string_view body) {
  if (Blank(body)) return std::string();
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  auto it = doc.FindMember("name");
  if (it == doc.MemberEnd() || it->value.IsNull()) return std::string();
  if (!it->value.IsString() || it->value.GetStringLength() > 128) {
    return Status::Error("name must be a string of at most 128 characters.");
  }
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

Result<BashRequest> ParseBashRequest(std::string_view body, int64_t max_timeout_ms) {
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  BashRequest r;
  Result<std::string> cmd = RequiredString(doc, "cmd");
  if (!cmd.ok()) return cmd.status();
  r.cmd = std::move(cmd).value();
  if (r.cmd.find('\0') != std::string::npos) {
    return Status::Error("Field 'cmd' must not contain NUL characters.");
  }
  if (Status s = ParseTimeout(doc, max_timeout_ms, &r.timeout_ms); !s.ok()) return s;
  return r;
}

Result<std::vector<FileRef>> ParseStageFilesRequest(std::string_view body) {
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  auto it = doc.FindMember("files");
  if (it == doc.MemberEnd()) return Status::Error("Field 'files' is required.");
  std::vector<FileRef> files;
  if (Status s = ParseFiles(it->value, files); !s.ok()) return s;
  return files;
}

Result<SolveRequest> ParseSolveRequest(std::string_view body, int64_t max_timeout_ms) {
  rapidjson::Document doc;
  if (Status s = ParseObject(body, doc); !s.ok()) return s;
  SolveRequest r;
  Result<std::string> task = RequiredString(doc, "task");
  if (!task.ok()) return task.status();
  r.task = std::move(task).value();
  if (r.task.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Status::Error("Field 'task' must not be empty.");
  }
  if (auto it = doc.FindMember("language"); it != doc.MemberEnd()) {
    if (!it->value.IsString()) return Status::Error("Field 'language' must be a string.");
    r.language = Str(it->value);
  }
  if (auto it = doc.FindMember("max_attempts"); it != doc.MemberEnd()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 1 || it->value.GetInt64() > 10) {
      return Status::Error("max_attempts must be an integer between 1 and 10.");
    }
    r.max_attempts = static_cast<int>(it->value.GetInt64());
  }
  r.timeout_ms = std::min(DefaultSolveTimeoutMs(r.language), max_timeout_ms);
  if (Status s = ParseTimeout(doc, max_timeout_ms, &r.timeout_ms); !s.ok()) return s;
  return r;
}

}  // namespace ci::daemon
