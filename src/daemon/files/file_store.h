// The file store behind /v1/files: uploaded files and files collected from sandboxes.
//
// Layout under the store directory: `<id>` (data) and `<id>.json` (metadata) per file, and
// `.tmp/` for files being written. A file becomes visible only once both are in place, and the
// data is renamed into place last, after it is complete and fsynced, so a crash never leaves a
// half file behind a valid id.
//
// Shared by replicas: several daemon processes (on one host, or on several hosts mounting one
// ReadWriteMany volume) may open the same directory. Get, List, Pin and Delete read the
// directory every time, so a file stored through one replica is seen by all. What each process
// writes goes under its own `.tmp/proc-<hex>/`, owned through `.tmp/proc-<hex>.lock`, which the
// live process holds with flock(LOCK_EX) for the store's life. Cleaning up after a crash
// (Open(), RemoveLeftovers()) removes only what nobody alive can own:
//  - a `.tmp/proc-*` whose lock it can take (its process is dead: the kernel, or the NFS
//    server once the lease ends, released the lock);
//  - data without metadata (a step neither publishing nor deleting ever takes);
//  - metadata without data only when the process named in it as `owner` is dead: publishing
//    renames the metadata in first, so a live replica's commit in progress has exactly that
//    half for a moment. Metadata of older versions names no owner: it goes once older than
//    kLeftoverAgeSec;
//  - entries of older versions directly in `.tmp/` (no owner to ask), once older than
//    kLeftoverAgeSec, so that an old process still finishing requests during a rolling update
//    keeps its temp files.
// This needs file locks that all replicas see (local filesystems, NFSv4 or NFSv3 with lockd
// (not `nolock`), CephFS, EFS, Azure Files over NFS). Mixing this version with an older one on
// one directory is unsafe: an older version's Open() deletes all of `.tmp/`.
//
// Disk use: runs of zeros are stored as holes (SparseWriter), and the store's total, counted
// as the disk blocks its files really use plus a block of metadata each, is capped by a quota.
// What would go over it is refused whole (store_full), never kept half-written. The total is
// that of the directory, all replicas together: it is recounted from disk (data files, plus other
// processes' uploads in progress) at Open(), at the start of each upload, at most a second
// before an adoption, and again before refusing anything, so a file deleted through another
// replica frees room here and one stored there counts here. Across replicas the check is not
// atomic: two replicas may pass it at the same instant, so the quota may be overrun by at most
// what the replicas have in flight (writes under way, and what was stored in the last second
// before an adoption). A single process never accepts past it; none refuses while the disk
// total is under it by more than that.
//
// Each API key has a share of the quota too (SetShares): the files stored under its name
// (uploads and output files alike) and its uploads in progress. Files are attributed to keys by
// their metadata, read once per file at a recount; other replicas' uploads in progress count
// against the quota only.
#pragma once

#include <cstdint>
#include <functional>
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
  // The store (`proc-<hex>`) that published it: a replica finding the metadata without its data
  // asks whether that process is alive (its commit may be in progress) before deleting it.
  std::string owner;
  // The API key's name that stored it (api_keys.h): only that caller sees it. "" when the daemon
  // has no keys (and in files of older versions).
  std::string client;
  // "" for a user's file; what else holds it ("snapshot": a session's, session_snapshots.h):
  // such files count against the quota but are never listed, served, staged or swept by age.
  std::string kind;

  // The API shows it to `client` (its owner's file, and a user's file).
  bool VisibleTo(const std::string& who) const { return kind.empty() && client == who; }
};
// The metadata file `<id>.json` (data_path is not in it: it follows from the id).
template <typename V, json::Message<FileMeta> M>
void Fields(V& v, M& m) {
  v("file_id", m.file_id);
  v("filename", m.filename);
  v("size_bytes", m.size_bytes);
  v("upload_time", m.upload_time);
  v.Optional("owner", m.owner);    // absent in files of older versions
  v.Optional("client", m.client);  // absent without API keys, and in files of older versions
  v.Optional("kind", m.kind);      // absent for users' files
}

