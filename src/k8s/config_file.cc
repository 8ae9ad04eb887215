#include "k8s/config_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace ci::k8s {

Result<std::string> ReadConfigFile(const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errno("reading " + path, errno);
  struct stat local;
  if (st == nullptr) st = &local;
  std::string out;
  Status error;
  if (::fstat(fd, st) != 0) {
    error = Status::Errno("reading " + path, errno);
  } else if (S_ISDIR(st->st_mode)) {
    error = Status::Error("reading " + path + ": is a directory");
  } else if (st->st_size > static_cast<off_t>(kMaxConfigFileBytes)) {
    error = Status::Error("reading " + path + ": larger than 4 MiB");
  }
  char buf[8192];
  while (error.ok()) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = Status::Errno("reading " + path, errno);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxConfigFileBytes)
      error = Status::Error("reading " + path + ": larger than 4 MiB");
  }
  ::close(fd);
  if (!error.ok()) return error;
  return out;
}

}  // namespace ci::k8s
