#include "runtime/messages.h"

#include "core/json.h"

namespace ci::runtime::proto {
namespace {

template <typename Fn>
std::string Object(Fn&& fill) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  fill(w);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace

std::string Encode(const SetupError& m) {
  return Object([&](json::Writer& w) {
    json::Str(w, "stage", m.stage);
    json::I64(w, "errno", m.err);
    json::Str(w, "message", m.message);
  });
}

std::string Encode(const RunRequest& m) {
  return Object([&](json::Writer& w) {
    json::Strs(w, "argv", m.argv);
    json::Strs(w, "env", m.env);
    json::Str(w, "cwd", m.cwd);
    json::U64(w, "cpu_time_sec", m.cpu_time_sec);
    json::Bool(w, "background", m.background);
    json::Bool(w, "serves_calls", m.serves_calls);
    json::Str(w, "call", m.call);
  });
}

std::string Encode(const Exited& m) {
  return Object([&](json::Writer& w) {
    json::Bool(w, "has_exit_code", m.has_exit_code);
    json::I64(w, "exit_code", m.exit_code);
    json::I64(w, "signal", m.signal);
    json::U64(w, "cpu_ms", m.cpu_ms);
    json::U64(w, "max_rss_kb", m.max_rss_kb);
    json::Bool(w, "killed", m.killed);
    json::Bool(w, "no_server", m.no_server);
  });
}

std::string Encode(const FileHeader& m) {
  return Object([&](json::Writer& w) {
    json::Str(w, "path", m.path);
    json::U64(w, "size", m.size);
  });
}

std::string Encode(const CollectRequest& m) {
  return Object([&](json::Writer& w) {
    json::U64(w, "max_files", m.max_files);
    json::U64(w, "max_total_bytes", m.max_total_bytes);
    json::Str(w, "skip_path", m.skip_path);
    json::I64(w, "modified_after_ns", m.modified_after_ns);
  });
}

std::string Encode(const CgroupReport& m) {
  return Object([&](json::Writer& w) {
    json::Bool(w, "oom_killed", m.oom_killed);
    json::Bool(w, "pids_limit_hit", m.pids_limit_hit);
    json::U64(w, "memory_peak_bytes", m.memory_peak_bytes);
    json::U64(w, "cpu_ms", m.cpu_ms);
    json::Str(w, "cleanup_error", m.cleanup_error);
  });
}

std::string EncodeError(std::string_view message) {
  return Object([&](json::Writer& w) { json::Str(w, "message", message); });
}

std::string EncodeCollectDone(bool truncated) {
  return Object([&](json::Writer& w) { json::Bool(w, "truncated", truncated); });
}

bool Decode(std::string_view text, SetupError* m) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "stage", &m->stage) &&
         json::Get(d, "errno", &m->err) && json::Get(d, "message", &m->message);
}

bool Decode(std::string_view text, RunRequest* m) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "argv", &m->argv) && json::Get(d, "env", &m->env) &&
         json::Get(d, "cwd", &m->cwd) && json::Get(d, "cpu_time_sec", &m->cpu_time_sec) &&
         json::Get(d, "background", &m->background) &&
         json::Get(d, "serves_calls", &m->serves_calls) && json::Get(d, "call", &m->call) &&
         (!m->argv.empty() || !m->call.empty());
}

bool Decode(std::string_view text, Exited* m) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "has_exit_code", &m->has_exit_code) &&
         json::Get(d, "exit_code", &m->exit_code) && json::Get(d, "signal", &m->signal) &&
         json::Get(d, "cpu_ms", &m->cpu_ms) && json::Get(d, "max_rss_kb", &m->max_rss_kb) &&
         json::Get(d, "killed", &m->killed) && json::Get(d, "no_server", &m->no_server);
}

bool Decode(std::string_view text, FileHeader* m) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "path", &m->path) && json::Get(d, "size", &m->size);
}

bool Decode(std::string_view text, CollectRequest* m) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "max_files", &m->max_files) &&
         json::Get(d, "max_total_bytes", &m->max_total_bytes) &&
         json::Get(d, "skip_path", &m->skip_path) &&
         json::Get(d, "modified_after_ns", &m->modified_after_ns);
}

bool Decode(std::string_view text, CgroupReport* m) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "oom_killed", &m->oom_killed) &&
         json::Get(d, "pids_limit_hit", &m->pids_limit_hit) &&
         json::Get(d, "memory_peak_bytes", &m->memory_peak_bytes) &&
         json::Get(d, "cpu_ms", &m->cpu_ms) && json::Get(d, "cleanup_error", &m->cleanup_error);
}

bool DecodeError(std::string_view text, std::string* message) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "message", message);
}

bool DecodeCollectDone(std::string_view text, bool* truncated) {
  rapidjson::Document d;
  return json::Parse(text, &d) && json::Get(d, "truncated", truncated);
}

}  // namespace ci::runtime::proto
