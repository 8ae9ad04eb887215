#include "core/sparse_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ci {
namespace {

bool IsZero(const char* p, size_t n) {
  static const char kZeros[SparseWriter::kBlock] = {};
  while (n > 0) {
    size_t k = n < sizeof kZeros ? n : sizeof kZeros;
    if (std::memcmp(p, kZeros, k) != 0) return false;
    p += k;
    n -= k;
  }
  return true;
}

}  // namespace

Status SparseWriter::WriteAt(const char* data, size_t n, uint64_t offset) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::Errno("writing " + what_, errno);
    data += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status();
}

Status SparseWriter::FlushBlock() {
  const uint64_t offset = size_ - carry_.size();
  Status s;
  if (!IsZero(carry_.data(), carry_.size())) {
    s = WriteAt(carry_.data(), carry_.size(), offset);
    allocated_ += kBlock;
  }
  carry_.clear();
  return s;
}

Status SparseWriter::Write(std::string_view data) {
  while (!data.empty()) {
    if (!carry_.empty() || data.size() < kBlock) {
      // Not at a block boundary, or less than a block: gather the block first.
      size_t n = std::min<size_t>(kBlock - carry_.size(), data.size());
      carry_.append(data.substr(0, n));
      size_ += n;
      data.remove_prefix(n);
      if (carry_.size() == kBlock) {
        if (Status s = FlushBlock(); !s.ok()) return s;
      }
      continue;
    }
    // Block-aligned whole blocks straight from `data`: one pwrite per run of non-zero blocks.
    const size_t whole = data.size() / kBlock * kBlock;
    size_t run_start = 0, run_len = 0;
    for (size_t at = 0; at <= whole; at += kBlock) {
      bool zero = at == whole || IsZero(data.data() + at, kBlock);
      if (!zero) {
        if (run_len == 0) run_start = at;
        run_len += kBlock;
        continue;
      }
      if (run_len > 0) {
        if (Status s = WriteAt(data.data() + run_start, run_len, size_ + run_start); !s.ok()) {
          return s;
        }
        allocated_ += run_len;
        run_len = 0;
      }
    }
    size_ += whole;
    data.remove_prefix(whole);
  }
  return Status();
}

Status SparseWriter::Hole(uint64_t n) {
  if (!carry_.empty()) {
    uint64_t k = std::min<uint64_t>(kBlock - carry_.size(), n);
    carry_.append(static_cast<size_t>(k), '\0');
    size_ += k;
    n -= k;
    if (carry_.size() == kBlock) {
      if (Status s = FlushBlock(); !s.ok()) return s;
    }
  }
  if (n == 0) return Status();
  // Here the position is block-aligned: whole blocks are skipped, the rest starts a block.
  size_ += n / kBlock * kBlock;
  carry_.append(static_cast<size_t>(n % kBlock), '\0');
  size_ += n % kBlock;
  return Status();
}

Status SparseWriter::Finish() {
  if (!carry_.empty()) {
    if (Status s = FlushBlock(); !s.ok()) return s;
  }
  // Skipped zeros at the end are not in the file yet: the length makes them so.
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    return Status::Errno("setting the length of " + what_, errno);
  }
  return Status();
}

}  // namespace ci
