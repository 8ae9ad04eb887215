#include "daemon/files/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include "core/random.h"
#include "core/unix_time.h"

namespace ci::daemon {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1024} * 1024;
// Metadata is a filename plus a few numbers; anything larger is not ours.
constexpr off_t kMaxMetaBytes = 1 << 20;
constexpr std::string_view kMetaSuffix = ".json";
// A process's temp directory under .tmp/ is `proc-<32 hex>`, its lock `proc-<32 hex>.lock`.
constexpr std::string_view kOwnerPrefix = "proc-";
constexpr std::string_view kLockSuffix = ".lock";
constexpr size_t kOwnerHexDigits = 32;
// Uploads in progress are `upload-<hex>` in their process's temp directory (and were so
// directly in .tmp/ in older versions).
constexpr std::string_view kUploadPrefix = "upload-";
// How stale the count may be when a file is adopted: collected outputs come in bursts, and a
// recount per file would read the whole directory once per output.
constexpr double kRecountEverySec = 1;

double SteadySeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// When an entry last changed, in unix seconds: the later of mtime and ctime, because a hard
// link (a pin) or a rename changes only the ctime, and nobody can set a ctime back.
double ChangedAt(const struct stat& st) {
  auto secs = [](const struct timespec& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  return std::max(secs(st.st_mtim), secs(st.st_ctim));
}

bool IsOwnerName(std::string_view name) {
  if (!name.starts_with(kOwnerPrefix) || name.size() != kOwnerPrefix.size() + kOwnerHexDigits) {
    return false;
  }
  name.remove_prefix(kOwnerPrefix.size());
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsOwnerLockName(std::string_view name, std::string* owner) {
  if (!name.ends_with(kLockSuffix)) return false;
  name.remove_suffix(kLockSuffix.size());
  if (!IsOwnerName(name)) return false;
  *owner = std::string(name);
  return true;
}

std::string LockPath(const std::string& tmp_root, std::string_view owner) {
  return tmp_root + "/" + std::string(owner) + std::string(kLockSuffix);
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 || errno != ENOENT;  // unsure counts as there
}

// The owners (temp directories) this process holds, whichever FileStore holds them. On NFS,
// flock() is emulated with POSIX record locks, which belong to the process, not to the open
// file: opening one of our own lock files again would "get" the lock, and closing that second
// descriptor would silently drop the lock we hold. So the liveness of our own owners is answered
// from here, and their lock files are never opened twice. An owner is added before its lock
// file exists, so that no other store of this process can find the file unheld.
std::mutex& LiveOwnersMu() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& LiveOwners() {
  static std::set<std::string> owners;
  return owners;
}
void AddLiveOwner(const std::string& owner) {
  std::lock_guard lock(LiveOwnersMu());
  LiveOwners().insert(owner);
}
void DropLiveOwner(const std::string& owner) {
  std::lock_guard lock(LiveOwnersMu());
  LiveOwners().erase(owner);
}
bool IsLiveOwner(const std::string& owner) {
  std::lock_guard lock(LiveOwnersMu());
  return LiveOwners().contains(owner);
}

Result<std::string> NewUuidV4() {
  unsigned char b[16];
  if (!RandomBytes(b, sizeof b)) return Status::Errno("getrandom", errno);
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string hex = HexEncode(std::string_view(reinterpret_cast<const char*>(b), sizeof b));
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

std::string CanonicalId(std::string_view id) {
  std::string out(id);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return out;
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("write", errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status();
}

// Makes renames in `dir` durable. Best effort: the atomicity guarantee does not depend on it,
// only whether a just-published file survives a power loss.
void FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool IsMetaName(std::string_view name, std::string* id) {
  if (name.size() <= kMetaSuffix.size() || !name.ends_with(kMetaSuffix)) return false;
  name.remove_suffix(kMetaSuffix.size());
  if (!FileStore::IsValidId(name) || CanonicalId(name) != name) return false;
  *id = std::string(name);
  return true;
}

bool IsDataName(std::string_view name) {
  return FileStore::IsValidId(name) && CanonicalId(name) == name;
}

// Opens a regular file without following a symlink in the last component.
Result<int> OpenRegularNoFollow(const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::Errno("opening " + path, errno);
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::Errno("stat " + path, err);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return Status::Error(path + " is not a regular file");
  }
  return fd;
}

// Copies everything readable from `in` into a new file `to`, zeros as holes, fsynced.
Status CopyFd(int in, const std::string& from, const std::string& to) {
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) return Status::Errno("creating " + to, errno);
  SparseWriter writer(out, to);
  Status s;
  std::string buf(1 << 16, '\0');
  while (s.ok()) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = Status::Errno("reading " + from, errno);
    } else if (n == 0) {
      break;
    } else {
      s = writer.Write(std::string_view(buf.data(), static_cast<size_t>(n)));
    }
  }
  if (s.ok()) s = writer.Finish();
  if (s.ok() && ::fsync(out) != 0) s = Status::Errno("fsync " + to, errno);
  ::close(out);
  return s;
}

