#include "daemon/tools/solve_json.h"

namespace ci::daemon {
namespace {

void WriteAttempts(JsonWriter& w, const SolveOutcome& outcome) {
  w.Key("attempts");
  w.StartArray();
  for (const Attempt& a : outcome.attempts) WriteAttempt(w, a);
  w.EndArray();
}

template <typename T>
void WriteOptional(JsonWriter& w, std::string_view key, const std::optional<T>& v) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  if (v) {
    w.Int64(*v);
  } else {
    w.Null();
  }
}

}  // namespace

void WriteModelCost(JsonWriter& w, const Attempt& a) {
  w.Key("model_ms");
  w.Int64(a.model_wall.count());
  w.Key("prompt_tokens");
  w.Int64(a.usage.prompt_tokens);
  w.Key("completion_tokens");
  w.Int64(a.usage.completion_tokens);
}

void WriteAttempt(JsonWriter& w, const Attempt& a) {
  w.StartObject();
  w.Key("attempt");
  w.Int(a.number);
  WriteField(w, "code", a.code);
  WriteField(w, "stdout", a.result.stdout_text);
  WriteField(w, "stderr", a.result.stderr_text);
  WriteOptional(w, "exit_code", a.result.exit_code);
  w.Key("verdict");
  if (a.ran) {
    WriteString(w, a.result.verdict);
  } else {
    w.Null();
  }
  w.Key("duration_ms");
  w.Uint64(a.result.duration_ms);
  w.Key("accepted");
  w.Bool(a.failure.empty());
  w.Key("failure");
  if (a.failure.empty()) {
    w.Null();
  } else {
    WriteString(w, a.failure);
  }
  WriteModelCost(w, a);
  w.EndObject();
}

std::string AttemptJson(const Attempt& attempt) {
  return JsonText([&](JsonWriter& w) { WriteAttempt(w, attempt); });
}

std::string SolveOutcomeJson(const SolveOutcome& outcome, const SolveRequest& request,
                             std::string_view model) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "status", outcome.solved ? "solved" : "failed");
    WriteField(w, "output", outcome.output);
    WriteField(w, "language", request.language);
    WriteField(w, "model", model);
    WriteAttempts(w, outcome);
    int64_t prompt = 0, completion = 0, model_ms = 0;
    for (const Attempt& a : outcome.attempts) {
      prompt += a.usage.prompt_tokens;
      completion += a.usage.completion_tokens;
      model_ms += a.model_wall.count();
    }
    w.Key("usage");
    w.StartObject();
    w.Key("prompt_tokens");
    w.Int64(prompt);
    w.Key("completion_tokens");
    w.Int64(completion);
    w.Key("model_ms");
    w.Int64(model_ms);
    w.EndObject();
    w.EndObject();
  });
}

std::string SolveErrorJson(const SolveOutcome& outcome) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "detail", outcome.error ? outcome.error->detail : "");
    WriteAttempts(w, outcome);
    w.EndObject();
  });
}

}  // namespace ci::daemon
