// JSON bodies of the API's responses (docs/api.md), built with RapidJSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/executor.h"
#include "daemon/api/deployment_info.h"
#include "daemon/files/file_store.h"
#include "daemon/service/execution_service.h"
#include "daemon/service/verdict.h"
#include "daemon/sessions/session_manager.h"

namespace ci::daemon {

struct OutputSummary {
  const std::string* stdout_text = nullptr;  // null in SSE `result` events (output was streamed)
  const std::string* stderr_text = nullptr;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  Verdict verdict = Verdict::kOk;
};

// The /v1/execute body, or the SSE `result` data when the texts are null.
std::string ExecuteResultJson(const ExecutionResult& result, const OutputSummary& output);

std::string FileMetaJson(const FileMeta& meta,
                         bool with_upload_time);  // upload response / list item
std::string FileListJson(const std::vector<FileMeta>& files);

std::string LanguagesJson(const std::vector<Language>& languages);

struct HealthInfo {
  bool ok = true;
  std::string message;  // empty when ok
  std::string backend;
  std::string network_isolation;
  std::string egress;  // the default egress policy ("none"), and its bound (docs/egress.md)
  std::string session_snapshots;  // what a paused session keeps on disk (snapshot_mode.h)
  Enforcement hardening;
  std::vector<Downgrade> backend_downgrades;  // Executor::downgrades()
  DeploymentInfo deployment;
};
std::string HealthJson(const HealthInfo& info);

// POST /v1/sessions: {"session_id", "expires_at"}; GET /v1/sessions: {"sessions": [...]}.
std::string SessionCreatedJson(const SessionSummary& session);
std::string SessionListJson(const std::vector<SessionSummary>& sessions);
// POST /v1/sessions/{id}/bash
std::string BashResultJson(const RunOutcome& run, const std::string& stdout_text,
                           const std::string& stderr_text);
// GET /v1/sessions/{id}/files
std::string WorkspaceFilesJson(const std::vector<WorkspaceFile>& files);

}  // namespace ci::daemon
