// The ToolSet of this daemon: execute_code runs a program the caller wrote; solve_task, when a
// model is configured, runs the agent loop.
#pragma once

#include "daemon/tools/program_runner.h"
#include "daemon/tools/solve_loop.h"
#include "daemon/tools/tool_set.h"

namespace ci::daemon {

class SandboxTools : public ToolSet {
 public:
  // `solver` null: no model, no solve_task.
  SandboxTools(ProgramRunner& runner, SolveLoop* solver) : runner_(runner), solver_(solver) {}
  void SetSolver(SolveLoop* solver) { solver_ = solver; }

  std::vector<llm::ToolDeclaration> Declarations() const override;
  boost::asio::awaitable<ToolOutcome> Call(const std::string& name,
                                           const std::string& arguments_json,
                                           const std::string& client) override;

 private:
  boost::asio::awaitable<ToolOutcome> ExecuteCode(const std::string& arguments_json,
                                                  const std::string& client);
  boost::asio::awaitable<ToolOutcome> SolveTask(const std::string& arguments_json,
                                                const std::string& client);

  ProgramRunner& runner_;
  SolveLoop* solver_;
};

}  // namespace ci::daemon
