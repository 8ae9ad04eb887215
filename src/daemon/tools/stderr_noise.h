// What on a program's stderr is not a failure: the agent loop sends a program back when its
// stderr is not empty, but a Python warning, Node's warnings and Go's informational lines say
// nothing wrong with the answer.
#pragma once

#include <string>
#include <string_view>

namespace ci::daemon {

// `stderr_text` without those lines: Python's warnings module format ("file:12: XWarning: msg"
// and the source line indented under it), Node's "(node:PID) XWarning: ..." with its "(Use `node
// --trace-warnings ...`" hint, and the go command's own "go: downloading|finding|extracting|
// creating|added|upgraded|to add|warning:" lines. Whatever is left is what failed.
std::string WithoutNoise(std::string_view stderr_text);

}  // namespace ci::daemon
