#include "daemon/http/sse.h"

#include "core/json.h"

namespace ci::daemon {

std::string SseFrame(std::string_view event, std::string_view json) {
  std::string out;
  out.reserve(event.size() + json.size() + 16);
  out.append("event: ").append(event).append("\ndata: ").append(json).append("\n\n");
  return out;
}

std::string SseOutputData(bool is_stderr, std::string_view text) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "stream", is_stderr ? "stderr" : "stdout");
    WriteField(w, "data", text);
    w.EndObject();
  });
}

}  // namespace ci::daemon
