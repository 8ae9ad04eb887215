#include "daemon/files/file_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace ci::daemon {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1024 * 1024;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/file_store_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/store";
    store_ = OpenStore();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(root_);
  }

  std::unique_ptr<FileStore> OpenStore() {
    Result<std::unique_ptr<FileStore>> s = FileStore::Open(dir_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  FileMeta Upload(std::string_view data, std::string filename) {
    Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(10 * kMiB);
    EXPECT_TRUE(up.ok());
    EXPECT_TRUE((*up)->Write(data).ok());
    Result<FileMeta> meta = (*up)->Commit(std::move(filename));
    EXPECT_TRUE(meta.ok()) << meta.status().message();
    return meta.ok() ? meta.value() : FileMeta{};
  }

  std::string root_;
  std::string dir_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(FileStoreTest, OpenCreatesPrivateDirectories) {
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir_ + "/.tmp").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(store_->incoming_dir(), dir_ + "/.tmp");
  // Reopening an existing store works; a file in the way does not.
  EXPECT_NE(OpenStore(), nullptr);
  WriteFile(root_ + "/plain", "x");
  EXPECT_FALSE(FileStore::Open(root_ + "/plain").ok());
}

TEST_F(FileStoreTest, UploadRoundTrip) {
  Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(kMiB);
  ASSERT_TRUE(up.ok());
  ASSERT_TRUE((*up)->Write("hello ").ok());
  ASSERT_TRUE((*up)->Write("").ok());
  ASSERT_TRUE((*up)->Write("world").ok());
  Result<FileMeta> meta = (*up)->Commit("greeting.txt");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_TRUE(FileStore::IsValidId(meta->file_id));
  EXPECT_EQ(meta->file_id[14], '4');                                          // UUID version 4
  EXPECT_NE(std::string("89ab").find(meta->file_id[19]), std::string::npos);  // RFC 4122 variant
  EXPECT_EQ(meta->filename, "greeting.txt");
  EXPECT_EQ(meta->size_bytes, 11u);
  EXPECT_EQ(meta->data_path, dir_ + "/" + meta->file_id);
  double now = static_cast<double>(time(nullptr));
  EXPECT_NEAR(meta->upload_time, now, 5);
  EXPECT_EQ(ReadFile(meta->data_path), "hello world");
  // A second commit is refused and does not disturb the first.
  EXPECT_FALSE((*up)->Commit("again").ok());
  up->reset();

  std::optional<FileMeta> got = store_->Get(meta->file_id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->filename, "greeting.txt");
  EXPECT_EQ(got->size_bytes, 11u);
  EXPECT_EQ(got->upload_time, meta->upload_time);
  EXPECT_EQ(got->data_path, meta->data_path);
  EXPECT_TRUE(Entries(dir_ + "/.tmp").empty());
  EXPECT_EQ(Entries(dir_), (std::set<std::string>{".tmp", meta->file_id, meta->file_id + ".json"}));
}

TEST_F(FileStoreTest, UploadTimeReadsBackExactly) {
  // RapidJSON's default (fast) number parsing can be an ulp off; the listing must show the
  // same upload_time as the upload response.
  for (int i = 0; i < 100; ++i) {
    FileMeta meta = Upload("t", "t");
    std::optional<FileMeta> got = store_->Get(meta.file_id);
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(got->upload_time, meta.upload_time);
  }
}

TEST_F(FileStoreTest, EmptyFileAndEmptyName) {
  FileMeta meta = Upload("", "");
  EXPECT_EQ(meta.filename, "unnamed");
  EXPECT_EQ(meta.size_bytes, 0u);
  ASSERT_TRUE(store_->Get(meta.file_id).has_value());
}

TEST_F(FileStoreTest, HostileFilenamesAreOnlyMetadata) {
  const std::string names[] = {"../../etc/passwd",   "a\"b\\c\nd\re", std::string("nul\0byte", 8),
                               "\xff\xfe not utf-8", "/abs/path",     "\xe2\x82\xac.txt"};
  for (const std::string& name : names) {
    FileMeta meta = Upload("x", name);
    std::optional<FileMeta> got = store_->Get(meta.file_id);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->filename, name);
    EXPECT_EQ(got->data_path, dir_ + "/" + meta.file_id);
  }
  EXPECT_EQ(Entries(dir_).size(), 1 + 2 * std::size(names));
  EXPECT_FALSE(fs::exists(root_ + "/etc"));
}

