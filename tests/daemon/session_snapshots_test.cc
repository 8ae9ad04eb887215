// Sessions' snapshots in a real file store (session_snapshots.h): the tar and the record are the
// key's store files, hidden from users' listings and the age sweep, found by id by any store on
// the directory, and a tar changed on disk is refused with what is wrong.
#include "daemon/sessions/session_snapshots.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/unix_time.h"

namespace ci::daemon {
namespace {

namespace fs = std::filesystem;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snapshot_store_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto store = FileStore::Open(root_ + "/store");
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
    snapshots_ = std::make_unique<SnapshotStore>(*store_);
  }
  void TearDown() override {
    snapshots_.reset();
    store_.reset();
    fs::remove_all(root_);
  }

  SnapshotRecord Save(const std::string& id, const std::string& kind, std::string_view data,
                      const std::string& client = "alice", uint64_t max = 1 << 20) {
    auto writer = snapshots_->Begin(client, max);
    EXPECT_TRUE(writer.ok());
    EXPECT_TRUE((*writer)->Write(data).ok());
    SnapshotRecord r;
    r.id = id;
    r.kind = kind;
    r.client = client;
    r.lost = {"python global 's': cannot pickle 'socket' object"};
    auto saved = snapshots_->Save(**writer, r);
    EXPECT_TRUE(saved.ok()) << saved.status().message();
    return saved.ok() ? *saved : r;
  }

  std::string root_;
  std::unique_ptr<FileStore> store_;
  std::unique_ptr<SnapshotStore> snapshots_;
};

TEST_F(SnapshotStoreTest, SavedIsFoundWithItsDigestAndHiddenFromUsers) {
  SnapshotRecord saved = Save("code-session-1", "pause", "tar bytes");
  EXPECT_EQ(saved.data_bytes, 9u);
  EXPECT_EQ(saved.data_sha256.size(), 64u);
  auto found = snapshots_->Find("code-session-1");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->client, "alice");
  EXPECT_EQ(found->lost, saved.lost);
  EXPECT_EQ(found->data_sha256, saved.data_sha256);
  EXPECT_FALSE(snapshots_->Find("code-session-2"));
  for (const FileMeta& f : store_->List()) {
    EXPECT_EQ(f.kind, "snapshot");
    EXPECT_FALSE(f.VisibleTo("alice")) << f.filename;
  }
  EXPECT_GT(store_->used_bytes_of("alice"), 0u) << "counted against the key's share";
  EXPECT_EQ(store_->SweepOlderThan(0, UnixNow() + 3600), 0u) << "never swept by age";
  auto data = snapshots_->OpenData(*found);
  ASSERT_TRUE(data.ok()) << data.status().message();
}

TEST_F(SnapshotStoreTest, ListsByKindAndRemovesBothFiles) {
  Save("code-session-1", "pause", "a");
  Save("snap-1", "named", "b");
  ASSERT_EQ(snapshots_->List("named").size(), 1u);
  EXPECT_EQ(snapshots_->List("named")[0].id, "snap-1");
  snapshots_->Remove(*snapshots_->Find("snap-1"));
  snapshots_->Remove(*snapshots_->Find("code-session-1"));
  EXPECT_TRUE(store_->List().empty());
}

TEST_F(SnapshotStoreTest, PausedAgainReplacesTheEarlierSnapshot) {
  Save("code-session-1", "pause", "first");
  Save("code-session-1", "pause", "second, longer");
  EXPECT_EQ(store_->List().size(), 2u) << "one record and one tar";
  EXPECT_EQ(snapshots_->Find("code-session-1")->data_bytes, 14u);
}

TEST_F(SnapshotStoreTest, ATarChangedOrCutOnDiskIsRefusedAndKept) {
  SnapshotRecord r = Save("code-session-1", "pause", std::string(4096, 'x'));
  const std::string path = store_->Get(r.data_file)->data_path;
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.write("y", 1);
  }
  auto changed = snapshots_->OpenData(r);
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.status().message().find("corrupt or truncated"), std::string::npos);
  EXPECT_NE(changed.status().message().find("sha256 differs"), std::string::npos);
  ASSERT_EQ(truncate(path.c_str(), 1000), 0);
  auto cut = snapshots_->OpenData(r);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
  EXPECT_TRUE(snapshots_->Find("code-session-1")) << "the snapshot stays";
}

TEST_F(SnapshotStoreTest, AWriterPastItsBoundSaysSo) {
  auto writer = snapshots_->Begin("alice", 10);
  ASSERT_TRUE(writer.ok());
  EXPECT_TRUE((*writer)->Write("12345").ok());
  EXPECT_FALSE((*writer)->over_max());
  EXPECT_FALSE((*writer)->Write("678901").ok());
  EXPECT_TRUE((*writer)->over_max());
}

}  // namespace
}  // namespace ci::daemon
