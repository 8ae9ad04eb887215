// /v1/sessions over HTTP against the fake backend: lifecycle, bash and persistent-Python calls,
// files in and out, TTL expiry, a sandbox that died (410), capacity (503) and a backend without
// sessions (501).
#include <sstream>
#include <thread>

#include "daemon/sessions/python_session.h"
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;
using asio::awaitable;

// The scripted program of these tests, for bash commands and Python cells alike, one command:
//   echo TEXT | cat PATH | write PATH TEXT | number (of the sandbox) | sleep | vanish (the sandbox
//   dies) | set NAME VALUE, get NAME (the interpreter's namespace) | exit (the interpreter ends)
awaitable<RunOutcome> Interpret(FakeProcess& p, const std::string& command) {
  std::istringstream in(command);
  std::string verb, a, b;
  in >> verb >> a;
  std::getline(in >> std::ws, b);
  if (verb == "echo") p.Stdout(a + "\n");
  if (verb == "cat") p.Stdout(p.ReadFile(a));
  if (verb == "write") p.WriteFile(a, b);
  if (verb == "number") p.Stdout(std::to_string(p.sandbox_number()));
  if (verb == "sleep") co_await p.Sleep(10min);
  if (verb == "vanish") co_return p.LoseSandbox();
  if (verb == "set") p.globals()[a] = b;
  if (verb == "get") p.Stdout(p.globals()[a]);
  if (verb == "exit") co_return p.EndInterpreter(0);
  co_return p.Exit(0);
}

// Session requests, on whichever daemon the fixture started.
class SessionRequests : public DaemonApiTest {
 protected:
  HttpReply Bash(const std::string& id, const std::string& cmd) {
    return client().Post("/v1/sessions/" + id + "/bash", R"({"cmd": ")" + cmd + R"("})");
  }
};

class SessionApiTest : public SessionRequests {
 protected:
  void SetUp() override {
    Start([](Config& c) {
      c.max_sessions = 2;
      c.capacity_retry_after_sec = 13;
    });
    fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
      co_return co_await Interpret(p, p.payload().argv.at(2));  // bash -c CMD
    });
    fake().AnswerCalls([](FakeProcess& p) -> awaitable<RunOutcome> {
      co_return co_await Interpret(p, p.cell()->code);
    });
  }
  std::string Create(const std::string& body = "{}") {
    HttpReply r = client().Post("/v1/sessions", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return Str(Json(r), "session_id");
  }
  rapidjson::Document Python(const std::string& id, const std::string& code,
                             const std::string& more = "") {
    HttpReply r = client().Post("/v1/sessions/" + id + "/execute",
                                R"({"code": ")" + code + "\"" + more + "}");
    EXPECT_EQ(r.status, 200) << r.body;
    return Json(r);
  }
  std::string Upload(const std::string& name, const std::string& content) {
    return Str(Json(client().Upload(name, content)), "file_id");
  }
};

TEST_F(SessionApiTest, ACreatedSessionIsListedUntilDeleted) {
  std::string id = Create(R"({"ttl_seconds": 60})");
  EXPECT_EQ(id.rfind("code-session-", 0), 0u) << id;
  auto list = Json(client().Get("/v1/sessions"));
  ASSERT_EQ(list["sessions"].Size(), 1u);
  EXPECT_EQ(Str(list["sessions"][0], "session_id"), id);
  EXPECT_EQ(Metric("code_interpreter_sessions_active"), 1);
  EXPECT_EQ(client().Delete("/v1/sessions/" + id).status, 204);
  EXPECT_EQ(fake().counts().destroyed, 1);
  HttpReply again = client().Delete("/v1/sessions/" + id);
  EXPECT_EQ(again.status, 404);
  EXPECT_EQ(Str(Json(again), "detail"), "Session '" + id + "' not found");
  EXPECT_EQ(Json(client().Get("/v1/sessions"))["sessions"].Size(), 0u);
}

TEST_F(SessionApiTest, BashCallsRunInTheSessionsOneSandbox) {
  std::string id = Create();
  HttpReply first = Bash(id, "number");
  HttpReply second = Bash(id, "echo hello");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(Str(Json(first), "stdout"), "1");
  EXPECT_EQ(Json(first)["exit_code"].GetInt(), 0);
  EXPECT_EQ(Str(Json(second), "stdout"), "hello\n");
  EXPECT_EQ(fake().counts().prepared, 1);
}

TEST_F(SessionApiTest, PythonCallsShareOneInterpreter) {
  std::string id = Create();
  Python(id, "set x 5");
  auto j = Python(id, "get x");
  EXPECT_EQ(Str(j, "stdout"), "5");
  EXPECT_EQ(Str(j, "verdict"), "ok");
  EXPECT_EQ(fake().counts().interpreters_started, 1);
}

TEST_F(SessionApiTest, ACellInterruptedAtItsTimeoutIsTimedOutAndKeepsTheState) {
  std::string id = Create();
  Python(id, "set x 1");
  auto timed_out = Python(id, "sleep", R"(, "timeout_ms": 50)");
  EXPECT_TRUE(timed_out["timed_out"].GetBool());
  EXPECT_EQ(Str(timed_out, "verdict"), "timed_out");
  EXPECT_EQ(Str(Python(id, "get x"), "stdout"), "1");
  EXPECT_EQ(fake().counts().interpreters_started, 1);
}

