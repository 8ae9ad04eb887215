#include "daemon/files/file_store.h"

#include <dirent.h>
#include <fcntl.h>
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

namespace ci::daemon {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1024} * 1024;
// Metadata is a filename plus a few numbers; anything larger is not ours.
constexpr off_t kMaxMetaBytes = 1 << 20;
constexpr std::string_view kMetaSuffix = ".json";

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
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

Status StoreFullError(uint64_t quota) {
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

FileStore::FileStore(std::string dir, uint64_t quota_bytes)
    : dir_(std::move(dir)), tmp_dir_(dir_ + "/.tmp"), quota_(quota_bytes) {}

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

  std::unique_ptr<FileStore> store(new FileStore(abs, quota_bytes));
  // A crash leaves temp files (never visible under an id) and possibly one half of a
  // data/metadata pair; neither can be completed, so both go.
  Result<std::vector<std::string>> temps = ListNames(store->tmp_dir_);
  if (!temps.ok()) return temps.status();
  for (const std::string& name : *temps) {
    std::error_code ignored;
    fs::remove_all(store->tmp_dir_ + "/" + name, ignored);
  }
  Result<std::vector<std::string>> names = ListNames(abs);
  if (!names.ok()) return names.status();
  std::set<std::string> data, meta;
  for (const std::string& name : *names) {
    std::string id;
    if (IsMetaName(name, &id)) {
      meta.insert(id);
    } else if (IsDataName(name)) {
      data.insert(name);
    }
  }
  for (const std::string& id : data) {
    if (!meta.contains(id)) ::unlink(store->DataPath(id).c_str());
  }
  for (const std::string& id : meta) {
    if (!data.contains(id)) ::unlink(store->MetaPath(id).c_str());
  }
  // What is already stored counts against the quota.
  for (const std::string& id : data) {
    struct stat st;
    if (!meta.contains(id) || ::lstat(store->DataPath(id).c_str(), &st) != 0) continue;
    store->charges_[id] = StoreCharge(st);
    store->stored_ += StoreCharge(st);
  }
  return store;
}

Result<std::string> FileStore::NewTempPath(std::string_view prefix) const {
  std::string hex = RandomHex(16);
  if (hex.empty()) return Status::Errno("getrandom", errno);
  return tmp_dir_ + "/" + std::string(prefix) + "-" + hex;
}

Result<std::unique_ptr<FileStore::Upload>> FileStore::BeginUpload(uint64_t max_bytes) {
  Result<std::string> path = NewTempPath("upload");
  if (!path.ok()) return path.status();
  int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Errno("creating upload file", errno);
  return std::unique_ptr<Upload>(new Upload(this, fd, std::move(*path), max_bytes));
}

FileStore::Upload::Upload(FileStore* store, int fd, std::string temp_path, uint64_t max_bytes)
    : store_(store),
      fd_(fd),
      temp_path_(std::move(temp_path)),
      max_bytes_(max_bytes),
      writer_(fd, "upload") {}

FileStore::Upload::~Upload() { Discard(); }

void FileStore::Upload::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!finished_) ::unlink(temp_path_.c_str());
  finished_ = true;
  store_->Release(std::exchange(reserved_, 0));
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
    if (!store_->Reserve(most - reserved_)) {
      store_full_ = true;
      return Fail(StoreFullError(store_->quota_));
    }
    reserved_ = most;
  }
  if (Status s = writer_.Write(data); !s.ok()) return Fail(s.Context("writing upload"));
  const uint64_t taken = writer_.allocated() + kBlock + kMetaCharge;  // + the pending block
  if (taken < reserved_) store_->Release(std::exchange(reserved_, taken) - taken);
  return Status();
}

Result<FileMeta> FileStore::Upload::Commit(std::string filename) {
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
  store_->reserved_ -= std::exchange(reserved_, 0);
  Result<FileMeta> meta =
      store_->PublishLocked(temp_path_, std::move(filename), writer_.size(), StoreCharge(st));
  if (meta.ok()) {
    finished_ = true;
  } else {
    error_ = meta.status();
    Discard();  // nothing is reserved any more, so it does not take the lock we hold
  }
  return meta;
}

bool FileStore::Reserve(uint64_t more) {
  std::lock_guard lock(mu_);
  if (quota_ != kNoQuota && (stored_ + reserved_ > quota_ || more > quota_ - stored_ - reserved_)) {
    return false;
  }
  reserved_ += more;
  return true;
}

void FileStore::Release(uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mu_);
  reserved_ -= std::min(bytes, reserved_);
}

uint64_t FileStore::used_bytes() const {
  std::lock_guard lock(mu_);
  return stored_ + reserved_;
}

Result<FileMeta> FileStore::PublishLocked(const std::string& temp_data, std::string filename,
                                          uint64_t size, uint64_t charge) {
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
  meta.upload_time = NowSeconds();
  meta.data_path = DataPath(meta.file_id);

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
  // Data last: until this rename the id has metadata without data, which reads as absent.
  if (::rename(temp_data.c_str(), meta.data_path.c_str()) != 0) {
    int err = errno;
    ::unlink(MetaPath(meta.file_id).c_str());
    return Status::Errno("moving data into place", err);
  }
  FsyncDir(dir_);
  charges_[meta.file_id] = charge;
  stored_ += charge;
  return meta;
}

Result<FileMeta> FileStore::AdoptFile(const std::string& host_path, std::string filename,
                                      bool* store_full) {
  if (store_full != nullptr) *store_full = false;
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
  const bool over = quota_ != kNoQuota && stored_ + reserved_ + charge > quota_;
  if (over && store_full != nullptr) *store_full = true;
  Result<FileMeta> meta = over ? Result<FileMeta>(StoreFullError(quota_))
                               : PublishLocked(*temp, std::move(filename),
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
  Result<int> fd = OpenRegularNoFollow(MetaPath(id), &st);
  if (!fd.ok()) return std::nullopt;
  std::string text;
  if (st.st_size <= kMaxMetaBytes) {
    text.resize(static_cast<size_t>(st.st_size));
    ssize_t n = ::pread(*fd, text.data(), text.size(), 0);
    if (n != static_cast<ssize_t>(text.size())) text.clear();
  }
  ::close(*fd);

  FileMeta meta;
  if (!json::Decode(text, &meta)) return std::nullopt;
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
  // Under mu_ no Delete can come between the check above and the link.
  Result<std::string> link = NewTempPath("pin");
  if (link.ok() && ::link(meta->data_path.c_str(), link->c_str()) == 0) {
    return std::shared_ptr<const Pinned>(new Pinned(std::move(*meta), std::move(*link), true));
  }
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
    stored_ -= std::min(stored_, it->second);
    charges_.erase(it);
  }
  return true;
}

size_t FileStore::SweepOlderThan(double max_age_seconds, double now) {
  size_t deleted = 0;
  for (const FileMeta& meta : List()) {
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
