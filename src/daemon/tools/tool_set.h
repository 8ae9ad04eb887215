// The tools a model may call (execute_code, solve_task), as one interface for every caller: the
// function declarations of GET /v1/tools, the MCP server's tools/list and tools/call, and the
// function responses of `code-interpreter ask`.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "llm/conversation.h"

namespace ci::daemon {

// What one call of a tool produced.
struct ToolOutcome {
  // The call could not be made as asked (unknown tool, arguments that are not its schema's, no
  // model configured for solve_task): `text` says why. A program that failed is not an error
  // of the call: its outcome says so in `result_json`.
  bool is_error = false;
  std::string text;         // for a human or a model: the output, or the error
  std::string result_json;  // a JSON object: the tool's structured result ("{}" on error)
  // Images the program made (a chart it drew), for clients that show them: MCP image content.
  struct Image {
    std::string mime_type;
    std::string base64;
  };
  std::vector<Image> images;
};

class ToolSet {
 public:
  virtual ~ToolSet() = default;
  // The declarations of the tools this daemon can run now (solve_task only with a model).
  virtual std::vector<llm::ToolDeclaration> Declarations() const = 0;
  // Runs `name` with `arguments_json` (a JSON object's text) for `client` (whose files; the
  // API key's name or the peer). Views only: the caller's strings outlive the call.
  virtual boost::asio::awaitable<ToolOutcome> Call(const std::string& name,
                                                   const std::string& arguments_json,
                                                   const std::string& client) = 0;
};

}  // namespace ci::daemon