// Disk bytes a stored file counts against the quota: its data blocks and its metadata.
uint64_t StoreCharge(const struct stat& st) {
  return static_cast<uint64_t>(st.st_blocks) * 512 + FileStore::kMetaCharge;
}

Status FullError(FileStore::Full full, uint64_t quota) {
  if (full == FileStore::Full::kShare) {
    return Status::Error("this API key's share of the file storage is full");
  }
  return Status::Error("file storage is full (quota " + std::to_string(quota / kMiB) + " MB)");
}

// Entry names of `dir` except "." and "..".
Result<std::vector<std::string>> ListNames(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::Errno("listing " + dir, errno);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

// Reads and decodes a metadata file; false when it is not one.
bool ReadMetaFile(const std::string& path, FileMeta* meta, struct stat* st) {
  Result<int> fd = OpenRegularNoFollow(path, st);
  if (!fd.ok()) return false;
  std::string text;
  if (st->st_size <= kMaxMetaBytes) {
    text.resize(static_cast<size_t>(st->st_size));
    ssize_t n = ::pread(*fd, text.data(), text.size(), 0);
    if (n != static_cast<ssize_t>(text.size())) text.clear();
  }
  ::close(*fd);
  return json::Decode(text, meta);
}

struct Claim {
  std::string owner;
  int lock_fd;
};

// Creates this process's temp directory under `tmp_root`, holding its lock. The lock file comes
// first and is locked before the directory exists, so that a directory is never without its
// held lock while its owner lives.
Result<Claim> ClaimOwner(const std::string& tmp_root) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::string hex = RandomHex(kOwnerHexDigits / 2);
    if (hex.empty()) return Status::Errno("getrandom", errno);
    std::string owner = std::string(kOwnerPrefix) + hex;
    std::string lock = LockPath(tmp_root, owner);
    AddLiveOwner(owner);
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      int err = errno;
      DropLiveOwner(owner);
      if (err == EEXIST) continue;
      return Status::Errno("creating " + lock, err);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      DropLiveOwner(owner);
      // Another process's cleanup found the file unheld and took it first; it deletes it.
      if (err == EWOULDBLOCK) continue;
      ::unlink(lock.c_str());
      return Status::Errno("locking " + lock + " (the file store needs file locks)", err);
    }
    // That cleanup may also have finished (deleted the file, let go) before our flock: then we
    // hold a lock nobody else can find.
    struct stat held, named;
    if (::fstat(fd, &held) != 0 || ::lstat(lock.c_str(), &named) != 0 || !SameFile(held, named)) {
      ::close(fd);
      DropLiveOwner(owner);
      continue;
    }
    std::string dir = tmp_root + "/" + owner;
    if (::mkdir(dir.c_str(), 0700) != 0) {
      int err = errno;
      ::unlink(lock.c_str());
      ::close(fd);
      DropLiveOwner(owner);
      return Status::Errno("creating " + dir, err);
    }
    // For whoever looks at a shared directory: which process holds it. Best effort.
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    (void)WriteAll(fd, std::string(host) + " pid " + std::to_string(::getpid()) + "\n");
    return Claim{std::move(owner), fd};
  }
  return Status::Error("could not claim a temp directory under " + tmp_root);
}

