#include "agent/list_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ci::agent {

DirListing ListDir(uint32_t id, const std::string& path, uint32_t max) {
  DirListing l;
  l.id = id;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (dir == nullptr) {
    l.why = path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return l;
  }
  while (l.entries.size() < max) {
    errno = 0;
    const dirent* e = ::readdir(dir);
    if (e == nullptr) {
      if (errno != 0) l.why = path + ": " + std::strerror(errno);
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    l.entries.push_back({e->d_type, e->d_name});
  }
  ::closedir(dir);
  if (!l.why.empty()) l.entries.clear();
  return l;
}

}  // namespace ci::agent
