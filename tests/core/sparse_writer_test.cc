#include "core/sparse_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <string>

namespace ci {
namespace {

class SparseWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sparse_writer_test.XXXXXX";
    fd_ = mkstemp(tmpl);
    ASSERT_GE(fd_, 0);
    path_ = tmpl;
  }
  void TearDown() override {
    close(fd_);
    unlink(path_.c_str());
  }
  std::string Contents() {
    struct stat st {};
    EXPECT_EQ(fstat(fd_, &st), 0);
    std::string out(static_cast<size_t>(st.st_size), '\0');
    EXPECT_EQ(pread(fd_, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    return out;
  }
  uint64_t DiskBytes() {
    fsync(fd_);
    struct stat st {};
    EXPECT_EQ(fstat(fd_, &st), 0);
    return static_cast<uint64_t>(st.st_blocks) * 512;
  }
  int fd_ = -1;
  std::string path_;
};

TEST_F(SparseWriterTest, ZerosBecomeHolesAndReadBackAsZeros) {
  SparseWriter w(fd_, "test file");
  const std::string zeros(8 << 20, '\0');
  ASSERT_TRUE(w.Write("head").ok());
  ASSERT_TRUE(w.Write(zeros).ok());
  ASSERT_TRUE(w.Write("tail").ok());
  ASSERT_TRUE(w.Write(zeros).ok());  // trailing zeros: only the length records them
  ASSERT_TRUE(w.Finish().ok());
  std::string expect = "head" + zeros + "tail" + zeros;
  EXPECT_EQ(Contents(), expect);
  EXPECT_EQ(w.size(), expect.size());
  EXPECT_EQ(w.allocated(), 2 * SparseWriter::kBlock);  // the blocks holding "head" and "tail"
  EXPECT_LE(DiskBytes(), 64u * 1024) << "8 MiB runs of zeros were written as data";
}

TEST_F(SparseWriterTest, HolesAndDataInPiecesOfAnySize) {
  // Random data, zero runs and holes in random piece sizes, so every alignment case is hit.
  std::mt19937 rng(7);
  SparseWriter w(fd_, "test file");
  std::string expect;
  for (int i = 0; i < 400; ++i) {
    size_t n = rng() % 20000;
    switch (rng() % 3) {
      case 0: {
        std::string piece(n, '\0');
        for (char& c : piece) c = static_cast<char>(rng() % 255 + 1);
        ASSERT_TRUE(w.Write(piece).ok());
        expect += piece;
        break;
      }
      case 1:
        ASSERT_TRUE(w.Write(std::string(n, '\0')).ok());
        expect.append(n, '\0');
        break;
      default:
        ASSERT_TRUE(w.Hole(n).ok());
        expect.append(n, '\0');
    }
  }
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_EQ(w.size(), expect.size());
  EXPECT_TRUE(Contents() == expect) << "contents differ";
  EXPECT_LE(w.allocated(), expect.size() + SparseWriter::kBlock);
}

TEST_F(SparseWriterTest, OnlyAHole) {
  SparseWriter w(fd_, "test file");
  ASSERT_TRUE(w.Hole(uint64_t{50} << 30).ok());  // 50 GiB, nothing written
  ASSERT_TRUE(w.Finish().ok());
  struct stat st {};
  ASSERT_EQ(fstat(fd_, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), uint64_t{50} << 30);
  EXPECT_EQ(w.allocated(), 0u);
  EXPECT_LE(DiskBytes(), 64u * 1024);
}

}  // namespace
}  // namespace ci