// Thread-safe. Upload objects must not outlive the store that made them.
class FileStore {
 public:
  static constexpr uint64_t kNoQuota = UINT64_MAX;
  // What one stored file costs beyond its data blocks: its metadata file.
  static constexpr uint64_t kMetaCharge = SparseWriter::kBlock;
  // How old a leftover without an owner to ask must be before it is deleted (see the top). Far
  // longer than a commit takes; a live older process's temp file stays fresher than this while
  // it is written to or linked.
  static constexpr double kLeftoverAgeSec = 600;
  // Why a file was refused for room: the whole store, or the client's share of it.
  enum class Full { kNo, kStore, kShare };
  // The bytes a client (an API key's name) may store; kNoQuota: no share below the quota.
  using ShareOf = std::function<uint64_t(const std::string& client)>;

  // Creates `dir` (0700) and `dir/.tmp`, claims this process's temp directory under it, and
  // removes what crashed processes left (RemoveLeftovers()). `quota_bytes` caps the disk use of
  // the stored files (FILE_STORAGE_MAX_MB); files already there count against it. Fails when the
  // filesystem has no file locks.
  static Result<std::unique_ptr<FileStore>> Open(const std::string& dir,
                                                 uint64_t quota_bytes = kNoQuota);
  // Removes this process's temp directory (nothing of it is in use once Uploads are gone) and
  // gives up its lock.
  ~FileStore();
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  // A canonical UUID (8-4-4-4-12 hex digits, either case). Anything else is "not found" to the
  // API and is never joined onto a path.
  static bool IsValidId(std::string_view id);
  // Each client's share (thread-safe callback); set before the store is used.
  void SetShares(ShareOf share_of) { share_of_ = std::move(share_of); }

  // A file being written, in a temp file under `.tmp`. Destroying it without a successful
  // Commit() deletes the temp file.
  class Upload {
   public:
    ~Upload();
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;

    // Once more than max_bytes would have been written this fails with
    // `File size exceeds maximum of <N> MB` (N = max_bytes / 1 MiB), deletes the temp file and
    // refuses any further call. The same when the store's quota or the client's share would be
    // exceeded, with full() saying which.
    Status Write(std::string_view data);
    // Makes the file visible under a new id, as the client's. An empty filename is stored as
    // "unnamed".
    Result<FileMeta> Commit(std::string filename, std::string kind = "");
    uint64_t bytes_written() const { return writer_.size(); }
    Full full() const { return full_; }

   private:
    friend class FileStore;
    Upload(FileStore* store, int fd, std::string temp_path, uint64_t max_bytes, std::string client);
    void Discard();
    Status Fail(Status why);

    FileStore* store_;
    int fd_;
    std::string temp_path_;
    uint64_t max_bytes_;
    std::string client_;
    SparseWriter writer_;
    uint64_t reserved_ = 0;  // of the store's quota, for this file so far
    Status error_;
    Full full_ = Full::kNo;
    bool finished_ = false;  // committed or discarded
  };

  // A stored file's bytes held for a reader (staging into a sandbox, a download): a private
  // hard link in this process's temp directory, removed with the last reference. A Delete
  // meanwhile (through any replica) removes the id, not these bytes, so a reader that resolved
  // the id never finds the file gone halfway.
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

  // A file of `client` ("" without API keys) being written.
  Result<std::unique_ptr<Upload>> BeginUpload(uint64_t max_bytes, std::string client = "");

  // Moves a regular file (never a symlink) into the store under a new id, as `client`'s: a
  // rename when it is on the store's filesystem (see incoming_dir()), else a sparse copy after
  // which the source is deleted. Over the quota or the client's share it fails with *full set
  // (when given) and the source untouched.
  Result<FileMeta> AdoptFile(const std::string& host_path, std::string filename,
                             Full* full = nullptr, std::string client = "");

  std::optional<FileMeta> Get(std::string_view id) const;  // nullopt when invalid or absent
  // nullptr when invalid or absent.
  std::shared_ptr<const Pinned> Pin(std::string_view id) const;
  std::vector<FileMeta> List() const;  // oldest first
  bool Delete(std::string_view id);    // false when invalid or absent
  // Deletes users' files whose age at `now` (unix seconds) exceeds max_age_seconds; returns how
  // many.
  size_t SweepOlderThan(double max_age_seconds, double now);
  // Removes what crashed processes left (see the top), judging ages at `now` (unix seconds);
  // returns how many entries went. Open() calls it; the daemon calls it periodically too, since
  // a replica that crashes leaves its leftovers to replicas that may run for weeks.
  size_t RemoveLeftovers(double now);

