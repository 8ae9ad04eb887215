// Server-Sent Events framing: `event: <name>\ndata: <compact JSON>\n\n`.
#pragma once

#include <string>
#include <string_view>

namespace ci::daemon {

// `json` must be compact (no newlines): RapidJSON's Writer never emits raw newlines.
std::string SseFrame(std::string_view event, std::string_view json);

// {"stream":"stdout","data":"..."} for an `output` event.
std::string SseOutputData(bool is_stderr, std::string_view text);

}  // namespace ci::daemon
