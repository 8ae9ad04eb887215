// Files through an execution over HTTP against the fake backend: uploaded files staged into the
// workspace, files the program wrote collected back as file ids usable through /v1/files.
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using asio::awaitable;

class FilesApiTest : public DaemonApiTest {
 protected:
  void SetUp() override { Start(); }
  std::string UploadOk(const std::string& name, const std::string& content) {
    HttpReply r = client().Upload(name, content);
    EXPECT_EQ(r.status, 201) << r.body;
    return Str(Json(r), "file_id");
  }
};

TEST_F(FilesApiTest, AnUploadedFileIsStagedAtItsWorkspacePath) {
  std::string id = UploadOk("data.csv", "a,b\n1,2\n");
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.Stdout(p.ReadFile("in/data.csv"));
    co_return p.Exit(0);
  });
  HttpReply r = client().Post(
      "/v1/execute",
      R"({"code": "x", "files": [{"path": "in/data.csv", "file_id": ")" + id + R"("}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Str(Json(r), "stdout"), "a,b\n1,2\n");
}

TEST_F(FilesApiTest, AFileTheProgramWroteComesBackAsADownloadableFileId) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.WriteFile("out/result.txt", "42\n");
    co_return p.Exit(0);
  });
  HttpReply r = client().Post("/v1/execute", R"({"code": "x"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = Json(r);
  ASSERT_EQ(j["files"].Size(), 1u);  // the entrypoint is not collected
  EXPECT_EQ(Str(j["files"][0], "path"), "out/result.txt");
  EXPECT_FALSE(j["files_truncated"].GetBool());
  HttpReply file = client().Get("/v1/files/" + Str(j["files"][0], "file_id"));
  EXPECT_EQ(file.status, 200);
  EXPECT_EQ(file.body, "42\n");
}

TEST_F(FilesApiTest, AStagedFileTheProgramLeftAloneIsNotReturned) {
  std::string kept = UploadOk("kept.txt", "same");
  std::string changed = UploadOk("changed.txt", "before");
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.WriteFile("changed.txt", "after");
    co_return p.Exit(0);
  });
  HttpReply r =
      client().Post("/v1/execute", R"({"code": "x", "files": [)"
                                   R"({"path": "kept.txt", "file_id": ")" +
                                       kept + R"("}, {"path": "changed.txt", "file_id": ")" +
                                       changed + R"("}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = Json(r);
  ASSERT_EQ(j["files"].Size(), 1u);
  EXPECT_EQ(Str(j["files"][0], "path"), "changed.txt");
  EXPECT_EQ(client().Get("/v1/files/" + Str(j["files"][0], "file_id")).body, "after");
}

TEST_F(FilesApiTest, AnUnknownFileIdIs404BeforeAnySandbox) {
  HttpReply r = client().Post(
      "/v1/execute",
      R"({"code": "x", "files": [{"path": "a.txt", "file_id": "00000000-0000-4000-8000-000000000000"}]})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Str(Json(r), "detail"),
            "File with ID '00000000-0000-4000-8000-000000000000' not found for path 'a.txt'.");
  EXPECT_EQ(fake().counts().prepared, 0);
}

TEST_F(FilesApiTest, AnUploadIsListedAndDeleted) {
  std::string id = UploadOk("notes.txt", "hello");
  auto list = Json(client().Get("/v1/files"));
  ASSERT_EQ(list["files"].Size(), 1u);
  EXPECT_EQ(Str(list["files"][0], "filename"), "notes.txt");
  EXPECT_EQ(client().Delete("/v1/files/" + id).status, 204);
  EXPECT_EQ(client().Get("/v1/files/" + id).status, 404);
}

}  // namespace
}  // namespace ci::daemon
