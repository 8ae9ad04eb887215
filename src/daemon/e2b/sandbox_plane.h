// E2B's sandbox plane (docs/e2b.md "Sandbox plane"): what the SDK sends to a sandbox's envd and
// code interpreter, routed by the E2b-Sandbox-Id header to one URL (E2B_SANDBOX_URL) and
// authenticated by the sandbox's access token (X-Access-Token, or E2B-Traffic-Access-Token),
// never by an API key. So far `GET /health`; the rest answers 501 naming what is not there yet,
// in the shape its caller reads (Connect's for envd's RPCs).
#pragma once

#include <boost/asio/awaitable.hpp>

#include "daemon/e2b/control_plane.h"

namespace ci::daemon::e2b {

// Whether the request is for a sandbox (it names one in E2b-Sandbox-Id).
bool IsSandboxPlane(const HttpRequestHead& head);

boost::asio::awaitable<void> HandleSandboxPlane(HttpExchange& ex, ControlPlane& control);

}  // namespace ci::daemon::e2b