// Disk bytes of a regular file, 0 when it is gone or not one.
uint64_t DiskBytes(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

}  // namespace

bool FileStore::IsValidId(std::string_view id) {
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

FileStore::FileStore(std::string dir, std::string owner, int lock_fd, uint64_t quota_bytes)
    : dir_(std::move(dir)),
      tmp_root_(dir_ + "/.tmp"),
      owner_(std::move(owner)),
      tmp_dir_(tmp_root_ + "/" + owner_),
      lock_fd_(lock_fd),
      quota_(quota_bytes) {}

FileStore::~FileStore() {
  std::error_code ignored;
  fs::remove_all(tmp_dir_, ignored);
  // The directory before its lock, the lock file before letting go of it: the same order as
  // RemoveLeftovers(), so no directory is ever without a lock file.
  ::unlink(LockPath(tmp_root_, owner_).c_str());
  ::close(lock_fd_);
  DropLiveOwner(owner_);
}

Result<std::unique_ptr<FileStore>> FileStore::Open(const std::string& dir, uint64_t quota_bytes) {
  if (dir.empty()) return Status::Error("file store directory is not set");
  std::error_code ec;
  fs::path path = fs::absolute(dir, ec);
  if (ec) return Status::Error("file store " + dir + ": " + ec.message());
  std::string abs = path.lexically_normal().string();
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();

  if (fs::path parent = fs::path(abs).parent_path(); !parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) return Status::Error("creating " + parent.string() + ": " + ec.message());
  }
  // 0700: stored files are other users' data; nobody else on the host should read them.
  for (const std::string& d : {abs, abs + "/.tmp"}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::Errno("creating " + d, errno);
    struct stat st;
    if (::lstat(d.c_str(), &st) != 0) return Status::Errno("stat " + d, errno);
    if (!S_ISDIR(st.st_mode)) return Status::Error(d + " is not a directory");
  }
  Result<Claim> claim = ClaimOwner(abs + "/.tmp");
  if (!claim.ok()) return claim.status();
  std::unique_ptr<FileStore> store(
      new FileStore(abs, std::move(claim->owner), claim->lock_fd, quota_bytes));
  store->RemoveLeftovers(UnixNow());
  {
    // What is already stored, by this or any other replica, counts against the quota.
    std::lock_guard lock(store->mu_);
    store->RecountLocked();
  }
  return store;
}

