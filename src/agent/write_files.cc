#include "agent/write_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ci::agent {
namespace {

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string WriteFiles(const std::string& dir,
                       const std::vector<std::pair<std::string, std::string>>& files) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return dir + ": " + std::strerror(errno);
  std::string why;
  for (const auto& [name, content] : files) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      why = name + ": not a file name";
      break;
    }
    int fd =
        ::openat(dfd, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      why = name + ": " + std::strerror(errno);
      break;
    }
    bool written = WriteAll(fd, content);
    int err = errno;
    if (::close(fd) != 0 && written) written = false, err = errno;
    if (!written) {
      why = name + ": " + std::strerror(err);
      break;
    }
  }
  ::close(dfd);
  return why;
}

}  // namespace ci::agent
