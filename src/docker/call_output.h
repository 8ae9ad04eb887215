// One output stream (stdout or stderr) of a session's persistent interpreter on docker: its exec
// runs for the session's life, the daemon holds its stdio (the interpreter's only channel, see
// python_session.h), and each call's output ends with a marker carrying the call's nonce and the
// cell's status. This splits the stream at the marker; bytes outside a call are dropped.
#pragma once

#include <string>
#include <string_view>

namespace ci::docker {

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

}  // namespace ci::docker
