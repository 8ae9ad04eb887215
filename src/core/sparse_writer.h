// Writes a new file front to back and leaves a hole wherever a whole block would be zeros, so a
// sparse file from a sandbox (`truncate(99 << 20)`, a few bytes) costs the host's disk what it
// cost in the sandbox, not its apparent size. Used by everything that writes into the file store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ci {

class SparseWriter {
 public:
  // Zero blocks are skipped, not written: correct only for a new, empty file (O_EXCL).
  static constexpr uint64_t kBlock = 4096;

  // `fd` is not owned; `what` names the file in errors.
  SparseWriter(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}

  // The next `data.size()` bytes of the file.
  Status Write(std::string_view data);
  // The next `n` bytes are zeros (a hole in the source).
  Status Hole(uint64_t n);
  // Writes what is pending and sets the file's length (a trailing hole is an ftruncate).
  Status Finish();

  uint64_t size() const { return size_; }            // apparent size so far
  uint64_t allocated() const { return allocated_; }  // bytes actually written, whole blocks

 private:
  Status FlushBlock();  // the carried partial block, once full or at Finish
  Status WriteAt(const char* data, size_t n, uint64_t offset);

  int fd_;
  std::string what_;
  uint64_t size_ = 0;       // bytes given so far (Write + Hole)
  uint64_t allocated_ = 0;  // whole blocks written, in bytes
  std::string carry_;       // start of the block at offset size_ - carry_.size(), not yet written
};

}  // namespace ci
