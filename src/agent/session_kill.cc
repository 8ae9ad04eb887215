#include "agent/session_kill.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The whole file: a name may hold newlines, and `)`s (the fields follow the last one).
bool ReadStat(pid_t pid, ProcStat* st) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  st->comm = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 1));
  pid_t ppid = 0, pgrp = 0;
  return static_cast<bool>(rest >> st->state >> ppid >> pgrp >> st->session);
}

// Dead: a zombie whose threads are all gone. A thread-group leader that ended while its other
// threads run shows Z too, and a signal to it still reaches them.
bool Dead(pid_t pid, char state) {
  if (state != 'Z' && state != 'X') return false;
  const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("\nThreads:");
  return at == std::string::npos || std::strtol(status.c_str() + at + 9, nullptr, 10) <= 1;
}

// A live zombie leader shows Z however stopped its threads are: a SIGSTOP to it is sent, but
// not counted as found (another pass would only send it again).
bool StaysZ(int sig, char state) { return sig == SIGSTOP && state == 'Z'; }

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

// SIGSTOP, then SIGKILL, to every live process but the agent and those `spare(pid, stat)` keeps
// (`stat` null when unreadable), each pass repeated until it finds nothing.
template <typename Spare>
void KillPasses(Spare spare) {
  const pid_t self = ::getpid();
  for (int sig : {SIGSTOP, SIGKILL}) {
    for (int round = 0; round < 100; ++round) {
      bool found = false;
      for (pid_t pid : Pids()) {
        ProcStat st;
        const bool known = ReadStat(pid, &st);
        if (pid == self || spare(pid, known ? &st : nullptr)) continue;
        if (known && Dead(pid, st.state)) continue;
        if (known && sig == SIGSTOP && (st.state == 'T' || st.state == 't')) continue;
        if (::kill(pid, sig) == 0 && !StaysZ(sig, st.state)) found = true;
      }
      if (!found) break;
    }
  }
}

}  // namespace

void KillAllButSessions(const std::vector<pid_t>& spared, bool spare_interpreters) {
  // Unreadable: gone since the listing (a process cannot hide its stat from the agent).
  KillPasses([&](pid_t, const ProcStat* st) {
    return st == nullptr || Spared(*st, spared, spare_interpreters);
  });
}

void KillAllBut(pid_t keep) {
  KillPasses([&](pid_t pid, const ProcStat*) { return pid == keep; });  // unreadable: signalled
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
