// The wire between the daemon and the agent that runs as PID 1 of a Docker container (its attach
// stream: the daemon writes to the agent's stdin, the agent writes to its stdout). Frames are the
// local runtime's ([u8 type][u32 little-endian length][payload], runtime/wire/protocol.h); payloads
// are binary, so that the agent links nothing but libc and libstdc++.
//
// An exec is the agent's counterpart of `docker exec`: a command with its own stdio, numbered by
// the daemon. Strings in payloads are NUL-terminated (argv and environment strings cannot hold a
// NUL); integers are little-endian.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ci::agent {

enum class Msg : uint8_t {
  // daemon -> agent
  kExec = 1,      // ExecRequest
  kStdin = 2,     // u32 id, bytes for the exec's stdin
  kStdinEnd = 3,  // u32 id: the exec's stdin is closed
  kKillAll = 4,   // SIGKILL every process of the container but the agent; a payload lists
                  // the session ids to spare (session_kill.h)
  kRecycle = 5,   // end every exec and put the container back as it started (recycle.h)
  kZygote = 6,    // ExecRequest (id 0) of the container's Python fork server (python_fork_server.h)
  kWriteFiles = 7,     // WriteFilesRequest: files the agent writes itself (write_files.h)
  kHello = 8,          // [u32 the daemon's wire version], answered by kReady (see kOutputWindow)
  kEgressListen = 9,   // u32 port: accept on 127.0.0.1:port for the egress proxy (egress_relay.h)
  kEgressStop = 20,    // no more egress: the listener and every relayed connection close
  kReadCounters = 21,  // u32 id, u8 CounterExtras: the cgroup's counters (counter_files.h)
  kListDir = 22,       // u32 id, a directory's path: its first entries (kMaxListed), kDirListed
  kOutputAck = 24,     // u32 id, u32 count: that many of the exec's output bytes were taken
  // agent -> daemon
  kReady = 10,         // u32 wire version: the agent is serving (at its start, and per kHello)
  kOutput = 11,        // u32 id, u8 stream (1 stdout, 2 stderr), bytes
  kExited = 12,        // u32 id, i32 status (exit code, or 128+N for a death by signal N)
  kRecycled = 13,      // u8 ok, then why not (text), or with ok a note (the fork server replaced)
  kNotStarted = 14,    // u32 id, why (text): the exec could not start (no pipe, no free pid)
  kStarted = 15,       // u32 id: the exec's process was forked
  kFilesWritten = 16,  // u32 id, why not (text; empty: all written)
  kEgressListening = 17,  // why not (text; empty: listening), the answer to kEgressListen
  kEgressOpen = 18,       // u32 conn: a program connected to the egress port
  kCountersRead = 19,     // u32 id, the counters as text (counter_files.h), kReadCounters' answer
  kDirListed = 23,        // u32 id, u8 ok, then entries ([u8 d_type][name]\0 each) or why not
  // both ways, of one relayed connection (egress_relay.h)
  kEgressData = 30,   // u32 conn, bytes
  kEgressAck = 31,    // u32 conn, u32 count: that many of the other side's bytes were delivered
  kEgressEnd = 32,    // u32 conn: the sender reads no more (its side's EOF); a half close
  kEgressClose = 33,  // u32 conn: gone (an error, a reset); the receiver closes its end
};

inline constexpr uint32_t kWireVersion = 6;
// The first wire version whose agents answer kReadCounters and kListDir and take kOutputAck (a
// pod's agent is whatever its image holds: the daemon sends those only to agents that said this
// or later, and an agent holds an exec's output to kOutputWindow only for a daemon whose kHello
// said so).
inline constexpr uint32_t kWindowedWireVersion = 6;

// What an exec's output may have in flight, not acknowledged by kOutputAck (taken by its reader,
// at the reader's pace), so that a slow reader (a client downloading a file) bounds the daemon's
// memory; kOutputAckAll lifts it (a stream nobody reads any more).
inline constexpr uint32_t kOutputWindow = 1u << 20;
inline constexpr uint32_t kOutputAckAll = 0xffffffffu;

