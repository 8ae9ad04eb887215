#include "daemon/api/responses.h"

#include <cstdio>

#include "core/json.h"

namespace ci::daemon {
namespace {

void WriteMeta(JsonWriter& w, const FileMeta& meta, bool with_upload_time) {
  w.StartObject();
  WriteField(w, "file_id", meta.file_id);
  WriteField(w, "filename", meta.filename);
  w.Key("size_bytes");
  w.Uint64(meta.size_bytes);
  if (with_upload_time) {
    w.Key("upload_time");
    w.Double(meta.upload_time);
  }
  w.EndObject();
}

// exit_code is null iff the program timed out or no exit status exists (killed by a signal).
void WriteExitStatus(JsonWriter& w, const RunOutcome& run) {
  w.Key("exit_code");
  if (!run.timed_out && run.exit_code) {
    w.Int(*run.exit_code);
  } else {
    w.Null();
  }
  w.Key("timed_out");
  w.Bool(run.timed_out);
  w.Key("duration_ms");
  w.Uint64(run.duration_ms);
}

void WriteSession(JsonWriter& w, const SessionSummary& s, bool with_created_at) {
  w.StartObject();
  WriteField(w, "session_id", s.id);
  if (with_created_at) {
    w.Key("created_at");
    w.Double(s.created_at);
    WriteField(w, "state", s.state);
  }
  w.Key("expires_at");
  w.Double(s.expires_at);
  w.EndObject();
}

// {"<key>": [...]}, each item written by `write_item`.
template <typename T, typename WriteItem>
std::string ListJson(const char* key, const std::vector<T>& items, WriteItem&& write_item) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key(key);
    w.StartArray();
    for (const T& item : items) write_item(w, item);
    w.EndArray();
    w.EndObject();
  });
}

// What a sandbox with an egress policy reached and was refused (docs/egress.md).
void WriteNetwork(JsonWriter& w, const EgressReport& report) {
  w.Key("network");
  w.StartObject();
  w.Key("reached");
  w.StartArray();
  for (const auto& d : report.reached) {
    w.StartObject();
    WriteField(w, "host", d.host);
    w.Key("port");
    w.Uint(d.port);
    w.Key("connections");
    w.Uint(d.connections);
    w.Key("bytes_out");
    w.Uint64(d.bytes_out);
    w.Key("bytes_in");
    w.Uint64(d.bytes_in);
    w.EndObject();
  }
  w.EndArray();
  w.Key("refused");
  w.StartArray();
  for (const auto& r : report.refused) {
    w.StartObject();
    WriteField(w, "host", r.host);
    w.Key("port");
    w.Uint(r.port);
    WriteField(w, "reason", r.reason);
    w.EndObject();
  }
  w.EndArray();
  w.Key("refused_count");
  w.Uint64(report.refused_count);
  w.EndObject();
}

}  // namespace

std::string ExecuteResultJson(const ExecutionResult& result, const OutputSummary& output) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    if (output.stdout_text != nullptr) {
      WriteField(w, "stdout", *output.stdout_text);
      WriteField(w, "stderr", *output.stderr_text);
    }
    WriteExitStatus(w, result.run);
    w.Key("files");
    w.StartArray();
    for (const auto& f : result.files) {
      w.StartObject();
      WriteField(w, "path", f.path);
      w.Key("kind");
      w.String("file");
      WriteField(w, "file_id", f.file_id);
      w.EndObject();
    }
    w.EndArray();
    w.Key("files_truncated");
    w.Bool(result.files_truncated);
    w.Key("results");
    w.StartArray();
    for (const auto& r : result.results) w.RawValue(r.data(), r.size(), rapidjson::kObjectType);
    w.EndArray();
    WriteField(w, "verdict", VerdictName(output.verdict));
    w.Key("stdout_truncated");
    w.Bool(output.stdout_truncated);
    w.Key("stderr_truncated");
    w.Bool(output.stderr_truncated);
    if (result.network) WriteNetwork(w, *result.network);
    w.Key("usage");
    w.StartObject();
    w.Key("cpu_ms");
    w.Uint64(result.resources.cpu_ms > 0 ? result.resources.cpu_ms : result.run.cpu_ms);
    w.Key("max_rss_kb");
    w.Uint64(result.run.max_rss_kb);
    w.EndObject();
    w.EndObject();
  });
}

std::string FileMetaJson(const FileMeta& meta, bool with_upload_time) {
  return JsonText([&](JsonWriter& w) { WriteMeta(w, meta, with_upload_time); });
}