TEST_F(FileStoreTest, SizeLimitLeavesNothingBehind) {
  Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(2 * kMiB);
  ASSERT_TRUE(up.ok());
  std::string mib(kMiB, 'a');
  ASSERT_TRUE((*up)->Write(mib).ok());
  ASSERT_TRUE((*up)->Write(mib).ok());  // exactly at the limit is fine
  Status s = (*up)->Write("x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "File size exceeds maximum of 2 MB");
  // The temp file is gone at once, before the upload object is destroyed.
  EXPECT_TRUE(Entries(dir_ + "/.tmp").empty());
  EXPECT_EQ((*up)->Write("y").message(), "File size exceeds maximum of 2 MB");
  EXPECT_FALSE((*up)->Commit("big.bin").ok());
  up->reset();
  EXPECT_EQ(Entries(dir_), std::set<std::string>{".tmp"});
  EXPECT_TRUE(store_->List().empty());

  // One write larger than the limit is refused as a whole.
  Result<std::unique_ptr<FileStore::Upload>> big = store_->BeginUpload(kMiB);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->Write(std::string(kMiB + 1, 'b')).message(),
            "File size exceeds maximum of 1 MB");
  EXPECT_EQ((*big)->bytes_written(), 0u);
  EXPECT_TRUE(Entries(dir_ + "/.tmp").empty());
}

TEST_F(FileStoreTest, AbandonedUploadIsDeleted) {
  {
    Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(kMiB);
    ASSERT_TRUE(up.ok());
    ASSERT_TRUE((*up)->Write("partial").ok());
    EXPECT_EQ(Entries(dir_ + "/.tmp").size(), 1u);
  }
  EXPECT_TRUE(Entries(dir_ + "/.tmp").empty());
  EXPECT_TRUE(store_->List().empty());
}

TEST_F(FileStoreTest, IdValidation) {
  EXPECT_TRUE(FileStore::IsValidId("123e4567-e89b-42d3-a456-426614174000"));
  EXPECT_TRUE(FileStore::IsValidId("123E4567-E89B-42D3-A456-426614174000"));
  for (std::string_view bad :
       {"", "a", "../../etc/passwd", "123e4567-e89b-42d3-a456-42661417400",
        "123e4567-e89b-42d3-a456-4266141740000", "123e4567e89b-42d3-a456-4266141740000",
        "123e4567-e89b-42d3-a456-42661417400g", "../e4567-e89b-42d3-a456-426614174000",
        "123e4567-e89b-42d3-a456-426614174000.json", "123e4567-e89b-42d3-a456/426614174000",
        " 23e4567-e89b-42d3-a456-426614174000"}) {
    EXPECT_FALSE(FileStore::IsValidId(bad)) << bad;
    EXPECT_FALSE(store_->Get(bad).has_value()) << bad;
    EXPECT_FALSE(store_->Delete(bad)) << bad;
  }
  EXPECT_FALSE(store_->Get(std::string("123e4567-e89b-42d3-a456-42661417400\0", 36)).has_value());
  // Valid but unknown.
  EXPECT_FALSE(store_->Get("123e4567-e89b-42d3-a456-426614174000").has_value());
  EXPECT_FALSE(store_->Delete("123e4567-e89b-42d3-a456-426614174000"));
}

TEST_F(FileStoreTest, UppercaseIdFindsTheFile) {
  FileMeta meta = Upload("data", "u.txt");
  std::string upper = meta.file_id;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  std::optional<FileMeta> got = store_->Get(upper);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->file_id, meta.file_id);  // canonical form
  EXPECT_TRUE(store_->Delete(upper));
  EXPECT_FALSE(store_->Get(meta.file_id).has_value());
}

