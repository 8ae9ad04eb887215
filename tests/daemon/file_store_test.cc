#include "daemon/files/file_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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
  // This process's own temp directory, next to the lock that says it is alive.
  EXPECT_EQ(store_->incoming_dir(), dir_ + "/.tmp/" + store_->owner());
  EXPECT_TRUE(store_->owner().starts_with("proc-")) << store_->owner();
  ASSERT_EQ(stat(store_->incoming_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(Entries(dir_ + "/.tmp"),
            (std::set<std::string>{store_->owner(), store_->owner() + ".lock"}));
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
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
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
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
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
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
}

TEST_F(FileStoreTest, AbandonedUploadIsDeleted) {
  {
    Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(kMiB);
    ASSERT_TRUE(up.ok());
    ASSERT_TRUE((*up)->Write("partial").ok());
    EXPECT_EQ(Entries(store_->incoming_dir()).size(), 1u);
  }
  EXPECT_TRUE(Entries(store_->incoming_dir()).empty());
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
    store_ = OpenQuotaStore();
    ASSERT_NE(store_, nullptr);
  }
  static constexpr uint64_t kQuota = 2 * kMiB;
  std::unique_ptr<FileStore> OpenQuotaStore() {
    auto s = FileStore::Open(dir_, kQuota);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // A new upload of 1 MiB more into `store` is refused as over the quota.
  static void ExpectNoRoomForAMiB(FileStore& store) {
    Result<std::unique_ptr<FileStore::Upload>> up = store.BeginUpload(10 * kMiB);
    ASSERT_TRUE(up.ok());
    EXPECT_FALSE((*up)->Write(Dense(kMiB)).ok());
    EXPECT_EQ((*up)->full(), FileStore::Full::kStore);
  }
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
  EXPECT_EQ((*up)->full(), FileStore::Full::kStore);
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
  FileStore::Full full = FileStore::Full::kNo;
  Result<FileMeta> meta = store_->AdoptFile(b, "b", &full);
  ASSERT_FALSE(meta.ok());
  EXPECT_EQ(full, FileStore::Full::kStore);
  EXPECT_TRUE(fs::exists(b)) << "the caller decides what happens to a refused file";
  EXPECT_EQ(store_->List().size(), 1u);
  // A sparse file of the same apparent size costs no blocks and fits.
  std::string c = store_->incoming_dir() + "/c";
  WriteFile(c, "c");
  ASSERT_EQ(truncate(c.c_str(), 8 * kMiB), 0);
  EXPECT_TRUE(store_->AdoptFile(c, "c", &full).ok());
  EXPECT_EQ(full, FileStore::Full::kNo);
}

TEST_F(FileStoreQuotaTest, FilesAlreadyStoredCountAfterReopening) {
  ASSERT_FALSE(Upload(Dense(kMiB + kMiB / 2), "kept.bin").file_id.empty());
  const uint64_t used = store_->used_bytes();
  store_.reset();
  store_ = OpenQuotaStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->used_bytes(), used);
  ExpectNoRoomForAMiB(*store_);
}

TEST_F(FileStoreQuotaTest, TheQuotaIsSharedByStoresOnOneDirectory) {
  std::unique_ptr<FileStore> b = OpenQuotaStore();
  ASSERT_NE(b, nullptr);

  // Stored through store_ (opened before b counted anything): b counts it.
  FileMeta first = Upload(Dense(kMiB + kMiB / 2), "first.bin");
  ASSERT_FALSE(first.file_id.empty());
  ExpectNoRoomForAMiB(*b);
  EXPECT_GE(b->used_bytes(), kMiB + kMiB / 2);

  // store_ has begun its next upload (and counted); b deletes: store_'s write finds the room
  // when it would otherwise be refused.
  Result<std::unique_ptr<FileStore::Upload>> again = store_->BeginUpload(10 * kMiB);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(b->Delete(first.file_id));
  ASSERT_TRUE((*again)->Write(Dense(kMiB + kMiB / 2)).ok()) << "the delete through b is unseen";
  Result<FileMeta> second = (*again)->Commit("second.bin");
  ASSERT_TRUE(second.ok()) << second.status().message();

  // An upload under way in one store counts in the other.
  ASSERT_TRUE(b->Delete(second->file_id));
  Result<std::unique_ptr<FileStore::Upload>> pending = store_->BeginUpload(10 * kMiB);
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE((*pending)->Write(Dense(kMiB + kMiB / 2)).ok());
  ExpectNoRoomForAMiB(*b);
}

