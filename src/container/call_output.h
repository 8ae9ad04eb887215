// A session's persistent interpreter on docker speaks through its exec's stdio (its only channel,
// see python_session.h and call_server.h): a call goes in as one frame (CallFrame), and each of
// its two output streams ends the call with a marker carrying the call's nonce and the cell's
// status. CallOutput splits one output stream at the marker; bytes outside a call are dropped.
#pragma once

#include <string>
#include <string_view>

namespace ci::container {

// A call as the interpreter reads it on its stdin: [u32 len][request][u32 len][stdin][nonce],
// the lengths little-endian.
std::string CallFrame(std::string_view request, std::string_view input, std::string_view nonce);

class CallOutput {
 public:
  // A new call whose marker carries `nonce` (32 hex digits).
  void Begin(const std::string& nonce);
  // The part of `bytes` that is the call's output; a possible start of the marker is held back
  // until the next bytes tell.
  std::string Feed(std::string_view bytes);
  bool ended() const { return ended_; }
  int status() const { return status_; }  // from the marker: the cell's status (0..255)
  int flags() const { return flags_; }    // bit 0: interrupted at its timeout

 private:
  std::string marker_;  // "\x1e" + nonce, then 3 status digits, 1 flag digit, '\n'
  std::string held_;
  bool active_ = false;
  bool ended_ = false;
  int status_ = 1;
  int flags_ = 0;
};

}  // namespace ci::container