bool FileStore::OwnerAlive(const std::string& owner) const {
  if (IsLiveOwner(owner)) return true;  // this process's (see LiveOwners())
  int fd = ::open(LockPath(tmp_root_, owner).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  // An owner's lock file exists for all its life; anything but "not there" may be a live one.
  if (fd < 0) return errno != ENOENT;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

size_t FileStore::RemoveLeftovers(double now) {
  size_t removed = 0;
  std::error_code ignored;
  // Half pairs first, while a dead publisher's lock file is still there to ask.
  std::set<std::string> data, meta;
  Result<std::vector<std::string>> names = ListNames(dir_);
  if (!names.ok()) names = std::vector<std::string>{};  // the temp directories still go
  for (const std::string& name : *names) {
    std::string id;
    if (IsMetaName(name, &id)) {
      meta.insert(id);
    } else if (IsDataName(name)) {
      data.insert(name);
    }
  }
  for (const std::string& id : data) {
    // Data without metadata is no step of ours, in any process: publishing renames the metadata
    // in first, deleting unlinks the data first. So it is a crash's or a stranger's.
    if (!meta.contains(id) && !Exists(MetaPath(id)) && ::unlink(DataPath(id).c_str()) == 0) {
      ++removed;
    }
  }
  for (const std::string& id : meta) {
    if (data.contains(id)) continue;
    // Metadata without data is what a commit in progress looks like for a moment (and a delete
    // in progress): it goes only when its publisher is dead (or, naming none, it is old).
    FileMeta m;
    struct stat st;
    const bool read = ReadMetaFile(MetaPath(id), &m, &st);
    if (!read && ::lstat(MetaPath(id).c_str(), &st) != 0) continue;
    const bool abandoned =
        read && IsOwnerName(m.owner) ? !OwnerAlive(m.owner) : now - ChangedAt(st) > kLeftoverAgeSec;
    // The data checked after the owner: a live owner may have completed the pair since.
    if (abandoned && !Exists(DataPath(id)) && ::unlink(MetaPath(id).c_str()) == 0) ++removed;
  }

  if (Result<std::vector<std::string>> temps = ListNames(tmp_root_); temps.ok()) {
    for (const std::string& name : *temps) {
      const std::string path = tmp_root_ + "/" + name;
      std::string owner;
      if (IsOwnerLockName(name, &owner)) {
        if (IsLiveOwner(owner)) continue;
        // Holding a dead owner's lock, nobody else can be in its directory (names are never
        // reused). The directory goes before the lock file (see ~FileStore()).
        int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat held, named;
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 &&
            ::lstat(path.c_str(), &named) == 0 && SameFile(held, named)) {
          fs::remove_all(tmp_root_ + "/" + owner, ignored);
          ::unlink(path.c_str());
          ++removed;
        }
        ::close(fd);
      } else if (IsOwnerName(name)) {
        // A temp directory without its lock file is nobody's: an owner creates the lock before
        // the directory and it is removed after. (Checked now: the listing is no snapshot.)
        if (!IsLiveOwner(name) && !Exists(LockPath(tmp_root_, name))) {
          fs::remove_all(path, ignored);
          ++removed;
        }
      } else {
        // An older version's temp file or directory, written directly in .tmp/ with no lock to
        // ask: an older process may still be at work in a rolling update, so only what has not
        // changed for kLeftoverAgeSec goes.
        struct stat st;
        if (::lstat(path.c_str(), &st) == 0 && now - ChangedAt(st) > kLeftoverAgeSec) {
          fs::remove_all(path, ignored);
          ++removed;
        }
      }
    }
  }

  return removed;
}

Result<std::string> FileStore::NewTempPath(std::string_view prefix) const {
  std::string hex = RandomHex(16);
  if (hex.empty()) return Status::Errno("getrandom", errno);
  return tmp_dir_ + "/" + std::string(prefix) + "-" + hex;
}

Result<std::unique_ptr<FileStore::Upload>> FileStore::BeginUpload(uint64_t max_bytes,
                                                                  std::string client) {
  if (quota_ != kNoQuota || share_of_) {
    // What other replicas stored or deleted since the last count counts from this upload on.
    std::lock_guard lock(mu_);
    RecountLocked();
  }
  Result<std::string> path = NewTempPath("upload");
  if (!path.ok()) return path.status();
  int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Errno("creating upload file", errno);
  return std::unique_ptr<Upload>(
      new Upload(this, fd, std::move(*path), max_bytes, std::move(client)));
}

FileStore::Upload::Upload(FileStore* store, int fd, std::string temp_path, uint64_t max_bytes,
                          std::string client)
    : store_(store),
      fd_(fd),
      temp_path_(std::move(temp_path)),
      max_bytes_(max_bytes),
      client_(std::move(client)),
      writer_(fd, "upload") {}

FileStore::Upload::~Upload() { Discard(); }

void FileStore::Upload::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!finished_) ::unlink(temp_path_.c_str());
  finished_ = true;
  store_->Release(std::exchange(reserved_, 0), client_);
}

Status FileStore::Upload::Fail(Status why) {
  error_ = std::move(why);
  // Free the disk space now rather than when the caller gets around to destroying us.
  Discard();
  return error_;
}