TEST_F(FileStoreTest, ListAndDelete) {
  FileMeta a = Upload("a", "a.txt");
  FileMeta b = Upload("bb", "b.txt");
  FileMeta c = Upload("ccc", "c.txt");
  std::vector<FileMeta> all = store_->List();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_LE(all[0].upload_time, all[1].upload_time);
  EXPECT_LE(all[1].upload_time, all[2].upload_time);
  std::set<std::string> ids;
  for (const FileMeta& m : all) ids.insert(m.file_id);
  EXPECT_EQ(ids, (std::set<std::string>{a.file_id, b.file_id, c.file_id}));

  EXPECT_TRUE(store_->Delete(b.file_id));
  EXPECT_FALSE(store_->Delete(b.file_id));
  EXPECT_FALSE(store_->Get(b.file_id).has_value());
  EXPECT_FALSE(fs::exists(b.data_path));
  EXPECT_FALSE(fs::exists(b.data_path + ".json"));
  all = store_->List();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].file_id, a.file_id);
  EXPECT_EQ(all[1].file_id, c.file_id);
}

TEST_F(FileStoreTest, ListIsSortedByUploadTime) {
  // Rewrite the metadata times so the order differs from the creation order.
  FileMeta first = Upload("1", "one");
  FileMeta second = Upload("2", "two");
  std::string json = ReadFile(first.data_path + ".json");
  size_t at = json.find("\"upload_time\":");
  ASSERT_NE(at, std::string::npos);
  WriteFile(first.data_path + ".json", json.substr(0, at) + "\"upload_time\":4102444800.5}");
  std::vector<FileMeta> all = store_->List();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].file_id, second.file_id);
  EXPECT_EQ(all[1].file_id, first.file_id);
  EXPECT_EQ(all[1].upload_time, 4102444800.5);
}

TEST_F(FileStoreTest, SweepWithFakeClock) {
  FileMeta a = Upload("a", "a");
  FileMeta b = Upload("b", "b");
  double t = std::max(a.upload_time, b.upload_time);
  EXPECT_EQ(store_->SweepOlderThan(3600, t + 10), 0u);
  EXPECT_EQ(store_->SweepOlderThan(3600, t + 3599), 0u);
  EXPECT_EQ(store_->List().size(), 2u);
  EXPECT_EQ(store_->SweepOlderThan(3600, t + 3601), 2u);
  EXPECT_TRUE(store_->List().empty());
  EXPECT_EQ(Entries(dir_), std::set<std::string>{".tmp"});
  EXPECT_EQ(store_->SweepOlderThan(3600, t + 7200), 0u);
}

TEST_F(FileStoreTest, AdoptFileByRename) {
  std::string src = store_->incoming_dir() + "/collected";
  WriteFile(src, "from the sandbox");
  struct stat before;
  ASSERT_EQ(stat(src.c_str(), &before), 0);
  Result<FileMeta> meta = store_->AdoptFile(src, "out/result.csv");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->filename, "out/result.csv");
  EXPECT_EQ(meta->size_bytes, 16u);
  EXPECT_FALSE(fs::exists(src));
  struct stat after;
  ASSERT_EQ(stat(meta->data_path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // moved, not copied
  EXPECT_EQ(ReadFile(meta->data_path), "from the sandbox");
  ASSERT_TRUE(store_->Get(meta->file_id).has_value());
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
}

TEST_F(FileStoreTest, AdoptFileCopiesWhenHardLinked) {
  std::string src = root_ + "/src.bin";
  std::string link = root_ + "/link.bin";
  WriteFile(src, "shared inode");
  ASSERT_EQ(::link(src.c_str(), link.c_str()), 0);
  Result<FileMeta> meta = store_->AdoptFile(src, "");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->filename, "unnamed");
  EXPECT_FALSE(fs::exists(src));
  // Writing through the other link must not change the stored file.
  WriteFile(link, "changed!");
  EXPECT_EQ(ReadFile(meta->data_path), "shared inode");
}

TEST_F(FileStoreTest, AdoptFileAcrossFilesystems) {
  // /dev/shm is a tmpfs on Linux, so rename() from it fails with EXDEV.
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  struct stat shm, store;
  ASSERT_EQ(stat("/dev/shm", &shm), 0);
  ASSERT_EQ(stat(dir_.c_str(), &store), 0);
  if (shm.st_dev == store.st_dev) GTEST_SKIP() << "/dev/shm is on the store's filesystem";
  std::string src = "/dev/shm/file_store_test." + std::to_string(getpid());
  WriteFile(src, std::string(200000, 'z'));
  Result<FileMeta> meta = store_->AdoptFile(src, "z.txt");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->size_bytes, 200000u);
  EXPECT_FALSE(fs::exists(src));
  EXPECT_EQ(ReadFile(meta->data_path), std::string(200000, 'z'));
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
}