TEST_F(FileStoreQuotaTest, AnAdoptionFindsRoomFreedByAnotherStore) {
  std::unique_ptr<FileStore> b = OpenQuotaStore();
  ASSERT_NE(b, nullptr);
  std::string a = b->incoming_dir() + "/a";
  WriteFile(a, Dense(kMiB + kMiB / 2));
  Result<FileMeta> kept = b->AdoptFile(a, "a");
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  store_.reset();
  store_ = OpenQuotaStore();  // counts b's file
  ASSERT_NE(store_, nullptr);
  std::string c = store_->incoming_dir() + "/c";
  WriteFile(c, Dense(kMiB));
  FileStore::Full full = FileStore::Full::kNo;
  EXPECT_FALSE(store_->AdoptFile(c, "c", &full).ok());
  EXPECT_EQ(full, FileStore::Full::kStore);
  // Deleted through b: store_ still counts it, but looks again before refusing.
  ASSERT_TRUE(b->Delete(kept->file_id));
  EXPECT_TRUE(store_->AdoptFile(c, "c", &full).ok()) << "the delete through b is unseen";
  EXPECT_EQ(full, FileStore::Full::kNo);
}

// Each API key's share of the store (issue #30 item 6): its uploads and its output files count
// against it, another key's do not, and a store opened later counts them from the metadata.
class FileStoreShareTest : public FileStoreQuotaTest {
 protected:
  static constexpr uint64_t kShare = 2 * kMiB;
  void Share(FileStore& store) {
    store.SetShares(
        [](const std::string& client) { return client == "alice" ? kShare : FileStore::kNoQuota; });
  }
  void SetUp() override {
    FileStoreTest::SetUp();
    store_.reset();
    auto s = FileStore::Open(dir_, 64 * kMiB);
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(s).value();
    Share(*store_);
  }
  Result<FileMeta> UploadAs(FileStore& store, const std::string& client, size_t bytes) {
    Result<std::unique_ptr<FileStore::Upload>> up = store.BeginUpload(10 * kMiB, client);
    if (!up.ok()) return up.status();
    if (Status s = (*up)->Write(Dense(bytes)); !s.ok()) {
      last_full_ = (*up)->full();
      return s;
    }
    return (*up)->Commit("f.bin");
  }
  FileStore::Full last_full_ = FileStore::Full::kNo;
};

TEST_F(FileStoreShareTest, UploadsAndOutputFilesCountAgainstTheKeysShareOnly) {
  Result<FileMeta> first = UploadAs(*store_, "alice", kMiB + kMiB / 2);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_GE(store_->used_bytes_of("alice"), kMiB + kMiB / 2);
  Result<FileMeta> over = UploadAs(*store_, "alice", kMiB);
  ASSERT_FALSE(over.ok()) << "alice stored 2.5 MiB with a 2 MiB share";
  EXPECT_EQ(last_full_, FileStore::Full::kShare);
  EXPECT_NE(over.status().message().find("share"), std::string::npos) << over.status().message();
  // An output file of alice's (adopted from a sandbox) meets the same share; bob's does not.
  std::string out = store_->incoming_dir() + "/out";
  WriteFile(out, Dense(kMiB));
  FileStore::Full full = FileStore::Full::kNo;
  EXPECT_FALSE(store_->AdoptFile(out, "out.bin", &full, "alice").ok());
  EXPECT_EQ(full, FileStore::Full::kShare);
  EXPECT_TRUE(fs::exists(out));
  Result<FileMeta> bobs = store_->AdoptFile(out, "out.bin", &full, "bob");
  ASSERT_TRUE(bobs.ok()) << bobs.status().message();
  EXPECT_EQ(bobs->client, "bob");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(UploadAs(*store_, "bob", kMiB + kMiB / 2).ok());
  // A failed upload leaves no reservation behind; deleting frees the share.
  EXPECT_LT(store_->used_bytes_of("alice"), kShare);
  ASSERT_TRUE(store_->Delete(first->file_id));
  EXPECT_EQ(store_->used_bytes_of("alice"), 0u);
  EXPECT_TRUE(UploadAs(*store_, "alice", kMiB + kMiB / 2).ok());
}

