// The program in a model's answer: models wrap code in Markdown fences and prose however they
// are asked, so the loop takes the code out instead of running the answer as it is.
#pragma once

#include <string>
#include <string_view>

namespace ci::daemon {

// The first fenced block (``` or ~~~) whose info string names `language` ("python", "py",
// "go", "golang", "bash", "sh", "javascript", "js", ...); else the first fenced block of any
// kind; an unterminated fence runs to the end (an answer cut off). Without any fence, the whole
// answer. Trimmed of blank lines around it; "" when the answer holds nothing.
std::string ExtractProgram(std::string_view answer, std::string_view language);

}  // namespace ci::daemon
