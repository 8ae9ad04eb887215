// A scratch directory for the connection tests: files written below it, removed at the end.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ci::k8s {

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/ci-k8s-conn-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  ~ScratchDir() { std::filesystem::remove_all(root_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

  // Writes `rel` (creating its directories) and returns its absolute path.
  std::string Write(const std::string& rel, const std::string& text) const {
    std::string path = Path(rel);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }

  // Replaces `rel` the way the kubelet rotates a projected token: a new file renamed over it,
  // so the old content is never half-written.
  void Replace(const std::string& rel, const std::string& text) const {
    Write(rel + ".new", text);
    std::filesystem::rename(Path(rel + ".new"), Path(rel));
  }

  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace ci::k8s