TEST_F(FileStoreShareTest, AnotherStoreOnTheDirectoryCountsTheKeysFiles) {
  ASSERT_TRUE(UploadAs(*store_, "alice", kMiB + kMiB / 2).ok());
  auto opened = FileStore::Open(dir_, 64 * kMiB);
  ASSERT_TRUE(opened.ok());
  std::unique_ptr<FileStore> b = std::move(opened).value();
  Share(*b);
  EXPECT_GE(b->used_bytes_of("alice"), kMiB + kMiB / 2) << "attributed from its metadata";
  EXPECT_EQ(b->used_bytes_of("bob"), 0u);
  EXPECT_FALSE(UploadAs(*b, "alice", kMiB).ok());
  EXPECT_EQ(last_full_, FileStore::Full::kShare);
  EXPECT_TRUE(UploadAs(*b, "bob", kMiB).ok());
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
  // A data file without metadata, metadata without data naming a dead publisher, and a data
  // file whose size disagrees with its metadata.
  const std::string orphan_data = "0b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  const std::string orphan_meta = "1b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  WriteFile(dir_ + "/" + orphan_data, "half");
  WriteFile(dir_ + "/" + orphan_meta + ".json",
            "{\"file_id\":\"" + orphan_meta +
                "\",\"filename\":\"x\",\"size_bytes\":1,\"upload_time\":1.0,"
                "\"owner\":\"proc-0123456789abcdef0123456789abcdef\"}");
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
  EXPECT_FALSE(fs::exists(dir_ + "/" + orphan_data));
  EXPECT_FALSE(fs::exists(dir_ + "/" + orphan_meta + ".json"));
  EXPECT_TRUE(fs::exists(dir_ + "/README"));  // unknown files are left alone
  ASSERT_TRUE(store_->Get(kept.file_id).has_value());
  EXPECT_EQ(ReadFile(store_->Get(kept.file_id)->data_path), "kept");
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST_F(FileStoreTest, OlderVersionsLeftoversGoOnlyOnceOld) {
  // Older versions wrote temp files directly in .tmp/ and metadata naming no owner; an older
  // process may still be at work on a shared directory, so these go by age alone.
  const std::string meta_id = "2b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  WriteFile(
      dir_ + "/" + meta_id + ".json",
      "{\"file_id\":\"" + meta_id + "\",\"filename\":\"x\",\"size_bytes\":1,\"upload_time\":1.0}");
  WriteFile(dir_ + "/.tmp/upload-deadbeef", "partial");
  fs::create_directory(dir_ + "/.tmp/junk");
  WriteFile(dir_ + "/.tmp/junk/f", "x");
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_TRUE(fs::exists(dir_ + "/" + meta_id + ".json"));
  EXPECT_TRUE(fs::exists(dir_ + "/.tmp/upload-deadbeef"));
  EXPECT_TRUE(fs::exists(dir_ + "/.tmp/junk/f"));
  EXPECT_EQ(store_->RemoveLeftovers(Now() + FileStore::kLeftoverAgeSec - 60), 0u);
  EXPECT_TRUE(fs::exists(dir_ + "/.tmp/upload-deadbeef"));

  EXPECT_EQ(store_->RemoveLeftovers(Now() + FileStore::kLeftoverAgeSec + 60), 3u);
  EXPECT_FALSE(fs::exists(dir_ + "/" + meta_id + ".json"));
  EXPECT_EQ(Entries(dir_ + "/.tmp"),
            (std::set<std::string>{store_->owner(), store_->owner() + ".lock"}));
}

// --- Several stores (replicas) on one directory.

