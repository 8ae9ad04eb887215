// Connect's protocol as envd's RPC clients speak it (docs/e2b.md "Sandbox plane"), JSON codec
// only: unary calls are a JSON body both ways; server-streaming calls send one envelope
// ([flags u8][length u32 big-endian][JSON]) and get a stream of them, ended by an end-stream
// envelope (flags 0x02) that carries the error, if any.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/http/http_exchange.h"

namespace ci::daemon::e2b {

// Connect's codes (not_found, invalid_argument, ...) and the HTTP status each goes with.
int ConnectHttpStatus(std::string_view code);

// A unary call's error: that status, {"code", "message"}.
HttpResponse ConnectError(std::string_view code, std::string_view message);

// One message of a stream; the stream's end, successful or with an error.
std::string Envelope(std::string_view json);
std::string EndOfStream();
std::string EndOfStream(std::string_view code, std::string_view message);
// A streaming call that fails before it started: 200 and the end of stream alone.
HttpResponse ConnectStreamError(std::string_view code, std::string_view message);

// A streaming call's request: its one envelope's JSON; nullopt with `why` when malformed
// (compressed, truncated, more than one, or an end-stream flag).
std::optional<std::string> UnwrapEnvelope(std::string_view body, std::string* why);

// The streaming calls' headers: Keepalive-Ping-Interval (seconds; envd's 90 without it) and
// Connect-Timeout-Ms, the client's deadline for the call (zero without it: none).
std::chrono::seconds KeepaliveInterval(const HttpRequestHead& head);
std::chrono::milliseconds ConnectTimeout(const HttpRequestHead& head);

// proto3 JSON's bytes: standard or URL-safe base64, padding optional.
std::optional<std::string> DecodeProtoBytes(std::string_view text);

}  // namespace ci::daemon::e2b
