#include "runtime/wire/protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/wire/fd_passing.h"

namespace ci::runtime::proto {
namespace {

int WriteAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

void EncodeHeader(Msg type, uint32_t length, unsigned char out[kHeaderSize]) {
  out[0] = static_cast<unsigned char>(type);
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<unsigned char>(length >> (8 * i));
}

bool DecodeHeader(const unsigned char in[kHeaderSize], Msg* type, uint32_t* length) {
  *type = static_cast<Msg>(in[0]);
  *length = 0;
  for (int i = 0; i < 4; ++i) *length |= static_cast<uint32_t>(in[1 + i]) << (8 * i);
  return *length <= kMaxPayload;
}

const char* MsgName(Msg type) {
  switch (type) {
    case Msg::kPlan:
      return "plan";
    case Msg::kKill:
      return "kill";
    case Msg::kReport:
      return "report";
    case Msg::kSetupError:
      return "setup_error";
    case Msg::kReady:
      return "ready";
    case Msg::kFileBegin:
      return "file_begin";
    case Msg::kFileChunk:
      return "file_chunk";
    case Msg::kFileEnd:
      return "file_end";
    case Msg::kRun:
      return "run";
    case Msg::kStarted:
      return "started";
    case Msg::kKillProgram:
      return "kill_program";
    case Msg::kExited:
      return "exited";
    case Msg::kCollect:
      return "collect";
    case Msg::kCollectDone:
      return "collect_done";
    case Msg::kExit:
      return "exit";
    case Msg::kError:
      return "error";
    case Msg::kPipes:
      return "pipes";
    case Msg::kPrestartEnded:
      return "prestart_ended";
    case Msg::kInit:
      return "init";
    case Msg::kProcessFds:
      return "process_fds";
    case Msg::kSpawn:
      return "spawn";
    case Msg::kSpawned:
      return "spawned";
    case Msg::kSignal:
      return "signal";
    case Msg::kEgressListen:
      return "egress_listen";
    case Msg::kEgressSocket:
      return "egress_socket";
    case Msg::kRecycle:
      return "recycle";
    case Msg::kRecycled:
      return "recycled";
    case Msg::kSignalled:
      return "signalled";
  }
  return "unknown";
}

int WriteFrame(int fd, Msg type, std::string_view payload) {
  if (payload.size() > kMaxPayload) return EMSGSIZE;
  unsigned char header[kHeaderSize];
  EncodeHeader(type, static_cast<uint32_t>(payload.size()), header);
  // One write for small frames keeps a frame from being interleaved on the wire with nothing
  // else (only one writer per side anyway) and saves a syscall.
  if (payload.size() <= 4096) {
    unsigned char buf[kHeaderSize + 4096];
    for (size_t i = 0; i < kHeaderSize; ++i) buf[i] = header[i];
    for (size_t i = 0; i < payload.size(); ++i) buf[kHeaderSize + i] = payload[i];
    return WriteAll(fd, buf, kHeaderSize + payload.size());
  }
  if (int err = WriteAll(fd, header, kHeaderSize); err != 0) return err;
  return WriteAll(fd, payload.data(), payload.size());
}

int ReadFrame(int fd, Msg* type, std::string* payload, std::vector<int>* fds) {
  unsigned char header[kHeaderSize];
  if (int err = ReceiveWithFds(fd, header, kHeaderSize, fds); err != 0) return err;
  uint32_t length = 0;
  if (!DecodeHeader(header, type, &length)) return EMSGSIZE;
  payload->resize(length);
  if (length == 0) return 0;
  int err = ReceiveWithFds(fd, payload->data(), length, fds);
  return err == ENODATA ? EPIPE : err;
}

}  // namespace ci::runtime::proto