TEST_F(FileStoreTest, TwoStoresSeeEachOthersFiles) {
  std::unique_ptr<FileStore> b = OpenStore();
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->incoming_dir(), store_->incoming_dir());
  FileMeta meta = Upload("through a", "a.txt");
  std::optional<FileMeta> got = b->Get(meta.file_id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->filename, "a.txt");
  EXPECT_EQ(ReadFile(got->data_path), "through a");
  ASSERT_EQ(b->List().size(), 1u);
  std::shared_ptr<const FileStore::Pinned> pin_a = store_->Pin(meta.file_id);
  std::shared_ptr<const FileStore::Pinned> pin_b = b->Pin(meta.file_id);
  ASSERT_NE(pin_a, nullptr);
  ASSERT_NE(pin_b, nullptr);
  EXPECT_EQ(ReadFile(pin_b->path()), "through a");

  // Deleted through b: gone for a too, while the readers that pinned it keep their bytes.
  EXPECT_TRUE(b->Delete(meta.file_id));
  EXPECT_FALSE(store_->Get(meta.file_id).has_value());
  EXPECT_TRUE(store_->List().empty());
  EXPECT_FALSE(store_->Delete(meta.file_id));
  EXPECT_EQ(store_->Pin(meta.file_id), nullptr);
  EXPECT_EQ(ReadFile(pin_a->path()), "through a");
  EXPECT_EQ(ReadFile(pin_b->path()), "through a");
}

TEST_F(FileStoreTest, OpeningLeavesALiveStoresWorkAlone) {
  // store_ has an upload under way, a pinned file and a collected output waiting to be adopted.
  FileMeta meta = Upload("pinned", "p");
  std::shared_ptr<const FileStore::Pinned> pin = store_->Pin(meta.file_id);
  ASSERT_NE(pin, nullptr);
  Result<std::unique_ptr<FileStore::Upload>> up = store_->BeginUpload(kMiB);
  ASSERT_TRUE(up.ok());
  ASSERT_TRUE((*up)->Write(std::string(100000, 'u')).ok());
  const std::string collected = store_->incoming_dir() + "/collected";
  WriteFile(collected, "output");
  const std::set<std::string> before = Entries(store_->incoming_dir());
  ASSERT_EQ(before.size(), 3u);

  std::unique_ptr<FileStore> b = OpenStore();
  ASSERT_NE(b, nullptr);
  // Even judged far in the future: a live owner's files have no age.
  b->RemoveLeftovers(Now() + 100 * FileStore::kLeftoverAgeSec);
  EXPECT_EQ(Entries(store_->incoming_dir()), before);
  Result<FileMeta> done = (*up)->Commit("u");
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_TRUE(b->Get(done->file_id).has_value());
  EXPECT_TRUE(store_->AdoptFile(collected, "out").ok());
  EXPECT_EQ(ReadFile(pin->path()), "pinned");

  // Closing a store removes its own temp directory and lock, not the other's.
  const std::string b_dir = b->incoming_dir();
  b.reset();
  EXPECT_FALSE(fs::exists(b_dir));
  EXPECT_FALSE(fs::exists(b_dir + ".lock"));
  EXPECT_TRUE(fs::exists(pin->path()));
}

TEST_F(FileStoreTest, ACommitInProgressIsKeptWhileItsPublisherLives) {
  // Publishing renames the metadata in before the data: for a moment another replica sees
  // metadata without data. Made here by hand, in the name of a live store and of a dead one.
  auto half = [&](const std::string& id, const std::string& owner) {
    WriteFile(dir_ + "/" + id + ".json",
              "{\"file_id\":\"" + id +
                  "\",\"filename\":\"x\",\"size_bytes\":4,\"upload_time\":1.0,"
                  "\"owner\":\"" +
                  owner + "\"}");
  };
  std::unique_ptr<FileStore> publisher = OpenStore();
  ASSERT_NE(publisher, nullptr);
  const std::string live_id = "3b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  const std::string dead_id = "4b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  half(live_id, publisher->owner());
  half(dead_id, "proc-00000000000000000000000000000000");
  EXPECT_EQ(store_->RemoveLeftovers(Now() + 100 * FileStore::kLeftoverAgeSec), 1u);
  EXPECT_FALSE(fs::exists(dir_ + "/" + dead_id + ".json"));
  ASSERT_TRUE(fs::exists(dir_ + "/" + live_id + ".json"));
  // The publisher completes the pair: the file is there, whole, for everyone.
  WriteFile(dir_ + "/" + live_id, "data");
  EXPECT_TRUE(store_->Get(live_id).has_value());

  // A real publish names its publisher: were its data not there yet, the metadata stays while
  // the publisher lives and goes as soon as anyone looks once it is dead.
  Result<std::unique_ptr<FileStore::Upload>> up = publisher->BeginUpload(kMiB);
  ASSERT_TRUE(up.ok());
  ASSERT_TRUE((*up)->Write("data").ok());
  Result<FileMeta> meta = (*up)->Commit("p");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  up->reset();
  ASSERT_EQ(::unlink(meta->data_path.c_str()), 0);
  EXPECT_EQ(store_->RemoveLeftovers(Now()), 0u);
  EXPECT_TRUE(fs::exists(meta->data_path + ".json"));
  publisher.reset();
  EXPECT_EQ(store_->RemoveLeftovers(Now()), 1u);
  EXPECT_FALSE(fs::exists(meta->data_path + ".json"));
}

