// Just enough tar to move files through `tar -x` / `tar -c` over exec (wire-protocols.md A.5:
// the archive endpoint cannot see tmpfs mounts): a ustar writer (GNU 'L' records for long
// names) and an incremental reader that hands out regular files only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::container {

// The 512-byte header (preceded by a GNU long-name record when `path` does not fit ustar) of a
// regular file ('0') or directory ('5') owned by uid/gid, mtime 0.
std::string TarHeader(std::string_view path, uint64_t size, bool directory, uint32_t mode,
                      uint32_t uid, uint32_t gid);
// Zero bytes that pad a member of `size` bytes to a 512-byte boundary.
std::string TarPadding(uint64_t size);
// The two zero blocks that end an archive of `archive_size` bytes so far, padded to a whole
// 10 KiB record as tar writes it: GNU tar reads whole records and stops at the end marker only
// once its record is complete, so a `tar -x` whose stdin never ends (Kubernetes' v4 exec) exits.
std::string TarTrailer(uint64_t archive_size);
inline constexpr uint64_t kTarRecord = 10240;

// Parses a tar stream fed in pieces of any size. Regular files ('0', '\0', '7') are reported as
// Begin(path, size), Data(bytes)..., End(); everything else (directories, links, devices) is
// skipped. Paths are normalised ("./a/b" -> "a/b"); a path that is absolute or has a ".."
// component is an error. GNU long names ('L') and pax path records ('x') are honoured.
// GNU sparse members ('S', what `tar --sparse --format=gnu` writes for a file with holes) are
// regular files too: Begin gets the apparent size, and the holes between the stored pieces come
// as Hole(n) (or as zeros through Data when no Hole is given), so a 50 GiB file that is all hole
// costs a few bytes of stream.
class TarReader {
 public:
  struct Callbacks {
    // Returns false to stop reading (limits reached); Feed then returns false too.
    std::function<bool(const std::string& path, uint64_t size)> begin;
    std::function<Status(std::string_view)> data;
    std::function<Status()> end;
    std::function<Status(uint64_t)> hole = nullptr;  // the next n bytes of the file are zeros
  };
  explicit TarReader(Callbacks cb) : cb_(std::move(cb)) {}

  // Feeds bytes; an error status stops everything. Returns ok with stopped()=true when a
  // callback asked to stop.
  Status Feed(std::string_view bytes);
  bool stopped() const { return stopped_; }
  bool finished() const { return finished_; }  // the end-of-archive block was seen

 private:
  Status OnHeader();
  Status OnSparseExtension();  // one block of a sparse member's map after its header
  Status AddSparseEntries(size_t at, size_t count);
  Status StartSparseData();  // the map is complete: Begin, then the stored pieces
  Status FileData(std::string_view piece);
  Status FileEnd();
  Status Hole(uint64_t n);

  Callbacks cb_;
  std::string header_;      // the current 512-byte header as it fills
  uint64_t remaining_ = 0;  // data bytes of the current member still to come
  uint64_t padding_ = 0;    // padding bytes still to skip
  enum class Mode { kHeader, kSparseMap, kFile, kSkip, kLongName, kPax } mode_ = Mode::kHeader;
  // The current sparse member: its pieces (offset, length) in file order, the piece being
  // read, the file offset reached, and its apparent size. Not sparse: pieces_ is empty.
  struct Piece {
    uint64_t offset, length;
  };
  std::vector<Piece> pieces_;
  size_t piece_ = 0;
  uint64_t logical_ = 0;
  uint64_t real_size_ = 0;
  uint64_t stored_size_ = 0;  // the member's data in the archive (the header's size field)
  std::string sparse_path_;
  bool sparse_ = false;
  std::string meta_;       // a GNU long name or pax record being read
  std::string next_path_;  // from the last 'L' or 'x' record, for the next header
  bool stopped_ = false;
  bool finished_ = false;
};

}  // namespace ci::container
