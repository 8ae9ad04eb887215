#include "container/staging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>

#include "container/tar.h"

namespace ci::container {
namespace {

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

// The tar stream of `files` (folders first, each once), written to `tar -x`'s stdin.
asio::awaitable<Status> WriteTar(ExecStream& stream, const std::vector<StagedFile>& files) {
  const uint32_t uid = 65532, gid = 65532;
  std::set<std::string> dirs;
  std::string chunk(kReadChunk, '\0');
  uint64_t archive_size = 0;  // headers and padded contents so far
  for (const auto& f : files) {
    for (size_t slash = f.workspace_path.find('/'); slash != std::string::npos;
         slash = f.workspace_path.find('/', slash + 1)) {
      std::string dir = f.workspace_path.substr(0, slash);
      if (!dirs.insert(dir).second) continue;
      std::string header = TarHeader(dir, 0, true, 0755, uid, gid);
      archive_size += header.size();
      if (Status w = co_await stream.WriteAll(header); !w.ok()) co_return w;
    }
    int fd = ::open(f.host_path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      Status failed = Status::Errno(f.host_path, errno);
      if (fd >= 0) ::close(fd);
      co_return failed;
    }
    uint64_t size = static_cast<uint64_t>(st.st_size);
    std::string header = TarHeader(f.workspace_path, size, false, 0644, uid, gid);
    std::string pad = TarPadding(size);
    archive_size += header.size() + size + pad.size();
    Status written = co_await stream.WriteAll(header);
    uint64_t left = size;
    while (written.ok() && left > 0) {
      ssize_t n = ::read(fd, chunk.data(), std::min<uint64_t>(left, chunk.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        written = Status::Error("reading " + f.host_path + ": the file shrank");
        break;
      }
      std::string_view piece(chunk.data(), static_cast<size_t>(n));
      written = co_await stream.WriteAll(piece);
      left -= static_cast<uint64_t>(n);
    }
    ::close(fd);
    if (!written.ok()) co_return written;
    if (Status w = co_await stream.WriteAll(pad); !w.ok()) co_return w;
  }
  std::string trailer = TarTrailer(archive_size);
  co_return co_await stream.WriteAll(trailer);
}

}  // namespace

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

asio::awaitable<Status> StageFiles(const Container& c, const std::vector<StagedFile>& files,
                                   ExecHold hold) {
  if (files.empty()) co_return Status();
  CaptureOptions o;
  o.write_input = [&files](ExecStream& stream) { return WriteTar(stream, files); };
  o.hold = hold;
  const std::vector<std::string> cmd = {"tar", "-x", "-C", c.cwd, "-f", "-"};
  auto tar = co_await CaptureExec(c, cmd, std::move(o));
  if (!tar.ok()) co_return tar.status();
  if (hold.Killed()) co_return Status::Error("sandbox killed");
  if (!tar->exit_code.ok()) co_return tar->exit_code.status();
  const std::optional<int>& code = *tar->exit_code;
  if (!code.has_value() || *code != 0) {
    const std::string& errors = tar->output;
    co_return Status::Error("tar -x failed" + (errors.empty() ? "" : ": " + errors) +
                            (tar->input.ok() ? "" : " (" + tar->input.message() + ")"));
  }
  if (!tar->input.ok()) co_return tar->input;
  co_return tar->read;
}

}  // namespace ci::container
