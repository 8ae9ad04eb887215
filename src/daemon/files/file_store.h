// The file store behind /v1/files: uploaded files and files collected from sandboxes.
//
// Layout under the store directory: `<id>` (data) and `<id>.json` (metadata) per file, and
// `.tmp/` for files being written. A file becomes visible only once both are in place, and the
// data is renamed into place last, after it is complete and fsynced, so a crash never leaves a
// half file behind a valid id. The directory belongs to one daemon process: Open() deletes
// leftovers of a crash, which would also delete another live process's files in progress.
//
// Disk use: runs of zeros are stored as holes (SparseWriter), and the store's total, counted
// as the disk blocks its files really use plus a block of metadata each, is capped by a quota.
// What would go over it is refused whole (store_full), never kept half-written.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/sparse_writer.h"
#include "core/status.h"

namespace ci::daemon {

struct FileMeta {
  std::string file_id;   // canonical lowercase UUIDv4
  std::string filename;  // as given by the user; any bytes, never used as a path
  uint64_t size_bytes = 0;
  double upload_time = 0;  // unix seconds
  std::string data_path;   // absolute path of the data file
};
// The metadata file `<id>.json` (data_path is not in it: it follows from the id).
template <typename V, json::Message<FileMeta> M>
void Fields(V& v, M& m) {
  v("file_id", m.file_id);
  v("filename", m.filename);
  v("size_bytes", m.size_bytes);
  v("upload_time", m.upload_time);
}

// Thread-safe. Upload objects must not outlive the store that made them.
class FileStore {
 public:
  static constexpr uint64_t kNoQuota = UINT64_MAX;
  // What one stored file costs beyond its data blocks: its metadata file.
  static constexpr uint64_t kMetaCharge = SparseWriter::kBlock;

  // Creates `dir` (0700) and `dir/.tmp`, and removes what a crash may have left: temp files and
  // data or metadata files without their counterpart. `quota_bytes` caps the disk use of the
  // stored files (FILE_STORAGE_MAX_MB); files already there count against it.
  static Result<std::unique_ptr<FileStore>> Open(const std::string& dir,
                                                 uint64_t quota_bytes = kNoQuota);

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
    // refuses any further call. The same when the store's quota would be exceeded, with
    // store_full() set.
    Status Write(std::string_view data);
    // Makes the file visible under a new id. An empty filename is stored as "unnamed".
    Result<FileMeta> Commit(std::string filename);
    uint64_t bytes_written() const { return writer_.size(); }
    bool store_full() const { return store_full_; }

   private:
    friend class FileStore;
    Upload(FileStore* store, int fd, std::string temp_path, uint64_t max_bytes);
    void Discard();
    Status Fail(Status why);

    FileStore* store_;
    int fd_;
    std::string temp_path_;
    uint64_t max_bytes_;
    SparseWriter writer_;
    uint64_t reserved_ = 0;  // of the store's quota, for this file so far
    Status error_;
    bool store_full_ = false;
    bool finished_ = false;  // committed or discarded
  };

  // A stored file's bytes held for a reader (staging into a sandbox, a download): a private
  // hard link under `.tmp`, made under the store's lock and removed with the last reference. A
  // Delete meanwhile removes the id, not these bytes, so a reader that resolved the id never
  // finds the file gone halfway.
  class Pinned {
   public:
    ~Pinned();
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;
    const FileMeta& meta() const { return meta_; }
    const std::string& path() const { return path_; }  // read the bytes here

   private:
    friend class FileStore;
    Pinned(FileMeta meta, std::string path, bool linked)
        : meta_(std::move(meta)), path_(std::move(path)), linked_(linked) {}
    FileMeta meta_;
    std::string path_;
    bool linked_;  // false when the filesystem refused the link: path_ is the data file itself
  };

  Result<std::unique_ptr<Upload>> BeginUpload(uint64_t max_bytes);

  // Moves a regular file (never a symlink) into the store under a new id: a rename when it is on
  // the store's filesystem (see incoming_dir()), else a sparse copy after which the source is
  // deleted. Over the quota it fails with *store_full set (when given) and the source untouched.
  Result<FileMeta> AdoptFile(const std::string& host_path, std::string filename,
                             bool* store_full = nullptr);

  std::optional<FileMeta> Get(std::string_view id) const;  // nullopt when invalid or absent
  // nullptr when invalid or absent.
  std::shared_ptr<const Pinned> Pin(std::string_view id) const;
  std::vector<FileMeta> List() const;  // oldest first
  bool Delete(std::string_view id);    // false when invalid or absent
  // Deletes files whose age at `now` (unix seconds) exceeds max_age_seconds; returns how many.
  size_t SweepOlderThan(double max_age_seconds, double now);

  // A directory on the store's filesystem where callers may create files to AdoptFile() later
  // (so that adopting is a rename). Files left there are deleted by the next Open().
  std::string incoming_dir() const { return tmp_dir_; }

  uint64_t quota_bytes() const { return quota_; }
  uint64_t used_bytes() const;  // stored files plus uploads in progress

 private:
  FileStore(std::string dir, uint64_t quota_bytes);

  std::string DataPath(std::string_view id) const { return dir_ + "/" + std::string(id); }
  std::string MetaPath(std::string_view id) const { return DataPath(id) + ".json"; }
  std::optional<FileMeta> LoadLocked(const std::string& id) const;
  // Writes the metadata and renames `temp_data` into place under a fresh id (caller holds mu_).
  // `charge` (disk bytes incl. metadata) is added to the store's use once published.
  Result<FileMeta> PublishLocked(const std::string& temp_data, std::string filename, uint64_t size,
                                 uint64_t charge);
  Result<std::string> NewTempPath(std::string_view prefix) const;
  // Quota bookkeeping for files being written: false (nothing reserved) when `more` would go
  // over the quota.
  bool Reserve(uint64_t more);
  void Release(uint64_t bytes);

  std::string dir_;
  std::string tmp_dir_;
  const uint64_t quota_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> charges_;  // id -> disk bytes counted for it (under mu_)
  uint64_t stored_ = 0;                      // sum of charges_ (under mu_)
  uint64_t reserved_ = 0;                    // uploads in progress (under mu_)
};

// The Content-Disposition value for a download: `attachment; filename="<name>"`, with `"` and `\`
// backslash-escaped and control characters replaced by `_`, plus `; filename*=UTF-8''<pct>`
// (RFC 6266/5987) when the name is not plain ASCII.
std::string AttachmentContentDisposition(std::string_view filename);

}  // namespace ci::daemon