Status FileStore::Upload::Write(std::string_view data) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::Error("upload already finished");
  if (data.size() > max_bytes_ - writer_.size()) {
    return Fail(
        Status::Error("File size exceeds maximum of " + std::to_string(max_bytes_ / kMiB) + " MB"));
  }
  // Reserve the most this piece can take (every byte, a partial block at each end, metadata)
  // before writing it; then keep only what it really took (zero blocks are holes).
  constexpr uint64_t kBlock = SparseWriter::kBlock;
  const uint64_t most = writer_.allocated() + data.size() + 2 * kBlock + kMetaCharge;
  if (most > reserved_) {
    if (Full full = store_->Reserve(most - reserved_, client_); full != Full::kNo) {
      full_ = full;
      return Fail(FullError(full, store_->quota_));
    }
    reserved_ = most;
  }
  if (Status s = writer_.Write(data); !s.ok()) return Fail(s.Context("writing upload"));
  const uint64_t taken = writer_.allocated() + kBlock + kMetaCharge;  // + the pending block
  if (taken < reserved_) store_->Release(std::exchange(reserved_, taken) - taken, client_);
  return Status();
}

Result<FileMeta> FileStore::Upload::Commit(std::string filename, std::string kind) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::Error("upload already finished");
  if (Status s = writer_.Finish(); !s.ok()) return Fail(s.Context("writing upload"));
  // The data must be on disk before its rename can make it visible.
  if (::fsync(fd_) != 0) return Fail(Status::Errno("fsync upload", errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Fail(Status::Errno("stat upload", errno));
  ::close(fd_);
  fd_ = -1;
  std::lock_guard lock(store_->mu_);
  // The reservation becomes the file's real charge (the lock is held: no Release()).
  store_->UnreserveLocked(std::exchange(reserved_, 0), client_);
  Result<FileMeta> meta = store_->PublishLocked(temp_path_, std::move(filename), client_,
                                                writer_.size(), StoreCharge(st), std::move(kind));
  if (meta.ok()) {
    finished_ = true;
  } else {
    error_ = meta.status();
    Discard();  // nothing is reserved any more, so it does not take the lock we hold
  }
  return meta;
}

uint64_t FileStore::UsedOfLocked(const std::string& client) const {
  auto stored = stored_by_.find(client);
  auto reserved = reserved_by_.find(client);
  return (stored == stored_by_.end() ? 0 : stored->second) +
         (reserved == reserved_by_.end() ? 0 : reserved->second);
}

FileStore::Full FileStore::OverQuotaLocked(uint64_t more, const std::string& client) const {
  const uint64_t share = share_of_ ? share_of_(client) : kNoQuota;
  if (share != kNoQuota) {
    const uint64_t mine = UsedOfLocked(client);
    if (mine > share || more > share - mine) return Full::kShare;
  }
  if (quota_ == kNoQuota) return Full::kNo;
  const uint64_t used = stored_ + others_writing_ + reserved_;
  return used > quota_ || more > quota_ - used ? Full::kStore : Full::kNo;
}

FileStore::Full FileStore::CheckRoomLocked(uint64_t more, const std::string& client) {
  // Before refusing, look again: another replica may have deleted files since the last count.
  if (OverQuotaLocked(more, client) != Full::kNo) RecountLocked();
  return OverQuotaLocked(more, client);
}

FileStore::Full FileStore::Reserve(uint64_t more, const std::string& client) {
  std::lock_guard lock(mu_);
  if (Full full = CheckRoomLocked(more, client); full != Full::kNo) return full;
  reserved_ += more;
  reserved_by_[client] += more;
  return Full::kNo;
}

void FileStore::RecountLocked() {
  counted_at_ = SteadySeconds();
  Result<std::vector<std::string>> names = ListNames(dir_);
  if (!names.ok()) return;  // keep the count we have
  std::map<std::string, Charge> charges;
  std::map<std::string, uint64_t> stored_by;
  uint64_t stored = 0;
  for (const std::string& name : *names) {
    if (!IsDataName(name)) continue;
    // Data without metadata counts too: it is on disk until someone removes it (as nobody's).
    auto known = charges_.find(name);
    Charge charge;
    if (known != charges_.end()) {
      charge = known->second;
    } else if (struct stat st; ::lstat(DataPath(name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      charge.bytes = StoreCharge(st);
      FileMeta meta;
      struct stat meta_st;
      if (ReadMetaFile(MetaPath(name), &meta, &meta_st)) charge.client = std::move(meta.client);
    } else {
      continue;
    }
    stored += charge.bytes;
    stored_by[charge.client] += charge.bytes;
    charges.emplace(name, std::move(charge));
  }
  charges_ = std::move(charges);
  stored_ = stored;
  stored_by_ = std::move(stored_by);
  // Other processes' uploads in progress, live or left by a crash: on disk all the same. Pins
  // are hard links of stored data, and this process's uploads are in reserved_.
  uint64_t writing = 0;
  if (Result<std::vector<std::string>> temps = ListNames(tmp_root_); temps.ok()) {
    for (const std::string& name : *temps) {
      if (name == owner_) continue;
      if (name.starts_with(kUploadPrefix)) {
        writing += DiskBytes(tmp_root_ + "/" + name);  // an older version's
      } else if (IsOwnerName(name)) {
        Result<std::vector<std::string>> files = ListNames(tmp_root_ + "/" + name);
        if (!files.ok()) continue;
        for (const std::string& f : *files) {
          if (f.starts_with(kUploadPrefix)) writing += DiskBytes(tmp_root_ + "/" + name + "/" + f);
        }
      }
    }
  }
  others_writing_ = writing;
}

void FileStore::Release(uint64_t bytes, const std::string& client) {
  if (bytes == 0) return;
  std::lock_guard lock(mu_);
  UnreserveLocked(bytes, client);
}

void FileStore::UnreserveLocked(uint64_t bytes, const std::string& client) {
  reserved_ -= std::min(bytes, reserved_);
  uint64_t& mine = reserved_by_[client];
  mine -= std::min(bytes, mine);
  if (mine == 0) reserved_by_.erase(client);
}

uint64_t FileStore::used_bytes() const {
  std::lock_guard lock(mu_);
  return stored_ + others_writing_ + reserved_;
}

uint64_t FileStore::used_bytes_of(const std::string& client) const {
  std::lock_guard lock(mu_);
  return UsedOfLocked(client);
}

Result<FileMeta> FileStore::PublishLocked(const std::string& temp_data, std::string filename,
                                          std::string client, uint64_t size, uint64_t charge,
                                          std::string kind) {
  FileMeta meta;
  // A collision of 122 random bits will not happen, but checking is cheap and rename would
  // silently replace another file.
  for (int attempt = 0;; ++attempt) {
    Result<std::string> id = NewUuidV4();
    if (!id.ok()) return id.status();
    struct stat st;
    if (::lstat(MetaPath(*id).c_str(), &st) != 0 && ::lstat(DataPath(*id).c_str(), &st) != 0) {
      meta.file_id = std::move(*id);
      break;
    }
    if (attempt == 3) return Status::Error("could not allocate a file id");
  }
  meta.filename = filename.empty() ? "unnamed" : std::move(filename);
  meta.size_bytes = size;
  meta.upload_time = UnixNow();
  meta.data_path = DataPath(meta.file_id);
  meta.owner = owner_;
  meta.client = std::move(client);
  meta.kind = std::move(kind);

  Result<std::string> meta_temp = NewTempPath("meta");
  if (!meta_temp.ok()) return meta_temp.status();
  int fd = ::open(meta_temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Errno("creating metadata file", errno);
  Status s = WriteAll(fd, json::Encode(meta));
  if (s.ok() && ::fsync(fd) != 0) s = Status::Errno("fsync", errno);
  ::close(fd);
  if (s.ok() && ::rename(meta_temp->c_str(), MetaPath(meta.file_id).c_str()) != 0) {
    s = Status::Errno("rename", errno);
  }
  if (!s.ok()) {
    ::unlink(meta_temp->c_str());
    return s.Context("writing metadata");
  }
  // Data last: until this rename the id has metadata without data, which reads as absent (and
  // which other replicas' RemoveLeftovers() leave alone while this process lives).
  if (::rename(temp_data.c_str(), meta.data_path.c_str()) != 0) {
    int err = errno;
    ::unlink(MetaPath(meta.file_id).c_str());
    return Status::Errno("moving data into place", err);
  }
  FsyncDir(dir_);
  charges_[meta.file_id] = Charge{charge, meta.client};
  stored_ += charge;
  stored_by_[meta.client] += charge;
  return meta;
}

Result<FileMeta> FileStore::AdoptFile(const std::string& host_path, std::string filename,
                                      Full* full, std::string client) {
  if (full != nullptr) *full = Full::kNo;
  struct stat src;
  Result<int> fd = OpenRegularNoFollow(host_path, &src);
  if (!fd.ok()) return fd.status().Context("adopting file");
  Result<std::string> temp = NewTempPath("adopt");
  if (!temp.ok()) {
    ::close(*fd);
    return temp.status();
  }
  bool renamed = false;
  Status s;
  if (::fsync(*fd) != 0) {
    s = Status::Errno("fsync " + host_path, errno);
  } else {
    // A file with other hard links could still be changed through them after adoption, so it
    // is copied, as is one on another filesystem.
    int rename_err = EXDEV;
    if (src.st_nlink == 1) {
      renamed = ::rename(host_path.c_str(), temp->c_str()) == 0;
      rename_err = renamed ? 0 : errno;
    }
    if (renamed) {
      // The path may have been swapped for something else between open() and rename(); only
      // the inode we checked may enter the store.
      struct stat moved;
      if (::lstat(temp->c_str(), &moved) != 0 || moved.st_dev != src.st_dev ||
          moved.st_ino != src.st_ino) {
        s = Status::Error(host_path + " changed while being adopted");
      }
    } else if (rename_err == EXDEV) {
      s = CopyFd(*fd, host_path, *temp);
    } else {
      s = Status::Errno("moving " + host_path, rename_err);
    }
  }
  struct stat final_st;
  if (s.ok() && ::lstat(temp->c_str(), &final_st) != 0) s = Status::Errno("stat", errno);
  ::close(*fd);
  if (!s.ok()) {
    // A moved-but-refused source goes back where it was, so the caller's view is unchanged.
    if (!renamed || ::rename(temp->c_str(), host_path.c_str()) != 0) ::unlink(temp->c_str());
    return s.Context("adopting file");
  }

  std::lock_guard lock(mu_);
  const uint64_t charge = StoreCharge(final_st);
  if ((quota_ != kNoQuota || share_of_) && SteadySeconds() - counted_at_ > kRecountEverySec) {
    RecountLocked();
  }
  const Full over = CheckRoomLocked(charge, client);
  if (full != nullptr) *full = over;
  Result<FileMeta> meta = over != Full::kNo
                              ? Result<FileMeta>(FullError(over, quota_))
                              : PublishLocked(*temp, std::move(filename), std::move(client),
                                              static_cast<uint64_t>(final_st.st_size), charge);
  if (!meta.ok()) {
    if (!renamed || ::rename(temp->c_str(), host_path.c_str()) != 0) ::unlink(temp->c_str());
    return meta.status().Context("adopting file");
  }
  if (!renamed) ::unlink(host_path.c_str());
  return meta;
}

std::optional<FileMeta> FileStore::LoadLocked(const std::string& id) const {
  struct stat st;
  FileMeta meta;
  if (!ReadMetaFile(MetaPath(id), &meta, &st)) return std::nullopt;
  if (meta.file_id != id) return std::nullopt;
  meta.data_path = DataPath(id);
  // Data that is missing, not a regular file, or not the recorded size is not a file we wrote.
  if (::lstat(meta.data_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != meta.size_bytes) {
    return std::nullopt;
  }
  return meta;
}

std::optional<FileMeta> FileStore::Get(std::string_view id) const {
  if (!IsValidId(id)) return std::nullopt;
  std::lock_guard lock(mu_);
  return LoadLocked(CanonicalId(id));
}

FileStore::Pinned::~Pinned() {
  if (linked_) ::unlink(path_.c_str());
}

std::shared_ptr<const FileStore::Pinned> FileStore::Pin(std::string_view id) const {
  if (!IsValidId(id)) return nullptr;
  std::lock_guard lock(mu_);
  std::optional<FileMeta> meta = LoadLocked(CanonicalId(id));
  if (!meta) return nullptr;
  // Under mu_ no Delete of this process comes between the check above and the link; one
  // through another replica may, and then the file is gone.
  Result<std::string> link = NewTempPath("pin");
  if (link.ok() && ::link(meta->data_path.c_str(), link->c_str()) == 0) {
    return std::shared_ptr<const Pinned>(new Pinned(std::move(*meta), std::move(*link), true));
  }
  if (link.ok() && errno == ENOENT && !Exists(meta->data_path)) return nullptr;
  // A filesystem without hard links: readers use the data file itself.
  std::string path = meta->data_path;
  return std::shared_ptr<const Pinned>(new Pinned(std::move(*meta), std::move(path), false));
}

std::vector<FileMeta> FileStore::List() const {
  std::vector<FileMeta> out;
  std::lock_guard lock(mu_);
  Result<std::vector<std::string>> names = ListNames(dir_);
  if (!names.ok()) return out;
  for (const std::string& name : *names) {
    std::string id;
    if (!IsMetaName(name, &id)) continue;
    if (std::optional<FileMeta> meta = LoadLocked(id)) out.push_back(std::move(*meta));
  }
  std::sort(out.begin(), out.end(), [](const FileMeta& a, const FileMeta& b) {
    return a.upload_time != b.upload_time ? a.upload_time < b.upload_time : a.file_id < b.file_id;
  });
  return out;
}

bool FileStore::Delete(std::string_view id) {
  if (!IsValidId(id)) return false;
  std::string canonical = CanonicalId(id);
  std::lock_guard lock(mu_);
  if (!LoadLocked(canonical)) return false;
  // Data first: a crash in between leaves metadata without data, which reads as absent.
  ::unlink(DataPath(canonical).c_str());
  ::unlink(MetaPath(canonical).c_str());
  if (auto it = charges_.find(canonical); it != charges_.end()) {
    stored_ -= std::min(stored_, it->second.bytes);
    uint64_t& mine = stored_by_[it->second.client];
    mine -= std::min(mine, it->second.bytes);
    if (mine == 0) stored_by_.erase(it->second.client);
    charges_.erase(it);
  }
  return true;
}

size_t FileStore::SweepOlderThan(double max_age_seconds, double now) {
  size_t deleted = 0;
  for (const FileMeta& meta : List()) {
    if (!meta.kind.empty()) continue;  // held by what made it (a session's snapshot)
    if (now - meta.upload_time > max_age_seconds && Delete(meta.file_id)) ++deleted;
  }
  return deleted;
}

std::string AttachmentContentDisposition(std::string_view filename) {
  std::string out = "attachment; filename=\"";
  bool ascii = true;
  for (unsigned char c : filename) {
    if (c >= 0x80) ascii = false;
    if (c < 0x20 || c == 0x7f) {
      // A raw CR/LF would split the header (response splitting).
      out.push_back('_');
    } else {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  if (!ascii) {
    // RFC 5987 attr-char: everything else is percent-encoded.
    static constexpr std::string_view kAttrChars = "!#$&+-.^_`|~";
    static constexpr char kHex[] = "0123456789ABCDEF";
    out += "; filename*=UTF-8''";
    for (unsigned char c : filename) {
      if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          kAttrChars.find(static_cast<char>(c)) != std::string_view::npos) {
        out.push_back(static_cast<char>(c));
      } else {
        out.push_back('%');
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
      }
    }
  }
  return out;
}

}  // namespace ci::daemon
