// Output capping and UTF-8 decoding (docs/api.md "Output limits"). Memory per stream is bounded by
// the cap whatever the program writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ci::daemon {

// Replaces every invalid UTF-8 sequence with U+FFFD (like Python's errors='replace').
std::string SanitizeUtf8(std::string_view bytes);

// Batch mode: keeps at most `cap` bytes; past the cap the result is the first cap-32 bytes plus
// "\n...[truncated]".
class CappedOutput {
 public:
  explicit CappedOutput(size_t cap) : cap_(cap) {}
  void Append(std::string_view chunk);
  bool truncated() const { return total_ > cap_; }
  uint64_t total_bytes() const { return total_; }
  std::string Text() const;  // decoded, truncation marker applied

 private:
  size_t cap_;
  uint64_t total_ = 0;
  std::string kept_;
};

// Streaming mode: passes chunks through as text, capped at `cap` bytes (the rest dropped without a
// marker), holding back a partial UTF-8 sequence at a chunk edge so no character is split.
class Utf8Stream {
 public:
  explicit Utf8Stream(size_t cap) : remaining_(cap) {}
  std::string Push(std::string_view chunk);  // text ready to send (may be empty)
  std::string Flush();                       // whatever was held back, at the end
  bool truncated() const { return truncated_; }

 private:
  size_t remaining_;
  bool truncated_ = false;
  std::string pending_;  // at most 3 bytes of an incomplete sequence
};

}  // namespace ci::daemon
