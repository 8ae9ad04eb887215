// E2B's sandbox plane (docs/e2b.md "Sandbox plane"): what the SDK sends to a sandbox's envd and
// code interpreter, routed by the E2b-Sandbox-Id header to one URL (E2B_SANDBOX_URL) and
// authenticated by the sandbox's access token (X-Access-Token, or E2B-Traffic-Access-Token),
// never by an API key: `GET /health`, envd's process.Process (process_rpcs.h), its
// filesystem.Filesystem (filesystem_rpcs.h) and /files (file_transfer.h); the rest answers 501
// naming what is not there yet, in the shape its caller reads (Connect's for RPCs).
#pragma once

#include <boost/asio/awaitable.hpp>

#include "daemon/e2b/code_contexts.h"
#include "daemon/e2b/control_plane.h"
#include "daemon/e2b/process_table.h"

namespace ci::daemon::e2b {

// Whether the request is for a sandbox (it names one in E2b-Sandbox-Id).
bool IsSandboxPlane(const HttpRequestHead& head);

// What the sandbox plane serves from, and its bounds.
struct SandboxPlane {
  ControlPlane& control;
  ProcessTable& processes;
  CodeContexts& contexts;
  SessionManager& sessions;
  const SandboxSpec& spec;
  uint64_t max_body_bytes;    // an RPC's request
  uint64_t max_upload_bytes;  // a POST /files body
};

boost::asio::awaitable<void> HandleSandboxPlane(HttpExchange& ex, const SandboxPlane& plane);

}  // namespace ci::daemon::e2b
