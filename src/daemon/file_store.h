// The file store behind /v1/files: uploaded files and files collected from sandboxes.
//
// Layout under the store directory: `<id>` (data) and `<id>.json` (metadata) per file, and
// `.tmp/` for files being written. A file becomes visible only once both are in place, and the
// data is renamed into place last, after it is complete and fsynced, so a crash never leaves a
// half file behind a valid id. The directory belongs to one daemon process: Open() deletes
// leftovers of a crash, which would also delete another live process's files in progress.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci {

struct FileMeta {
  std::string file_id;   // canonical lowercase UUIDv4
  std::string filename;  // as given by the user; any bytes, never used as a path
  uint64_t size_bytes = 0;
  double upload_time = 0;  // unix seconds
  std::string data_path;   // absolute path of the data file
};

// Thread-safe. Upload objects must not outlive the store that made them.
class FileStore {
 public:
  // Creates `dir` (0700) and `dir/.tmp`, and removes what a crash may have left: temp files and
  // data or metadata files without their counterpart.
  static Result<std::unique_ptr<FileStore>> Open(const std::string& dir);

  // A canonical UUID (8-4-4-4-12 hex digits, either case). Anything else is "not found" to the
  // API and is never joined onto a path.
  static bool IsValidId(std::string_view id);

  // A file being written, in a temp file under `.tmp`. Destroying it without a successful
  // Commit() deletes the temp file.
  class Upload {
   public:
    ~Upload();
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;

    // Once more than max_bytes would have been written this fails with
    // `File size exceeds maximum of <N> MB` (N = max_bytes / 1 MiB), deletes the temp file and
    // refuses any further call.
    Status Write(std::string_view data);
    // Makes the file visible under a new id. An empty filename is stored as "unnamed".
    Result<FileMeta> Commit(std::string filename);
    uint64_t bytes_written() const { return written_; }

   private:
    friend class FileStore;
    Upload(FileStore* store, int fd, std::string temp_path, uint64_t max_bytes);
    void Discard();

    FileStore* store_;
    int fd_;
    std::string temp_path_;
    uint64_t max_bytes_;
    uint64_t written_ = 0;
    Status error_;
    bool finished_ = false;  // committed or discarded
  };

  Result<std::unique_ptr<Upload>> BeginUpload(uint64_t max_bytes);

  // Moves a regular file (never a symlink) into the store under a new id: a rename when it is on
  // the store's filesystem (see incoming_dir()), else a copy after which the source is deleted.
  Result<FileMeta> AdoptFile(const std::string& host_path, std::string filename);

  std::optional<FileMeta> Get(std::string_view id) const;  // nullopt when invalid or absent
  std::vector<FileMeta> List() const;                      // oldest first
  bool Delete(std::string_view id);                        // false when invalid or absent
  // Deletes files whose age at `now` (unix seconds) exceeds max_age_seconds; returns how many.
  size_t SweepOlderThan(double max_age_seconds, double now);

  // A directory on the store's filesystem where callers may create files to AdoptFile() later
  // (so that adopting is a rename). Files left there are deleted by the next Open().
  std::string incoming_dir() const { return tmp_dir_; }

 private:
  explicit FileStore(std::string dir);

  std::string DataPath(std::string_view id) const { return dir_ + "/" + std::string(id); }
  std::string MetaPath(std::string_view id) const { return DataPath(id) + ".json"; }
  std::optional<FileMeta> LoadLocked(const std::string& id) const;
  // Writes the metadata and renames `temp_data` into place under a fresh id (caller holds mu_).
  Result<FileMeta> PublishLocked(const std::string& temp_data, std::string filename, uint64_t size);
  Result<std::string> NewTempPath(std::string_view prefix) const;

  std::string dir_;
  std::string tmp_dir_;
  mutable std::mutex mu_;
};

// The Content-Disposition value for a download: `attachment; filename="<name>"`, with `"` and `\`
// backslash-escaped and control characters replaced by `_`, plus `; filename*=UTF-8''<pct>`
// (RFC 6266/5987) when the name is not plain ASCII.
std::string AttachmentContentDisposition(std::string_view filename);

}  // namespace ci
