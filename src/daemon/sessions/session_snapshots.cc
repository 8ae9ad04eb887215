#include "daemon/sessions/session_snapshots.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "core/random.h"
#include "core/unix_time.h"

namespace ci::daemon {
namespace {

constexpr std::string_view kKind = "snapshot";
constexpr std::string_view kRecordPrefix = "snapshot-record:";
constexpr std::string_view kDataPrefix = "snapshot-data:";

std::string HexDigest(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, md, &n);
  return HexEncode(std::string(reinterpret_cast<char*>(md), n));
}

Result<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::Errno("opening " + path, errno);
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  close(fd);
  if (n < 0) return Status::Errno("reading " + path, errno);
  return out;
}

}  // namespace

Result<std::string> NewSnapshotId() {
  std::string hex = RandomHex(12);
  if (hex.empty()) return Status::Errno("getrandom", errno);
  return "snap-" + hex;
}

SnapshotStore::Writer::Writer(std::unique_ptr<FileStore::Upload> upload, uint64_t max_bytes)
    : upload_(std::move(upload)), max_bytes_(max_bytes), digest_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(digest_, EVP_sha256(), nullptr);
}

SnapshotStore::Writer::~Writer() { EVP_MD_CTX_free(digest_); }

Status SnapshotStore::Writer::Write(std::string_view data) {
  if (bytes() + data.size() > max_bytes_) over_max_ = true;
  EVP_DigestUpdate(digest_, data.data(), data.size());
  return upload_->Write(data);
}

Result<std::unique_ptr<SnapshotStore::Writer>> SnapshotStore::Begin(const std::string& client,
                                                                    uint64_t max_bytes) {
  auto upload = store_.BeginUpload(max_bytes, client);
  if (!upload.ok()) return upload.status();
  return std::unique_ptr<Writer>(new Writer(std::move(upload).value(), max_bytes));
}

Result<SnapshotRecord> SnapshotStore::Save(Writer& data, SnapshotRecord record) {
  record.data_bytes = data.bytes();
  record.data_sha256 = HexDigest(data.digest_);
  auto tar = data.upload_->Commit(std::string(kDataPrefix) + record.id, std::string(kKind));
  if (!tar.ok()) return tar.status();
  record.data_file = tar->file_id;
  auto upload = store_.BeginUpload(1 << 20, record.client);
  Status wrote = upload.ok() ? (*upload)->Write(json::Encode(record)) : upload.status();
  Result<FileMeta> meta = wrote;
  if (wrote.ok())
    meta = (*upload)->Commit(std::string(kRecordPrefix) + record.id, std::string(kKind));
  if (!meta.ok()) {
    store_.Delete(record.data_file);
    return meta.status();
  }
  // A record of the same id before this one (a session paused again) goes with its tar.
  for (const FileMeta& f : store_.List()) {
    if (f.kind == kKind && f.filename == std::string(kRecordPrefix) + record.id &&
        f.file_id != meta->file_id) {
      if (auto old = ReadSmallFile(f.data_path); old.ok()) {
        SnapshotRecord r;
        if (json::Decode(*old, &r)) store_.Delete(r.data_file);
      }
      store_.Delete(f.file_id);
    }
  }
  return record;
}

std::optional<std::string> SnapshotStore::RecordFileOf(std::string_view id) const {
  const std::string name = std::string(kRecordPrefix) + std::string(id);
  for (const FileMeta& f : store_.List()) {
    if (f.kind == kKind && f.filename == name) return f.file_id;
  }
  return std::nullopt;
}

std::optional<SnapshotRecord> SnapshotStore::Find(std::string_view id) const {
  auto file = RecordFileOf(id);
  if (!file) return std::nullopt;
  auto pin = store_.Pin(*file);
  if (!pin) return std::nullopt;
  auto text = ReadSmallFile(pin->path());
  SnapshotRecord r;
  if (!text.ok() || !json::Decode(*text, &r) || r.id != id) {
    spdlog::error("snapshot record {} is unreadable (store file {})", id, *file);
    return std::nullopt;
  }
  return r;
}

std::vector<SnapshotRecord> SnapshotStore::List(std::string_view kind) const {
  std::vector<SnapshotRecord> out;
  for (const FileMeta& f : store_.List()) {
    if (f.kind != kKind || !f.filename.starts_with(kRecordPrefix)) continue;
    auto text = ReadSmallFile(f.data_path);
    SnapshotRecord r;
    if (text.ok() && json::Decode(*text, &r) && r.kind == kind) out.push_back(std::move(r));
  }
  return out;
}

void SnapshotStore::Remove(const SnapshotRecord& record) {
  if (auto file = RecordFileOf(record.id)) store_.Delete(*file);
  store_.Delete(record.data_file);
}

Result<std::shared_ptr<const FileStore::Pinned>> SnapshotStore::OpenData(
    const SnapshotRecord& record) const {
  auto pin = store_.Pin(record.data_file);
  // The store does not serve a data file shorter than its metadata says.
  if (!pin) {
    return Status::Error("its files (store file " + record.data_file +
                         ") are missing or truncated");
  }
  int fd = open(pin->path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errno("opening the snapshot's files", errno);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  static thread_local char buf[1 << 16];
  uint64_t total = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    EVP_DigestUpdate(ctx, buf, n);
    total += n;
  }
  close(fd);
  std::string digest = HexDigest(ctx);
  EVP_MD_CTX_free(ctx);
  if (n < 0) return Status::Errno("reading the snapshot's files", errno);
  if (total != record.data_bytes || digest != record.data_sha256) {
    return Status::Error("its files are corrupt or truncated (" + std::to_string(total) +
                         " bytes, " + std::to_string(record.data_bytes) + " recorded; sha256 " +
                         (digest == record.data_sha256 ? "matches" : "differs") + ")");
  }
  return pin;
}

}  // namespace ci::daemon