TEST_F(FileStoreTest, AnotherProcessesTempFilesGoOnlyOnceItIsDead) {
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Another daemon process: its own store on the directory, with an upload under way.
    close(to_child[1]);
    close(from_child[0]);
    std::string report = "\n";
    auto other = FileStore::Open(dir_);
    std::unique_ptr<FileStore::Upload> up;
    if (other.ok()) {
      auto begun = (*other)->BeginUpload(kMiB);
      if (begun.ok() && (*begun)->Write(std::string(100000, 'c')).ok()) {
        up = std::move(begun).value();
        report = (*other)->incoming_dir() + "\n";
      }
    }
    if (write(from_child[1], report.data(), report.size()) < 0) _exit(1);
    char c;
    while (read(to_child[0], &c, 1) > 0) {
    }
    _exit(0);  // no destructors: to the store, a crash
  }
  close(to_child[0]);
  close(from_child[1]);
  std::string child_dir;
  char c;
  while (read(from_child[0], &c, 1) == 1 && c != '\n') child_dir.push_back(c);
  close(from_child[0]);
  auto finish_child = [&] {
    close(to_child[1]);
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  };
  if (child_dir.empty()) {
    finish_child();
    FAIL() << "the child could not open the store";
  }
  const std::set<std::string> child_files = Entries(child_dir);
  ASSERT_EQ(child_files.size(), 1u);
  EXPECT_TRUE(child_files.begin()->starts_with("upload-"));
  // And a commit of the child's in progress: its metadata is in place, its data not yet.
  const std::string half_id = "5b5f6a3c-1d2e-4f70-8a9b-0c1d2e3f4a5b";
  const std::string half = dir_ + "/" + half_id + ".json";
  WriteFile(half, "{\"file_id\":\"" + half_id +
                      "\",\"filename\":\"x\",\"size_bytes\":4,\"upload_time\":1.0,"
                      "\"owner\":\"" +
                      fs::path(child_dir).filename().string() + "\"}");

  // While it lives, opening (and sweeping) leaves its files alone; its upload counts.
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  store_->RemoveLeftovers(Now() + 100 * FileStore::kLeftoverAgeSec);
  EXPECT_EQ(Entries(child_dir), child_files);
  EXPECT_TRUE(fs::exists(half));
  EXPECT_GE(store_->used_bytes(), 90000u);

  finish_child();
  EXPECT_TRUE(fs::exists(child_dir)) << "nobody has looked yet";
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_FALSE(fs::exists(child_dir));
  EXPECT_FALSE(fs::exists(child_dir + ".lock"));
  EXPECT_FALSE(fs::exists(half));
  EXPECT_EQ(Entries(dir_ + "/.tmp"),
            (std::set<std::string>{store_->owner(), store_->owner() + ".lock"}));
  EXPECT_EQ(store_->used_bytes(), 0u);
}

TEST_F(FileStoreTest, ATempDirectoryWithoutItsLockIsNobodys) {
  const std::string stray = dir_ + "/.tmp/proc-0123456789abcdef0123456789abcdef";
  fs::create_directory(stray);
  WriteFile(stray + "/upload-1", "x");
  EXPECT_EQ(store_->RemoveLeftovers(Now()), 1u);
  EXPECT_FALSE(fs::exists(stray));
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
