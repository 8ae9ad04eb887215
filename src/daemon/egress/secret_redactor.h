// Masks secret values in a byte stream that comes back to a sandbox (docs/egress.md "Secrets"):
// a server that echoes the request must not hand the proxy's secrets to the program. Each value
// becomes as many '*', so lengths (Content-Length) stay right; a value split across reads is
// found by holding back the last bytes that could begin one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ci::daemon {

class SecretRedactor {
 public:
  explicit SecretRedactor(std::vector<std::string> values);

  // The bytes that can be passed on now, every value among them masked; up to the longest
  // value's length less one are kept for the next call.
  std::string Feed(std::string_view bytes);
  // What was kept, at the stream's end.
  std::string Finish();
  bool empty() const { return values_.empty(); }

 private:
  std::vector<std::string> values_;
  size_t keep_ = 0;     // the longest value's length less one
  std::string held_;    // as received, unmasked: a value may begin in it
  std::string masked_;  // held_'s bytes already known to be part of a value ('*') or not ('\0')
};

}  // namespace ci::daemon