TEST_F(SessionApiTest, ACallAfterTheInterpreterEndedGetsANewOneAndIsToldTheStateIsLost) {
  std::string id = Create();
  Python(id, "set x 1");
  Python(id, "exit");
  auto j = Python(id, "get x");
  EXPECT_EQ(Str(j, "stdout"), "");
  EXPECT_EQ(Str(j, "stderr"), std::string(kStateLostNotice));
  EXPECT_EQ(fake().counts().interpreters_started, 2);
}

TEST_F(SessionApiTest, ExecuteInASessionIsPythonOnly) {
  std::string id = Create();
  HttpReply r =
      client().Post("/v1/sessions/" + id + "/execute", R"({"code": "ls", "language": "bash"})");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(fake().counts().runs_started, 0);
}

TEST_F(SessionApiTest, FilesStagedAtCreationAndWrittenByCallsAreListedWithIds) {
  std::string in = Upload("in.txt", "input");
  std::string id = Create(R"({"files": [{"path": "in.txt", "file_id": ")" + in + R"("}]})");
  ASSERT_EQ(Bash(id, "write out.txt written").status, 200);
  HttpReply r = client().Get("/v1/sessions/" + id + "/files");
  ASSERT_EQ(r.status, 200) << r.body;
  auto listing = Json(r);
  const auto& files = listing["files"];
  ASSERT_EQ(files.Size(), 2u);
  EXPECT_EQ(Str(files[0], "path"), "in.txt");
  EXPECT_EQ(files[0]["size_bytes"].GetUint64(), 5u);
  EXPECT_EQ(Str(files[1], "path"), "out.txt");
  EXPECT_EQ(client().Get("/v1/files/" + Str(files[1], "file_id")).body, "written");
}

TEST_F(SessionApiTest, AnExecuteCallReturnsOnlyTheFilesItChanged) {
  std::string in = Upload("in.txt", "input");
  std::string id = Create(R"({"files": [{"path": "in.txt", "file_id": ")" + in + R"("}]})");
  auto j = Python(id, "write new.txt fresh");
  ASSERT_EQ(j["files"].Size(), 1u);
  EXPECT_EQ(Str(j["files"][0], "path"), "new.txt");
  EXPECT_EQ(Python(id, "echo nothing written")["files"].Size(), 0u);
}

TEST_F(SessionApiTest, FilesStagedIntoALiveSessionAreInItsWorkspace) {
  std::string id = Create();
  std::string data = Upload("data.txt", "staged later");
  HttpReply staged =
      client().Post("/v1/sessions/" + id + "/files",
                    R"({"files": [{"path": "d/data.txt", "file_id": ")" + data + R"("}]})");
  EXPECT_EQ(staged.status, 204) << staged.body;
  EXPECT_EQ(Str(Json(Bash(id, "cat d/data.txt")), "stdout"), "staged later");
}

TEST_F(SessionApiTest, ASessionEndsAtItsTtl) {
  std::string id = Create(R"({"ttl_seconds": 1})");
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.destroyed == 1; }));
  EXPECT_EQ(client().Get("/v1/sessions/" + id + "/files").status, 404);
  EXPECT_EQ(Json(client().Get("/v1/sessions"))["sessions"].Size(), 0u);
}

TEST_F(SessionApiTest, ASandboxThatDiedAnswers410AndEndsTheSession) {
  std::string id = Create();
  HttpReply r = Bash(id, "vanish");
  EXPECT_EQ(r.status, 410);
  EXPECT_NE(Str(Json(r), "detail").find("ended: its sandbox stopped unexpectedly"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(fake().counts().destroyed, 1);
  EXPECT_EQ(Bash(id, "echo again").status, 404);
}

TEST_F(SessionApiTest, ASessionDeletedDuringACallAnswersTheCall410) {
  std::string id = Create();
  HttpReply call;
  std::thread caller([&] { call = Bash(id, "sleep"); });
  EXPECT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.runs_started == 1; }));
  EXPECT_EQ(client().Delete("/v1/sessions/" + id).status, 204);
  caller.join();
  EXPECT_EQ(call.status, 410);
  EXPECT_EQ(Str(Json(call), "detail"),
            "Session '" + id + "' ended during this call (deleted, or its TTL ran out)");
}

TEST_F(SessionApiTest, BeyondMaxSessionsIs503WithRetryAfter) {
  Create();
  Create();
  HttpReply r = client().Post("/v1/sessions", "{}");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("retry-after").value_or(""), "13");
  EXPECT_EQ(fake().counts().prepared, 2);
  EXPECT_EQ(
      Metric(
          R"(code_interpreter_executions_rejected_total{operation="session_create",status="503",reason="capacity"})"),
      1);
}

class SessionlessBackendApiTest : public SessionRequests {
 protected:
  void SetUp() override { Start(nullptr, {.sessions = false}); }
};

TEST_F(SessionlessBackendApiTest, EverySessionRouteIs501) {
  HttpReply r = client().Post("/v1/sessions", "{}");
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(Str(Json(r), "detail"), "Sessions are not supported by the 'fake' backend.");
  EXPECT_EQ(client().Get("/v1/sessions").status, 501);
  EXPECT_EQ(Bash("code-session-0", "echo x").status, 501);
}

}  // namespace
}  // namespace ci::daemon