// At most this many entries in a kDirListed (enough to tell an empty workspace from another).
inline constexpr uint32_t kMaxListed = 8;

// kReadCounters' flags: what the agent adds after the counter files.
enum CounterExtras : uint8_t {
  kCountProcesses = 1,  // "@cgroup.procs": how many processes the cgroup holds
  kProcessesCpu = 2,    // "@procs.cpu": the CPU ticks of every process of the sandbox but the agent
};

// What a relayed connection's sender may have in flight, not acknowledged (both ways), so that
// a slow reader on one side bounds the memory of the other.
inline constexpr uint32_t kEgressWindow = 256u << 10;

// The image label naming the agent's path in executor images that have one, and the label value
// when the image's agent speaks this wire (kWireVersion).
inline constexpr const char* kAgentPathLabel = "code-interpreter.agent";
inline constexpr const char* kAgentWireLabel = "code-interpreter.agent-wire";

struct ExecRequest {
  uint32_t id = 0;
  bool attach_stdin = false;  // false: stdin is /dev/null
  std::string cwd;
  std::vector<std::string> argv;  // argv[0] looked up in PATH
  std::vector<std::string> env;   // "K=V", over the agent's own environment
  // A Python program (`python3 -c SOURCE ARGS...`) forked from the fork server (kZygote) instead
  // of exec'd; refused (kNotStarted) when there is none.
  bool from_zygote = false;
};

std::string EncodeExec(const ExecRequest& r);
std::optional<ExecRequest> DecodeExec(std::string_view payload);

// Files written into `dir` by the agent itself, without an exec (a program's code before its go).
struct WriteFilesRequest {
  uint32_t id = 0;
  std::string dir;
  std::vector<std::pair<std::string, std::string>> files;  // name in `dir`, content (any bytes)
};

std::string EncodeWriteFiles(const WriteFilesRequest& r);
std::optional<WriteFilesRequest> DecodeWriteFiles(std::string_view payload);

// u32 id followed by `rest` (kStdin, kStdinEnd, the egress frames).
std::string WithId(uint32_t id, std::string_view rest = {});
std::string EncodeOutput(uint32_t id, int stream, std::string_view bytes);
std::string EncodeExited(uint32_t id, int32_t status);
// The id and what follows it; nullopt when the payload is too short.
std::optional<std::pair<uint32_t, std::string_view>> SplitId(std::string_view payload);

struct Output {
  uint32_t id = 0;
  int stream = 0;
  std::string_view bytes;
};
std::optional<Output> DecodeOutput(std::string_view payload);
std::optional<std::pair<uint32_t, int32_t>> DecodeExited(std::string_view payload);
// kEgressAck: the connection and the count.
std::string EncodeAck(uint32_t conn, uint32_t count);
std::optional<std::pair<uint32_t, uint32_t>> DecodeAck(std::string_view payload);

// kDirListed: a directory's first entries, or why they could not be listed (`why` not empty).
struct DirEntry {
  uint8_t type = 0;  // dirent's d_type (DT_REG, DT_DIR, ...)
  std::string name;
};
struct DirListing {
  uint32_t id = 0;
  std::vector<DirEntry> entries;
  std::string why;
};
std::string EncodeDirListed(const DirListing& l);
std::optional<DirListing> DecodeDirListed(std::string_view payload);

// One frame, header and payload.
std::string Frame(Msg type, std::string_view payload);

// Cuts frames off the front of a byte stream as they complete.
class FrameReader {
 public:
  void Feed(std::string_view bytes) { buf_.append(bytes); }
  // The next whole frame, or false when more bytes are needed. `bad` is set when a frame is
  // longer than the protocol allows (a corrupt stream).
  bool Next(Msg* type, std::string* payload, bool* bad);

 private:
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace ci::agent
