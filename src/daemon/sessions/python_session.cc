#include "daemon/sessions/python_session.h"

#include "core/json.h"
#include "daemon/service/python_program.h"
#include "daemon/sessions/session_programs.h"

namespace ci::daemon {

std::string_view PythonSessionServerSource() {
  static const std::string source = WithRichResults(programs::kSessionServer);
  return source;
}

std::vector<std::string> PythonSessionServerArgv() {
  return {"python3", "-c", std::string(PythonSessionServerSource())};
}

std::string PythonSessionRequest(std::string_view code, bool last_line_interactive,
                                 int64_t timeout_ms) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "code", code);
    w.Key("last_line_interactive");
    w.Bool(last_line_interactive);
    w.Key("timeout_ms");
    w.Int64(timeout_ms);
    w.EndObject();
  });
}

}  // namespace ci::daemon
