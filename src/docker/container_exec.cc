#include "docker/container_exec.h"

#include <spdlog/spdlog.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fstream>

#include "core/json.h"

namespace ci::docker {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;

// Files that may travel in the program's exec argv instead of a tar exec: top-level names, valid
// UTF-8 without NUL (argv strings; the Engine's JSON decoder would replace other bytes), at most
// kInlineMax together. Returns "path, content" pairs, or nullopt when they must go by tar.
constexpr size_t kInlineMax = 64 << 10;

bool IsUtf8WithoutNul(std::string_view s) {
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};  // no overlong forms
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;  // continuation bytes
    uint32_t cp = c;
    if (c == 0) return false;
    if (c >= 0x80) {
      if ((c & 0xe0) == 0xc0) {
        n = 1, cp = c & 0x1f;
      } else if ((c & 0xf0) == 0xe0) {
        n = 2, cp = c & 0x0f;
      } else if ((c & 0xf8) == 0xf0) {
        n = 3, cp = c & 0x07;
      } else {
        return false;
      }
      if (s.size() - i <= n) return false;
      for (size_t k = 1; k <= n; ++k) {
        auto t = static_cast<unsigned char>(s[i + k]);
        if ((t & 0xc0) != 0x80) return false;
        cp = (cp << 6) | (t & 0x3f);
      }
      if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

std::string StringArray(const std::vector<std::string>& v) {
  std::string s = "[";
  for (const auto& x : v) {
    if (s.size() > 1) s += ',';
    s += JsonQuote(x);  // appended: `"," + string&&` trips GCC 12's false -Werror=restrict
  }
  return s + "]";
}

bool ParseObject(const std::string& body, rapidjson::Document& doc) {
  std::string why;
  return ParseJson(body, doc, why) && doc.IsObject();
}

asio::awaitable<Result<StartedExec>> StartExec(const Container& c,
                                               const std::vector<std::string>& cmd,
                                               bool attach_stdin) {
  std::string body = std::string("{\"AttachStdin\":") + (attach_stdin ? "true" : "false") +
                     ",\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,\"Privileged\":"
                     "false,\"Cmd\":" +
                     StringArray(cmd) + ",\"Env\":" + StringArray(c.env) +
                     ",\"WorkingDir\":" + JsonQuote(c.cwd) + ",\"User\":" + JsonQuote(c.user) + "}";
  std::string path = "/containers/" + c.id + "/exec";
  auto created = co_await c.client->Request("POST", path, body);
  if (!created.ok()) co_return created.status();
  // 404: the container was removed; 409: it is not running. Either way it is gone.
  if (created->status == 404 || created->status == 409) {
    co_return Status::Gone(HttpError("docker exec create", *created).message());
  }
  if (created->status != 201) co_return HttpError("docker exec create", *created);
  rapidjson::Document doc;
  if (!ParseObject(created->body, doc) || !doc.HasMember("Id") || !doc["Id"].IsString()) {
    co_return Status::Error("docker exec create: no Id in the answer");
  }
  StartedExec out;
  out.exec_id = doc["Id"].GetString();
  std::string start_path = "/exec/" + out.exec_id + "/start";
  std::string start_body = "{\"Detach\":false,\"Tty\":false}";
  auto stream = co_await c.client->Hijack(start_path, start_body);
  if (!stream.ok()) co_return stream.status();
  out.stream = std::shared_ptr<RawStream>(std::move(stream).value());
  co_return out;
}

// The exit code from exec inspect; the stream can end a moment before the daemon records it.
asio::awaitable<Result<std::optional<int>>> ExecExitCode(const Container& c,
                                                         const std::string& exec_id) {
  std::string path = "/exec/" + exec_id + "/json";
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto r = co_await c.client->Request("GET", path);
    if (!r.ok()) co_return r.status();
    if (!r->ok()) co_return HttpError("docker exec inspect", *r);
    rapidjson::Document doc;
    if (!ParseObject(r->body, doc)) co_return Status::Error("docker exec inspect: bad JSON");
    bool running = doc.HasMember("Running") && doc["Running"].IsBool() && doc["Running"].GetBool();
    if (!running && doc.HasMember("ExitCode") && doc["ExitCode"].IsInt()) {
      co_return std::optional<int>(doc["ExitCode"].GetInt());
    }
    co_await Sleep(10ms);
  }
  co_return std::optional<int>();
}

// Reads a stream to its end, demultiplexing into `demux`.
// `stop` (may be null) is asked after each read whether to stop early.
asio::awaitable<Status> Pump(RawStream& stream, FrameDemuxer& demux,
                             const std::function<bool()>* stop) {
  std::string buf(kReadChunk, '\0');
  for (;;) {
    boost::system::error_code ec;
    size_t n = co_await stream.ReadSome(asio::buffer(buf), ec);
    if (ec) co_return Status::Error("reading the exec stream: " + ec.message());
    if (n == 0) co_return Status();
    if (!demux.Feed(std::string_view(buf.data(), n))) {
      co_return Status::Error("malformed exec stream frame");
    }
    if (stop != nullptr && (*stop)()) co_return Status();
  }
}

// Sessions (README "Sessions"). `k` stops, then SIGKILLs, every live process but PID 1, the
// shell itself, the pids in $keep and the sessions listed in $bg (the background programs' pids,
// each its own session id: setsid), read from field 6 of /proc/PID/stat (after the last ')', the
// name may hold anything). Each phase is repeated until a pass finds nothing (children forked
// meanwhile); SIGSTOP first, so a fork bomb cannot refill the slots freed one by one. Builtins
// only: it needs no free pid.
const char* const kSessionKillFunction =
    "k() { local s n d p t f; for s in STOP KILL; do for n in {1..100}; do f=; "
    "for d in /proc/[1-9]*; do p=${d#/proc/}; [ \"$p\" = 1 ] || [ \"$p\" = $$ ] && continue; "
    "read -r t 2>/dev/null < \"$d/stat\" || continue; t=${t##*) }; set -- $t; "
    "case \"$s$1\" in *Z|*X|STOPT|STOPt) continue;; esac; "
    "case \" $bg \" in *\" ${4:-x} \"*) continue;; esac; "
    "case \" $keep \" in *\" $p \"*) continue;; esac; "
    "kill -$s \"$p\" 2>/dev/null && f=1; done; [ -n \"$f\" ] || break; done; done; }; ";
// A session run: `ci-run <background pids> <cpu seconds> argv...`. The program gets RLIMIT_CPU
// (soft N, hard N+1 as in container_config.cc) in a subshell of its own. Its stdout and stderr
// are relayed by two `cat`s, so what holds the exec's stream is known: once the program has
// exited and its leftovers are killed, the relays get 500 ms to drain (EOF on fd 7 once both
// are gone: they alone hold its write end, opened through /proc) and are then killed. Without
// them a background program's child that inherited the program's stdout would hold the exec's
// stream, and the Engine would wait 2 s for it on every later exec's exit too (its exit events
// are handled one after the other per container).
const char* const kSessionRunScript =
    "bg=$1 c=$2 keep=; shift 2; exec 7< <(:); exec 8> /proc/$$/fd/7; "
    "exec 5> >(exec cat 7<&-); o=$!; exec 6> >(exec cat >&2 5>&- 7<&-); e=$!; exec 8>&-; "
    "(ulimit -S -t \"$c\" 2>/dev/null; ulimit -H -t $((c + 1)) 2>/dev/null; exec \"$@\") "
    ">&5 2>&6 5>&- 6>&- 7<&-; s=$?; exec 5>&- 6>&-; keep=\"$o $e\"; k; "
    "read -r -t 0.5 -u 7 _ || [ $? -le 128 ] || kill -9 $o $e 2>/dev/null; exit $s";
// A background program: its own session, stdio on /dev/null; prints its pid (= session id) once
// setsid() is done, so the next run's kill cannot miss it. The exec's bash is a session leader
// (runc), so its `&` child is not a group leader and setsid(1) does not fork.
const char* const kStartBackgroundScript =
    "setsid \"$@\" </dev/null >/dev/null 2>&1 & p=$!; for i in {1..400}; do "
    "read -r t 2>/dev/null < /proc/$p/stat || break; t=${t##*) }; set -- $t; "
    "[ \"$4\" = \"$p\" ] && break; sleep 0.005; done; echo $p";

// Kills every process of the sandbox user but PID 1: kill(-1) never reaches the namespace's
// init, nor the caller. PID 1 is our `sleep` (no docker-init, see container_config.cc), so the
// container and its tmpfs workspace survive for Collect. No pkill needed in the image: the
// shell's kill builtin does it.
// `background` (sessions): the background programs' pids, spared.
asio::awaitable<Status> KillSandboxProcesses(const Container& c, const std::string* background) {
  if (background != nullptr) {
    // Sessions spare the background programs. The pids limit may be full (a bomb still
    // running): raise it a little for this exec, as the counters probe does, then restore it.
    std::string script = std::string(kSessionKillFunction) + "k";
    std::vector<std::string> cmd = {"/bin/bash", "-c", "bg=$1; " + script, "ci-kill", *background};
    Status s;
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::string update = "/containers/" + c.id + "/update", method = "POST";
      if (attempt > 0) {
        std::string body = "{\"PidsLimit\":" +
                           std::to_string(c.pids_limit + 16u * static_cast<uint32_t>(attempt)) +
                           "}";
        auto u = co_await c.client->Request(method, update, body);
        (void)u;
        co_await Sleep(20ms);
      }
      auto started = co_await StartExec(c, cmd, false);
      if (!started.ok()) {
        s = started.status().Context("killing the program");
        continue;
      }
      FrameDemuxer ignore([](FrameDemuxer::Stream, std::string_view) {});
      s = co_await Pump(*started->stream, ignore);
      if (attempt > 0) {
        std::string body = "{\"PidsLimit\":" + std::to_string(c.pids_limit) + "}";
        auto u = co_await c.client->Request(method, update, body);
        (void)u;
      }
      break;
    }
    co_return s;
  }
  std::vector<std::string> cmd = {"/bin/sh", "-c", "kill -9 -1"};
  auto started = co_await StartExec(c, cmd, false);
  if (!started.ok()) co_return started.status().Context("killing the program");
  FrameDemuxer ignore([](FrameDemuxer::Stream, std::string_view) {});
  Status s = co_await Pump(*started->stream, ignore);
  co_return s;
}

std::optional<std::vector<std::string>> InlineFiles(const std::vector<StagedFile>& files) {
  std::vector<std::string> out;
  size_t total = 0;
  for (const auto& f : files) {
    if (f.workspace_path.find('/') != std::string::npos) return std::nullopt;
    std::ifstream in(f.host_path, std::ios::binary);
    std::string content(kInlineMax - total + 1, '\0');
    in.read(content.data(), static_cast<std::streamsize>(content.size()));
    if (in.bad() || !in.eof()) return std::nullopt;  // unreadable (tar reports it) or too big
    content.resize(static_cast<size_t>(in.gcount()));
    if (!IsUtf8WithoutNul(content)) return std::nullopt;
    total += content.size();
    out.push_back(f.workspace_path);
    out.push_back(std::move(content));
  }
  return out;
}

}  // namespace ci::docker
