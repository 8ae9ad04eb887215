// envd's /files (docs/e2b.md "Files"): GET streams a file of the sandbox to the client, POST
// writes one or more (multipart/form-data, each part named "file"; or an application/octet-stream
// body, gzip-encoded or not, chunked or not). Bytes go through envd_files.py in the sandbox
// (file_helper.h) at the client's pace: nothing is held whole in the daemon.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "daemon/e2b/file_helper.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon::e2b {

bool IsFileTransfer(const HttpRequestHead& head);

boost::asio::awaitable<void> HandleFileTransfer(HttpExchange& ex, const FileContext& context,
                                                uint64_t max_upload_bytes);

}  // namespace ci::daemon::e2b