  // This process's temp directory, on the store's filesystem: callers may create files there to
  // AdoptFile() later (so that adopting is a rename). It is removed with the store, or after a
  // crash by any replica's RemoveLeftovers().
  std::string incoming_dir() const { return tmp_dir_; }
  const std::string& owner() const { return owner_; }  // `proc-<hex>`

  uint64_t quota_bytes() const { return quota_; }
  // Stored files and other processes' uploads in progress at the last recount, plus this
  // process's changes since and its uploads in progress.
  uint64_t used_bytes() const;
  // What `client`'s files and uploads in progress take of its share.
  uint64_t used_bytes_of(const std::string& client) const;

 private:
  FileStore(std::string dir, std::string owner, int lock_fd, uint64_t quota_bytes);

  std::string DataPath(std::string_view id) const { return dir_ + "/" + std::string(id); }
  std::string MetaPath(std::string_view id) const { return DataPath(id) + ".json"; }
  std::optional<FileMeta> LoadLocked(const std::string& id) const;
  // Writes the metadata and renames `temp_data` into place under a fresh id (caller holds mu_).
  // `charge` (disk bytes incl. metadata) is added to the store's use once published.
  Result<FileMeta> PublishLocked(const std::string& temp_data, std::string filename,
                                 std::string client, uint64_t size, uint64_t charge,
                                 std::string kind = "");
  Result<std::string> NewTempPath(std::string_view prefix) const;
  // Whether the process that owns `.tmp/<owner>` may be alive (true when unsure).
  bool OwnerAlive(const std::string& owner) const;
  // Quota bookkeeping for files being written: what stops `more` bytes of `client` even after a
  // recount (nothing is reserved then), else Full::kNo.
  Full Reserve(uint64_t more, const std::string& client);
  void Release(uint64_t bytes, const std::string& client);
  void UnreserveLocked(uint64_t bytes, const std::string& client);
  Full OverQuotaLocked(uint64_t more, const std::string& client) const;
  // Refuses a file whose `more` bytes do not fit, recounting first as Reserve does.
  Full CheckRoomLocked(uint64_t more, const std::string& client);
  uint64_t UsedOfLocked(const std::string& client) const;
  // Counts the disk use of the whole directory again (caller holds mu_).
  void RecountLocked();

  std::string dir_;
  std::string tmp_root_;  // dir/.tmp
  std::string owner_;     // proc-<hex>
  std::string tmp_dir_;   // dir/.tmp/<owner>
  int lock_fd_;           // flock(LOCK_EX) on dir/.tmp/<owner>.lock
  const uint64_t quota_;
  ShareOf share_of_;
  mutable std::mutex mu_;
  struct Charge {
    uint64_t bytes = 0;  // on disk, metadata included
    std::string client;  // whose file it is
  };
  // id -> the stored files seen at the last recount, plus this process's own publishes since
  // (under mu_). Only the charges are kept across recounts (a stored file never changes); which
  // files exist is read from the directory again each time.
  std::map<std::string, Charge> charges_;
  uint64_t stored_ = 0;                          // sum of charges_ (under mu_)
  std::map<std::string, uint64_t> stored_by_;    // the same by client (under mu_)
  std::map<std::string, uint64_t> reserved_by_;  // reserved_ by client (under mu_)
  uint64_t others_writing_ = 0;  // other processes' uploads in progress at the recount (mu_)
  uint64_t reserved_ = 0;        // this process's uploads in progress (under mu_)
  double counted_at_ = 0;        // steady-clock seconds of the last recount (under mu_)
};

// The Content-Disposition value for a download: `attachment; filename="<name>"`, with `"` and `\`
// backslash-escaped and control characters replaced by `_`, plus `; filename*=UTF-8''<pct>`
// (RFC 6266/5987) when the name is not plain ASCII.
std::string AttachmentContentDisposition(std::string_view filename);

}  // namespace ci::daemon
