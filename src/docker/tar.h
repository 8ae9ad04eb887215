// Just enough tar to move files through `tar -x` / `tar -c` over exec (wire-protocols.md A.5:
// the archive endpoint cannot see tmpfs mounts): a ustar writer (GNU 'L' records for long
// names) and an incremental reader that hands out regular files only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ci::docker {

// The 512-byte header (preceded by a GNU long-name record when `path` does not fit ustar) of a
// regular file ('0') or directory ('5') owned by uid/gid, mtime 0.
std::string TarHeader(std::string_view path, uint64_t size, bool directory, uint32_t mode,
                      uint32_t uid, uint32_t gid);
// Zero bytes that pad a member of `size` bytes to a 512-byte boundary.
std::string TarPadding(uint64_t size);
// The two zero blocks that end an archive.
std::string TarTrailer();

// Parses a tar stream fed in pieces of any size. Regular files ('0', '\0', '7') are reported as
// Begin(path, size), Data(bytes)..., End(); everything else (directories, links, devices) is
// skipped. Paths are normalised ("./a/b" -> "a/b"); a path that is absolute or has a ".."
// component is an error. GNU long names ('L') and pax path records ('x') are honoured.
class TarReader {
 public:
  struct Callbacks {
    // Returns false to stop reading (limits reached); Feed then returns false too.
    std::function<bool(const std::string& path, uint64_t size)> begin;
    std::function<Status(std::string_view)> data;
    std::function<Status()> end;
  };
  explicit TarReader(Callbacks cb) : cb_(std::move(cb)) {}

  // Feeds bytes; an error status stops everything. Returns ok with stopped()=true when a
  // callback asked to stop.
  Status Feed(std::string_view bytes);
  bool stopped() const { return stopped_; }
  bool finished() const { return finished_; }  // the end-of-archive block was seen

 private:
  Status OnHeader();

  Callbacks cb_;
  std::string header_;      // the current 512-byte header as it fills
  uint64_t remaining_ = 0;  // data bytes of the current member still to come
  uint64_t padding_ = 0;    // padding bytes still to skip
  enum class Mode { kHeader, kFile, kSkip, kLongName, kPax } mode_ = Mode::kHeader;
  std::string meta_;       // a GNU long name or pax record being read
  std::string next_path_;  // from the last 'L' or 'x' record, for the next header
  bool stopped_ = false;
  bool finished_ = false;
};

}  // namespace ci::docker