std::string FileListJson(const std::vector<FileMeta>& files) {
  return ListJson("files", files,
                  [](JsonWriter& w, const auto& f) { WriteMeta(w, f, /*with_upload_time=*/true); });
}

std::string LanguagesJson(const std::vector<Language>& languages) {
  return ListJson("languages", languages, [](JsonWriter& w, const auto& l) {
    w.StartObject();
    WriteField(w, "name", l.name);
    WriteField(w, "version", l.version);
    WriteField(w, "interpreter", l.interpreter);
    w.EndObject();
  });
}

namespace {

void WriteDowngrades(JsonWriter& w, const std::vector<Downgrade>& downgrades) {
  w.StartArray();
  for (const auto& d : downgrades) {
    w.StartObject();
    WriteField(w, "measure", d.measure);
    WriteField(w, "reason", d.reason);
    WriteField(w, "fix", d.fix);
    w.EndObject();
  }
  w.EndArray();
}

std::string Hex(uint64_t mask) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(mask));
  return buf;
}

void WriteDeployment(JsonWriter& w, const DeploymentInfo& d) {
  w.Key("deployment");
  w.StartObject();
  WriteField(w, "mode", d.mode);
  WriteField(w, "detected", d.detected);
  if (d.engine) {
    w.Key("engine");
    w.StartObject();
    WriteField(w, "endpoint", d.engine->endpoint);
    WriteField(w, "version", d.engine->version);
    w.Key("rootless");
    w.Bool(d.engine->rootless);
    WriteField(w, "cgroup_version", d.engine->cgroup_version);
    WriteField(w, "storage_driver", d.engine->storage_driver);
    WriteField(w, "error", d.engine->error);
    w.Key("userns_remap");
    w.Bool(d.engine->userns_remap);
    w.EndObject();
  }
  if (d.nested_dockerd) {
    const NestedDockerdInfo& n = *d.nested_dockerd;
    w.Key("nested_dockerd");
    w.StartObject();
    w.Key("pid");
    w.Int64(n.pid);
    w.Key("answering");
    w.Bool(n.answering);
    w.Key("restarts");
    w.Int(n.restarts);
    WriteField(w, "storage_driver", n.storage_driver);
    WriteField(w, "last_exit", n.last_exit);
    w.Key("seccomp_mode");
    w.Int(n.seccomp_mode);
    WriteField(w, "cap_bounding", Hex(n.cap_bounding));
    WriteField(w, "cap_effective", Hex(n.cap_effective));
    w.Key("dropped_capabilities");
    w.StartArray();
    for (const std::string& c : n.dropped_capabilities) WriteString(w, c);
    w.EndArray();
    w.EndObject();
  }
  w.Key("downgrades");
  WriteDowngrades(w, d.downgrades);
  w.EndObject();
}

}  // namespace

std::string HealthJson(const HealthInfo& info) {
  return JsonText([&](JsonWriter& w) {
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
    WriteField(w, "executor_backend", info.backend);
    WriteField(w, "network_isolation", info.network_isolation);
    WriteField(w, "egress", info.egress);
    WriteField(w, "session_snapshots", info.session_snapshots);
    w.Key("hardening");
    w.StartObject();
    w.Key("enforced");
    w.StartArray();
    for (const std::string& e : MeasureNames(info.hardening.enforced)) WriteString(w, e);
    w.EndArray();
    w.Key("downgrades");
    WriteDowngrades(w, info.hardening.downgrades);
    w.EndObject();
    w.Key("backend_downgrades");
    WriteDowngrades(w, info.backend_downgrades);
    WriteDeployment(w, info.deployment);
    w.EndObject();
  });
}

std::string SessionCreatedJson(const SessionSummary& session) {
  return JsonText([&](JsonWriter& w) { WriteSession(w, session, /*with_created_at=*/false); });
}

std::string SessionListJson(const std::vector<SessionSummary>& sessions) {
  return ListJson("sessions", sessions, [](JsonWriter& w, const auto& s) {
    WriteSession(w, s, /*with_created_at=*/true);
  });
}

std::string BashResultJson(const RunOutcome& run, const std::string& stdout_text,
                           const std::string& stderr_text) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "stdout", stdout_text);
    WriteField(w, "stderr", stderr_text);
    WriteExitStatus(w, run);
    w.EndObject();
  });
}

std::string WorkspaceFilesJson(const std::vector<WorkspaceFile>& files) {
  return ListJson("files", files, [](JsonWriter& w, const auto& f) {
    w.StartObject();
    WriteField(w, "path", f.path);
    w.Key("size_bytes");
    w.Uint64(f.size);
    WriteField(w, "file_id", f.file_id);
    w.EndObject();
  });
}

}  // namespace ci::daemon
