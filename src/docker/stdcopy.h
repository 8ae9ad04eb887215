// The 8-byte stdout/stderr frame format of non-TTY exec streams (wire-protocols.md A.4
// "stdcopy framing"), demultiplexed incrementally: bytes go in as they arrive from the socket,
// in any split, and each payload piece goes out at once (streaming works chunk by chunk).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ci::docker {

class FrameDemuxer {
 public:
  enum class Stream : uint8_t { kStdout = 1, kStderr = 2, kSystemError = 3 };
  using Sink = std::function<void(Stream, std::string_view)>;

  explicit FrameDemuxer(Sink sink) : sink_(std::move(sink)) {}

  // Feeds the next bytes of the stream. Returns false on a malformed header (unknown stream
  // type); the rest of the stream is then ignored.
  bool Feed(std::string_view bytes);
  // True when the stream ended between frames (no half frame pending).
  bool at_boundary() const { return header_len_ == 0 && remaining_ == 0; }
  bool failed() const { return failed_; }

 private:
  Sink sink_;
  std::array<uint8_t, 8> header_{};
  size_t header_len_ = 0;
  uint32_t remaining_ = 0;  // payload bytes of the current frame still to come
  Stream current_ = Stream::kStdout;
  bool failed_ = false;
};

}  // namespace ci::docker
