// The wire format shared by the daemon and the shim. Every message is one frame:
//   [u8 type][u32 little-endian payload length][payload]
// Control payloads are JSON (messages.h); file contents travel as raw kFileChunk payloads of at
// most kChunkSize bytes, so neither side ever holds a whole file in memory.
//
// fd 3 (lifecycle socket, daemon <-> shim parent): kPlan ->, kKill ->, <- kReport.
// fd 4 (service socket, daemon <-> sandbox init): everything else. Setup failures of the shim
// parent are written on fd 4 too, so Prepare() has a single channel to wait on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ci::runtime::proto {

enum class Msg : uint8_t {
  kPlan = 1,            // daemon -> shim: the sandbox plan (JSON)
  kKill = 2,            // daemon -> shim: SIGKILL the sandbox now
  kReport = 3,          // shim -> daemon: cgroup verdict after the sandbox is gone (JSON)
  kInit = 4,            // zygote -> daemon: init's host pid (decimal) once the sandbox started
  kSetupError = 10,     // shim/init -> daemon: {stage, errno, message}
  kReady = 11,          // init -> daemon: sandbox built, waiting for a payload
  kFileBegin = 12,      // both ways: {path, size}
  kFileChunk = 13,      // both ways: raw bytes
  kFileEnd = 14,        // both ways
  kRun = 15,            // daemon -> init: {argv, env, cwd, cpu_time_sec}
  kStarted = 16,        // init -> daemon: the program was forked (the timeout starts)
  kKillProgram = 17,    // daemon -> init: timeout, kill everything but init
  kExited = 18,         // init -> daemon: {exit_code | signal, cpu_ms, max_rss_kb, killed}
  kCollect = 19,        // daemon -> init: {max_files, max_total_bytes, skip_path}
  kCollectDone = 20,    // init -> daemon: {truncated}
  kExit = 21,           // daemon -> init: tear down (init exits, the pid namespace dies)
  kError = 22,          // init -> daemon: {message}, an operation failed but init is alive
  kPipes = 23,          // daemon -> init (sessions): the next program's stdin/stdout/stderr, as
                        // three fds attached to this empty frame (SCM_RIGHTS)
  kPrestartEnded = 24,  // init -> daemon: answers a resume; the prestarted program ended before
                        // its run ({message}): the sandbox is of no use
  kProcessFds = 25,     // daemon -> init (sessions): the next process's stdin, stdout, stderr and
                        // status pipe, as four fds attached to this empty frame
  kSpawn = 26,          // daemon -> init: start a process ({argv, env, cwd}) with them
  kSpawned = 27,        // init -> daemon: {pid}; its end comes on its status pipe (an Exited)
  kSignal = 28,         // daemon -> init: {pid, signal} to a process started so
  kSignalled = 29,      // init -> daemon: done (or it had ended already)
  kEgressListen = 30,   // daemon -> init: a listening TCP socket on 127.0.0.1:<port, decimal>
                        // inside the sandbox's network namespace (docs/egress.md)
  kEgressSocket = 31,   // init -> daemon: that socket, attached to this empty frame
  kRecycle = 32,        // daemon -> init (executions): put the sandbox back as it started
  kRecycled = 33,       // init -> daemon: done; else kError says why (the daemon removes it)
};

constexpr size_t kHeaderSize = 5;
constexpr uint32_t kMaxPayload = 1u << 20;
constexpr size_t kChunkSize = 64u << 10;

void EncodeHeader(Msg type, uint32_t length, unsigned char out[kHeaderSize]);
// False when the length exceeds kMaxPayload (a corrupt or hostile peer).
bool DecodeHeader(const unsigned char in[kHeaderSize], Msg* type, uint32_t* length);
const char* MsgName(Msg type);

// Blocking I/O for the shim side (single-threaded, no asio). Both retry on EINTR and partial
// transfers. They return 0 on success, ENODATA on a clean EOF before a frame, or an errno.
// ReadFrame takes descriptors passed with the frame (SCM_RIGHTS, close-on-exec) into `fds`, or
// closes them when `fds` is null.
int WriteFrame(int fd, Msg type, std::string_view payload);
int ReadFrame(int fd, Msg* type, std::string* payload, std::vector<int>* fds = nullptr);

}  // namespace ci::runtime::proto