TEST_F(FileStoreTest, AdoptFileRefusesSymlinksAndDirectories) {
  std::string target = root_ + "/secret";
  WriteFile(target, "secret");
  std::string link = store_->incoming_dir() + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(store_->AdoptFile(link, "l").ok());
  EXPECT_TRUE(fs::is_symlink(link));  // left where it was
  fs::create_directory(root_ + "/d");
  EXPECT_FALSE(store_->AdoptFile(root_ + "/d", "d").ok());
  EXPECT_FALSE(store_->AdoptFile(root_ + "/missing", "m").ok());
  EXPECT_TRUE(store_->List().empty());
  EXPECT_EQ(Entries(dir_), std::set<std::string>{".tmp"});
}

uint64_t DiskBytes(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST_F(FileStoreTest, ZerosAreStoredAsHoles) {
  // 64 MiB of which 5 bytes are not zero: the upload costs a few blocks, and reads back whole.
  Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(100 * kMiB);
  ASSERT_TRUE(up.ok());
  const std::string zeros(kMiB, '\0');
  ASSERT_TRUE((*up)->Write("start").ok());
  for (int i = 0; i < 64; ++i) ASSERT_TRUE((*up)->Write(zeros).ok());
  Result<FileMeta> meta = (*up)->Commit("sparse.bin");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->size_bytes, 64 * kMiB + 5);
  EXPECT_LE(DiskBytes(meta->data_path), 64u * 1024);
  EXPECT_EQ(ReadFile(meta->data_path), "start" + std::string(64 * kMiB, '\0'));
  EXPECT_LE(store_->used_bytes(), 128u * 1024);  // the quota counts disk use, not apparent size

  // A copy from another filesystem keeps the holes too.
  if (!fs::is_directory("/dev/shm")) return;
  std::string src = "/dev/shm/file_store_test_sparse." + std::to_string(getpid());
  {
    std::ofstream out(src, std::ios::binary);
    out << "x";
  }
  ASSERT_EQ(truncate(src.c_str(), 32 * kMiB), 0);
  Result<FileMeta> adopted = store_->AdoptFile(src, "copied.bin");
  ASSERT_TRUE(adopted.ok()) << adopted.status().message();
  EXPECT_EQ(adopted->size_bytes, 32 * kMiB);
  EXPECT_LE(DiskBytes(adopted->data_path), 64u * 1024);
}

class FileStoreQuotaTest : public FileStoreTest {
 protected:
  void SetUp() override {
    FileStoreTest::SetUp();
    store_.reset();
    auto s = FileStore::Open(dir_, kQuota);
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(s).value();
  }
  static constexpr uint64_t kQuota = 2 * kMiB;
  // Random bytes: nothing for the store to leave as a hole.
  static std::string Dense(size_t n) {
    std::string out(n, '\0');
    uint32_t x = 12345;
    for (char& c : out) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
    return out;
  }
};

TEST_F(FileStoreQuotaTest, UploadOverTheQuotaIsRefusedWholeAndFreesItsSpace) {
  FileMeta first = Upload(Dense(kMiB + kMiB / 2), "first.bin");
  ASSERT_FALSE(first.file_id.empty());
  const uint64_t used = store_->used_bytes();
  EXPECT_GE(used, kMiB + kMiB / 2);

  Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(10 * kMiB);
  ASSERT_TRUE(up.ok());
  Status s;
  for (int i = 0; i < 16 && s.ok(); ++i) s = (*up)->Write(Dense(64 * 1024));
  ASSERT_FALSE(s.ok()) << "1 MiB more went into a 2 MiB store holding 1.5 MiB";
  EXPECT_TRUE((*up)->store_full());
  EXPECT_NE(s.message().find("file storage is full"), std::string::npos) << s.message();
  EXPECT_FALSE((*up)->Commit("second.bin").ok());
  up->reset();
  // Nothing of it is left: not listed, no temp file, no reservation.
  EXPECT_EQ(store_->List().size(), 1u);
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
  EXPECT_EQ(store_->used_bytes(), used);

  // Deleting frees the quota again.
  ASSERT_TRUE(store_->Delete(first.file_id));
  EXPECT_EQ(store_->used_bytes(), 0u);
  EXPECT_FALSE(Upload(Dense(kMiB + kMiB / 2), "third.bin").file_id.empty());
}

