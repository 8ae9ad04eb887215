// What a process the agent forks needs before its exec (an exec's program, the fork server):
// NUL-terminated argv and envp over strings that outlive the exec (its signal state:
// core/signal_state.h).
#pragma once

#include <string>
#include <vector>

namespace ci::agent {

struct ExecVectors {
  std::vector<char*> argv, envp;
};

inline ExecVectors VectorsOf(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env) {
  ExecVectors v;
  for (const auto& a : argv) v.argv.push_back(const_cast<char*>(a.c_str()));
  v.argv.push_back(nullptr);
  for (const auto& kv : env) v.envp.push_back(const_cast<char*>(kv.c_str()));
  v.envp.push_back(nullptr);
  return v;
}

}  // namespace ci::agent
