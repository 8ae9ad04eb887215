#include "agent/session_kill.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace ci::agent {
namespace {

struct ProcStat {
  std::string comm;
  char state = '?';
  pid_t session = 0;
};

bool ReadStat(pid_t pid, ProcStat* st) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  st->comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 1));
  pid_t ppid = 0, pgrp = 0;
  return static_cast<bool>(rest >> st->state >> ppid >> pgrp >> st->session);
}

std::vector<pid_t> Pids() {
  std::vector<pid_t> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = ::readdir(d)) {
    if (std::all_of(e->d_name, e->d_name + std::strlen(e->d_name), ::isdigit)) {
      pids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
  }
  ::closedir(d);
  return pids;
}

bool Spared(const ProcStat& st, const std::vector<pid_t>& spared, bool spare_interpreters) {
  if (std::find(spared.begin(), spared.end(), st.session) != spared.end()) return true;
  if (!spare_interpreters) return false;
  ProcStat leader;
  return ReadStat(st.session, &leader) &&
         (leader.comm == "ci-interpreter" || leader.comm == "ci-relay");
}

}  // namespace

void KillAllButSessions(const std::vector<pid_t>& spared, bool spare_interpreters) {
  const pid_t self = ::getpid();
  for (int sig : {SIGSTOP, SIGKILL}) {
    for (int round = 0; round < 100; ++round) {
      bool found = false;
      for (pid_t pid : Pids()) {
        ProcStat st;
        if (pid == self || !ReadStat(pid, &st)) continue;
        if (st.state == 'Z' || st.state == 'X') continue;
        if (sig == SIGSTOP && (st.state == 'T' || st.state == 't')) continue;
        if (Spared(st, spared, spare_interpreters)) continue;
        if (::kill(pid, sig) == 0) found = true;
      }
      if (!found) break;
    }
  }
}

std::vector<pid_t> ParseSessionList(const std::string& text) {
  std::vector<pid_t> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    if (!word.empty() && word.size() < 10 &&
        std::all_of(word.begin(), word.end(), [](char c) { return std::isdigit(c) != 0; })) {
      out.push_back(static_cast<pid_t>(std::stol(word)));
    }
  }
  return out;
}

}  // namespace ci::agent