TEST_F(FileStoreQuotaTest, AdoptOverTheQuotaIsRefusedAndTheSourceKept) {
  std::string a = store_->incoming_dir() + "/a";
  WriteFile(a, Dense(kMiB + kMiB / 2));
  ASSERT_TRUE(store_->AdoptFile(a, "a").ok());
  std::string b = store_->incoming_dir() + "/b";
  WriteFile(b, Dense(kMiB));
  bool full = false;
  Result<FileMeta> meta = store_->AdoptFile(b, "b", &full);
  ASSERT_FALSE(meta.ok());
  EXPECT_TRUE(full);
  EXPECT_TRUE(fs::exists(b)) << "the caller decides what happens to a refused file";
  EXPECT_EQ(store_->List().size(), 1u);
  // A sparse file of the same apparent size costs no blocks and fits.
  std::string c = store_->incoming_dir() + "/c";
  WriteFile(c, "c");
  ASSERT_EQ(truncate(c.c_str(), 8 * kMiB), 0);
  EXPECT_TRUE(store_->AdoptFile(c, "c", &full).ok());
  EXPECT_FALSE(full);
}

TEST_F(FileStoreQuotaTest, FilesAlreadyStoredCountAfterReopening) {
  ASSERT_FALSE(Upload(Dense(kMiB + kMiB / 2), "kept.bin").file_id.empty());
  const uint64_t used = store_->used_bytes();
  store_.reset();
  auto s = FileStore::Open(dir_, kQuota);
  ASSERT_TRUE(s.ok());
  store_ = std::move(s).value();
  EXPECT_EQ(store_->used_bytes(), used);
  Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(10 * kMiB);
  ASSERT_TRUE(up.ok());
  EXPECT_FALSE((*up)->Write(Dense(kMiB)).ok());
  EXPECT_TRUE((*up)->store_full());
}

TEST_F(FileStoreTest, PinnedBytesSurviveADelete) {
  FileMeta meta = Upload("staged bytes", "in.bin");
  std::shared_ptr<const FileStore::Pinned> pin = store_->Pin(meta.file_id);
  ASSERT_NE(pin, nullptr);
  EXPECT_EQ(pin->meta().file_id, meta.file_id);
  EXPECT_NE(pin->path(), meta.data_path);
  ASSERT_TRUE(store_->Delete(meta.file_id));
  EXPECT_FALSE(store_->Get(meta.file_id).has_value());
  EXPECT_EQ(ReadFile(pin->path()), "staged bytes");  // the reader still has them
  const std::string path = pin->path();
  pin.reset();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
  EXPECT_EQ(store_->Pin(meta.file_id), nullptr);
  EXPECT_EQ(store_->Pin("not-an-id"), nullptr);
}

TEST_F(FileStoreTest, CrashLeftoversAreAbsentAndCleanedOnOpen) {
  FileMeta kept = Upload("kept", "kept.txt");
  // A data file without metadata, metadata without data, a half-written temp file, a stray
  // directory in .tmp, and a data file whose size disagrees with its metadata.
  const std::string orphan_data = "0b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  const std::string orphan_meta = "1b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  WriteFile(dir_ + "/" + orphan_data, "half");
  WriteFile(dir_ + "/" + orphan_meta + ".json",
            "{\"file_id\":\"" + orphan_meta +
                "\",\"filename\":\"x\",\"size_bytes\":1,\"upload_time\":1.0}");
  WriteFile(dir_ + "/.tmp/upload-deadbeef", "partial");
  fs::create_directory(dir_ + "/.tmp/junk");
  WriteFile(dir_ + "/.tmp/junk/f", "x");
  FileMeta truncated = Upload("12345", "t");
  WriteFile(truncated.data_path, "12");
  WriteFile(dir_ + "/README", "not ours");

  EXPECT_FALSE(store_->Get(orphan_data).has_value());
  EXPECT_FALSE(store_->Get(orphan_meta).has_value());
  EXPECT_FALSE(store_->Get(truncated.file_id).has_value());
  EXPECT_FALSE(store_->Delete(orphan_data));
  std::vector<FileMeta> listed = store_->List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].file_id, kept.file_id);

  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_TRUE(Entries(dir_ + "/.tmp").empty());
  EXPECT_FALSE(fs::exists(dir_ + "/" + orphan_data));
  EXPECT_FALSE(fs::exists(dir_ + "/" + orphan_meta + ".json"));
  EXPECT_TRUE(fs::exists(dir_ + "/README"));  // unknown files are left alone
  ASSERT_TRUE(store_->Get(kept.file_id).has_value());
  EXPECT_EQ(ReadFile(store_->Get(kept.file_id)->data_path), "kept");
}

