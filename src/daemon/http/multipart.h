// Incremental multipart/form-data parser (RFC 7578 over RFC 2046).
//
// Upload bodies can be far larger than we are willing to hold in memory, so the parser never
// buffers a part: the caller feeds bytes as they arrive, in chunks of any size, and part data is
// handed on as soon as it cannot be the start of a boundary. Memory stays bounded by the boundary
// length plus the per-part header limit, whatever the size of the parts.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ci::daemon {

struct MultipartPartHeaders {
  std::string name;                     // Content-Disposition `name`
  std::optional<std::string> filename;  // `filename*` (RFC 5987) if decodable, else `filename`
  std::string content_type;             // raw header value; empty when the part has none
};

class MultipartParser {
 public:
  // Every callback may be empty. A callback's error stops the parser and is returned as is.
  struct Callbacks {
    std::function<Status(const MultipartPartHeaders&)> on_part_begin;
    std::function<Status(std::string_view data)> on_part_data;  // may be called many times per part
    std::function<Status()> on_part_end;
  };

  // A part whose header block exceeds this is refused (bounds memory against hostile clients).
  static constexpr size_t kMaxHeaderBytes = 16 * 1024;
  // Transport padding (whitespace between a boundary and its CRLF) accepted before the line is
  // taken for data.
  static constexpr size_t kMaxPadding = 64;

  // Extracts the boundary from a Content-Type value such as `multipart/form-data; boundary="abc"`.
  // Errors read `Invalid multipart body: <why>`.
  static Result<std::string> BoundaryFromContentType(std::string_view content_type);

  MultipartParser(std::string boundary, Callbacks cb);

  // Errors: a malformed body (`Invalid multipart body: <why>`) or a callback's error. After an
  // error every later call returns the same error. Bytes after the closing boundary (the
  // epilogue) are ignored.
  Status Feed(std::string_view chunk);
  // Call at the end of the body: an error unless the closing boundary was seen. A part that was
  // begun but not ended gets no on_part_end; the caller discards it. on_part_end only says that
  // a part's data is complete: the body as a whole is valid once Finish() succeeds.
  Status Finish();
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kPreamble,  // before the first boundary; bytes are discarded
    // After a delimiter: what follows decides whether it was one ("--", or padding then CRLF).
    kAfterBoundary,  // nothing yet
    kCloseDash,      // saw the first '-' of the closing "--"
    kPadding,        // linear whitespace
    kExpectLf,       // saw CR
    kHeaders,        // accumulating a part's header block
    kBody,           // streaming a part's data
    kDone,           // closing delimiter seen; the epilogue is ignored
    kFailed,
  };

  Status Process(std::string_view chunk);
  // Each Scan returns how many bytes of `chunk` it consumed (at least one, unless it changed
  // state).
  Result<size_t> ScanForDelimiter(std::string_view chunk);
  Result<size_t> ScanDelimiterSuffix(std::string_view chunk);
  Result<size_t> ScanHeaders(std::string_view chunk);
  Status RejectDelimiter();
  Status EmitData(std::string_view data);
  size_t PartialDelimiterSuffix(std::string_view data) const;

  std::string delimiter_;  // CRLF "--" boundary
  Callbacks cb_;
  State state_ = State::kPreamble;
  // The tail of the data seen so far that is a proper prefix of the delimiter: held back until
  // the next bytes show whether it is a boundary or data. Starts as CRLF so that a boundary at
  // the very start of the body (no preceding line break) is found like any other.
  std::string held_;
  // Whether the pending delimiter ends a part, and the bytes seen after it, bounded by
  // kMaxPadding: needed to hand them back as data if it turns out not to be a delimiter.
  bool delimiter_in_body_ = false;
  std::string suffix_;
  std::string header_block_;
  Status error_;
};

}  // namespace ci::daemon
