// E2B's code interpreter (docs/e2b.md "Code contexts"): `POST /execute` streams a cell's lines
// (NDJSON, each flushed as the context writes it, `end_of_execution` last); `/contexts` creates,
// lists, restarts and removes contexts. Errors before the stream are plain text, as the SDK
// reads them (404: no such context).
#pragma once

#include <boost/asio/awaitable.hpp>

#include "daemon/e2b/code_contexts.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon::e2b {

bool IsCodeInterpreter(const HttpRequestHead& head);
// The SDK sends no access token to /contexts (E2B's own service takes the sandbox id there).
bool TakesSandboxIdAlone(const HttpRequestHead& head);

boost::asio::awaitable<void> HandleCodeInterpreter(HttpExchange& ex, const FileContext& context,
                                                   CodeContexts& contexts, uint64_t max_body_bytes);

}  // namespace ci::daemon::e2b