TEST_F(FileStoreTest, CorruptMetadataIsAbsent) {
  FileMeta meta = Upload("abc", "a");
  const std::string bad[] = {
      "",
      "not json",
      "[]",
      "{\"file_id\":\"x\"}",
      "{\"file_id\":\"" + meta.file_id + "\",\"filename\":1,\"size_bytes\":3,\"upload_time\":1}",
      "{\"file_id\":\"" + meta.file_id +
          "\",\"filename\":\"a\",\"size_bytes\":-3,\"upload_time\":1}"};
  for (const std::string& json : bad) {
    WriteFile(meta.data_path + ".json", json);
    EXPECT_FALSE(store_->Get(meta.file_id).has_value()) << json;
  }
  // Metadata naming another id does not alias it.
  FileMeta other = Upload("abc", "other");
  WriteFile(meta.data_path + ".json", ReadFile(other.data_path + ".json"));
  EXPECT_FALSE(store_->Get(meta.file_id).has_value());
}

TEST_F(FileStoreTest, ConcurrentUploadsAndReads) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20;
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string body = std::to_string(t) + ":" + std::to_string(i);
        auto up = store_->BeginUpload(kMiB);
        if (!up.ok() || !(*up)->Write(body).ok()) continue;
        Result<FileMeta> meta = (*up)->Commit(body);
        if (!meta.ok()) continue;
        ids[t].push_back(meta->file_id);
        store_->List();
        if (i % 2) store_->Delete(meta->file_id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  size_t kept = 0;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(ids[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) {
      std::optional<FileMeta> m = store_->Get(ids[t][i]);
      EXPECT_EQ(m.has_value(), i % 2 == 0);
      if (m) {
        ++kept;
        EXPECT_EQ(ReadFile(m->data_path), m->filename);
      }
    }
  }
  EXPECT_EQ(store_->List().size(), kept);
}

TEST(AttachmentContentDispositionTest, EscapesQuotesAndControls) {
  EXPECT_EQ(AttachmentContentDisposition("report.pdf"), "attachment; filename=\"report.pdf\"");
  EXPECT_EQ(AttachmentContentDisposition("a\"b\\c"), R"(attachment; filename="a\"b\\c")");
  EXPECT_EQ(AttachmentContentDisposition("evil\r\nSet-Cookie: x\t\x7f"),
            "attachment; filename=\"evil__Set-Cookie: x__\"");
  EXPECT_EQ(AttachmentContentDisposition(std::string("a\0b", 3)), "attachment; filename=\"a_b\"");
  EXPECT_EQ(AttachmentContentDisposition("../x;y=z"), "attachment; filename=\"../x;y=z\"");
  EXPECT_EQ(AttachmentContentDisposition(""), "attachment; filename=\"\"");
}

TEST(AttachmentContentDispositionTest, AddsExtendedFilenameForNonAscii) {
  EXPECT_EQ(AttachmentContentDisposition("\xe2\x82\xac rates \"q\".txt"),
            "attachment; filename=\"\xe2\x82\xac rates \\\"q\\\".txt\"; "
            "filename*=UTF-8''%E2%82%AC%20rates%20%22q%22.txt");
  EXPECT_EQ(AttachmentContentDisposition("\xc3\xa9\n!#$&+-.^_`|~'*%"),
            "attachment; filename=\"\xc3\xa9_!#$&+-.^_`|~'*%\"; "
            "filename*=UTF-8''%C3%A9%0A!#$&+-.^_`|~%27%2A%25");
}

}  // namespace
}  // namespace ci::daemon
