// The body of a chunked HTTP/1.1 answer as plain bytes, decoded as it streams: the proxy passes
// answers that may echo a secret to the sandbox without their chunk framing, which could
// otherwise split a value where the redactor (secret_redactor.h) would not see it whole.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ci::daemon {

class ChunkedDecoder {
 public:
  // The body bytes in `bytes`; false when the framing is malformed (the answer is cut there).
  bool Feed(std::string_view bytes, std::string* body);
  // Whether the last chunk and the trailers have been read.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  State state_ = State::kSize;
  std::string line_;   // a size or trailer line so far
  uint64_t left_ = 0;  // of the current chunk's data
};

}  // namespace ci::daemon
