// The code contexts of E2B's sandboxes as the code interpreter serves them (docs/e2b.md "Code
// contexts"): each an interpreter (code_context.py: Python, or a JavaScript or bash kernel it
// runs) started in the sandbox as one of its processes and kept by sandbox and id; a sandbox's
// default one per language is made on its first cell in that language. Cells of one context run
// one at a time, in order; each streams E2B's /execute lines to its caller.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "daemon/e2b/file_helper.h"

namespace ci::daemon::e2b {

struct ContextInfo {
  std::string id;
  std::string language;
  std::string cwd;
};

struct Cell {
  std::string code;
  std::map<std::string, std::string> env_vars;
};

// Gets each line of the cell's stream (an E2B /execute JSON object, without its newline); a
// false return says the client is gone: the cell is interrupted.
using CellLineSink = std::function<boost::asio::awaitable<bool>(std::string)>;
// Called once the cell runs, with what to call if its client leaves (which interrupts it).
using ClientWatch = std::function<void(std::function<void()>)>;

class CodeContexts {
 public:
  // Languages offered, as /execute and /contexts name them.
  static bool Offers(const std::string& language) {
    return language == "python" || language == "javascript" || language == "bash";
  }

  boost::asio::awaitable<std::variant<ContextInfo, RpcError>> Create(const FileContext& c,
                                                                     std::string language,
                                                                     std::string cwd);
  std::vector<ContextInfo> List(const std::string& sandbox) const;
  boost::asio::awaitable<std::optional<RpcError>> Restart(const FileContext& c,
                                                          const std::string& id);
  boost::asio::awaitable<std::optional<RpcError>> Remove(const FileContext& c,
                                                         const std::string& id);
  // Runs the cell in context `id` (nullopt: the sandbox's default one for `language`), its
  // lines to `sink`; an error before the first line (no such context, it could not start).
  boost::asio::awaitable<std::optional<RpcError>> Execute(const FileContext& c,
                                                          std::optional<std::string> id,
                                                          std::string language, Cell cell,
                                                          CellLineSink sink, ClientWatch watch);

  struct Context;
  using ContextPtr = std::shared_ptr<Context>;

 private:
  ContextPtr Find(const std::string& sandbox, const std::string& id) const;
  boost::asio::awaitable<std::optional<RpcError>> Start(const FileContext& c, ContextPtr context);
  boost::asio::awaitable<void> Read(ContextPtr context);
  boost::asio::awaitable<void> Stop(const FileContext& c, const ContextPtr& context, int signal);

  std::map<std::string, std::map<std::string, ContextPtr>> by_sandbox_;
  // (sandbox, language) -> the id of its default context
  std::map<std::pair<std::string, std::string>, std::string> default_of_;
};

}  // namespace ci::daemon::e2b
