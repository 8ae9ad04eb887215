#include "daemon/responses.h"

#include "core/json.h"

namespace ci {
namespace {

std::string Finish(const rapidjson::StringBuffer& buf) {
  return std::string(buf.GetString(), buf.GetSize());
}

void WriteMeta(JsonWriter& w, const FileMeta& meta, bool with_upload_time) {
  w.StartObject();
  w.Key("file_id");
  WriteString(w, meta.file_id);
  w.Key("filename");
  WriteString(w, meta.filename);
  w.Key("size_bytes");
  w.Uint64(meta.size_bytes);
  if (with_upload_time) {
    w.Key("upload_time");
    w.Double(meta.upload_time);
  }
  w.EndObject();
}

}  // namespace

std::string ExecuteResultJson(const ExecutionResult& result, const OutputSummary& output) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  if (output.stdout_text != nullptr) {
    w.Key("stdout");
    WriteString(w, *output.stdout_text);
    w.Key("stderr");
    WriteString(w, *output.stderr_text);
  }
  w.Key("exit_code");
  // exit_code is null iff the program timed out or no exit status exists (killed by a signal).
  if (!result.run.timed_out && result.run.exit_code) {
    w.Int(*result.run.exit_code);
  } else {
    w.Null();
  }
  w.Key("timed_out");
  w.Bool(result.run.timed_out);
  w.Key("duration_ms");
  w.Uint64(result.run.duration_ms);
  w.Key("files");
  w.StartArray();
  for (const auto& f : result.files) {
    w.StartObject();
    w.Key("path");
    WriteString(w, f.path);
    w.Key("kind");
    w.String("file");
    w.Key("file_id");
    WriteString(w, f.file_id);
    w.EndObject();
  }
  w.EndArray();
  w.Key("files_truncated");
  w.Bool(result.files_truncated);
  w.Key("verdict");
  WriteString(w, output.verdict);
  w.Key("stdout_truncated");
  w.Bool(output.stdout_truncated);
  w.Key("stderr_truncated");
  w.Bool(output.stderr_truncated);
  w.Key("usage");
  w.StartObject();
  w.Key("cpu_ms");
  w.Uint64(result.resources.cpu_ms > 0 ? result.resources.cpu_ms : result.run.cpu_ms);
  w.Key("max_rss_kb");
  w.Uint64(result.run.max_rss_kb);
  w.EndObject();
  w.EndObject();
  return Finish(buf);
}

std::string FileMetaJson(const FileMeta& meta, bool with_upload_time) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  WriteMeta(w, meta, with_upload_time);
  return Finish(buf);
}

std::string FileListJson(const std::vector<FileMeta>& files) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("files");
  w.StartArray();
  for (const auto& f : files) WriteMeta(w, f, /*with_upload_time=*/true);
  w.EndArray();
  w.EndObject();
  return Finish(buf);
}

std::string LanguagesJson(const std::vector<Language>& languages) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("languages");
  w.StartArray();
  for (const auto& l : languages) {
    w.StartObject();
    w.Key("name");
    WriteString(w, l.name);
    w.Key("version");
    WriteString(w, l.version);
    w.Key("interpreter");
    WriteString(w, l.interpreter);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Finish(buf);
}

std::string HealthJson(const HealthInfo& info) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("status");
  w.String(info.ok ? "ok" : "error");
  w.Key("message");
  if (info.ok) {
    w.Null();
  } else {
    WriteString(w, info.message);
  }
  w.Key("version");
  w.String(CI_VERSION);
  w.Key("executor_backend");
  WriteString(w, info.backend);
  w.Key("network_isolation");
  WriteString(w, info.network_isolation);
  w.Key("hardening");
  w.StartObject();
  w.Key("enforced");
  w.StartArray();
  for (const auto& e : info.hardening.enforced) WriteString(w, e);
  w.EndArray();
  w.Key("downgrades");
  w.StartArray();
  for (const auto& d : info.hardening.downgrades) {
    w.StartObject();
    w.Key("measure");
    WriteString(w, d.measure);
    w.Key("reason");
    WriteString(w, d.reason);
    w.Key("fix");
    WriteString(w, d.fix);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return Finish(buf);
}

}  // namespace ci
