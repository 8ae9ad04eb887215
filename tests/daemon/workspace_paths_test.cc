#include "daemon/files/workspace_paths.h"

#include <gtest/gtest.h>

#include <string>

namespace ci::daemon {
namespace {

std::string Normalized(std::string_view path, bool reserved = false) {
  Result<std::string> r = NormalizeWorkspacePath(path, reserved);
  EXPECT_TRUE(r.ok()) << path << ": " << r.status().message();
  return r.ok() ? r.value() : "";
}

std::string Error(std::string_view path, bool reserved = false) {
  Result<std::string> r = NormalizeWorkspacePath(path, reserved);
  EXPECT_FALSE(r.ok()) << path << " was accepted as " << (r.ok() ? r.value() : "");
  return r.ok() ? "" : r.status().message();
}

TEST(WorkspacePathsTest, NormalizesEmptyAndDotComponents) {
  EXPECT_EQ(Normalized("a.txt"), "a.txt");
  EXPECT_EQ(Normalized("./a//b/./c.txt"), "a/b/c.txt");
  EXPECT_EQ(Normalized("a/b/"), "a/b");
  EXPECT_EQ(Normalized("dir/.env"), "dir/.env");
  EXPECT_EQ(Normalized("...txt"), "...txt");  // dots inside a name are not '..'
  EXPECT_EQ(Normalized("a/..b/c.."), "a/..b/c..");
  EXPECT_EQ(Normalized("sp ace/ü.txt"), "sp ace/ü.txt");
  EXPECT_EQ(Normalized("a\\..\\b"), "a\\..\\b");  // a backslash is an ordinary byte on Linux
}

TEST(WorkspacePathsTest, RejectsAbsolutePaths) {
  EXPECT_EQ(Error("/etc/passwd"), "File paths must be relative.");
  EXPECT_EQ(Error("/"), "File paths must be relative.");
  EXPECT_EQ(Error("//a"), "File paths must be relative.");
  // The first rule wins even when a later one also applies.
  EXPECT_EQ(Error("/../a"), "File paths must be relative.");
  EXPECT_EQ(Error("/__main__.py", true), "File paths must be relative.");
}

TEST(WorkspacePathsTest, RejectsParentComponents) {
  EXPECT_EQ(Error(".."), "File paths must not contain '..'.");
  EXPECT_EQ(Error("../a"), "File paths must not contain '..'.");
  EXPECT_EQ(Error("a/../b"), "File paths must not contain '..'.");
  EXPECT_EQ(Error("a/.."), "File paths must not contain '..'.");
  EXPECT_EQ(Error("./.."), "File paths must not contain '..'.");
  EXPECT_EQ(Error("a/..\n/b"), "File path contains an invalid character.");  // '..\n' is not '..'
}

TEST(WorkspacePathsTest, RejectsEmptyPaths) {
  EXPECT_EQ(Error(""), "File path must not be empty.");
  EXPECT_EQ(Error("."), "File path must not be empty.");
  EXPECT_EQ(Error("./"), "File path must not be empty.");
  EXPECT_EQ(Error(".//./"), "File path must not be empty.");
}

TEST(WorkspacePathsTest, ReservesRootEntrypointOnlyWhenAsked) {
  const std::string kReserved = "File path '__main__.py' is reserved for the execution entrypoint.";
  EXPECT_EQ(Error("__main__.py", true), kReserved);
  EXPECT_EQ(Error("./__main__.py", true), kReserved);
  EXPECT_EQ(Error(".//__main__.py/", true), kReserved);
  EXPECT_EQ(Normalized("__main__.py", false), "__main__.py");
  EXPECT_EQ(Normalized("pkg/__main__.py", true), "pkg/__main__.py");
  EXPECT_EQ(Normalized("__main__.pyc", true), "__main__.pyc");
  // '..' is checked before the reservation.
  EXPECT_EQ(Error("../__main__.py", true), "File paths must not contain '..'.");
}

TEST(WorkspacePathsTest, RejectsControlCharacters) {
  const std::string kInvalid = "File path contains an invalid character.";
  EXPECT_EQ(Error(std::string("a\0b", 3)), kInvalid);
  EXPECT_EQ(Error("a\nb"), kInvalid);
  EXPECT_EQ(Error("dir/\tx"), kInvalid);
  EXPECT_EQ(Error("\x1f"), kInvalid);
  EXPECT_EQ(Normalized("a\x7f"), "a\x7f");  // DEL is not below 0x20
}

TEST(WorkspacePathsTest, RejectsOverlongComponentsAndPaths) {
  EXPECT_EQ(Normalized(std::string(255, 'x')), std::string(255, 'x'));
  EXPECT_EQ(Error(std::string(256, 'x')), "File path component is too long.");
  EXPECT_EQ(Error("a/" + std::string(256, 'x') + "/b"), "File path component is too long.");

  std::string path;  // 20 components of 200 bytes + 19 slashes = 4019 bytes
  for (int i = 0; i < 20; ++i) {
    if (i > 0) path += '/';
    path.append(200, static_cast<char>('a' + i));  // not `"/" + string&&`: GCC 12 -Wrestrict
  }
  ASSERT_EQ(path.size(), 4019u);
  EXPECT_EQ(Normalized(path + "/" + std::string(76, 'z')).size(), 4096u);
  EXPECT_EQ(Error(path + "/" + std::string(77, 'z')), "File path is too long.");
  EXPECT_EQ(Error(path + "/" + std::string(77, 'z') + "/" + std::string(256, 'y')),
            "File path component is too long.");  // component checked before the whole
  // Only the normalized length counts: redundant "./" does not make a path too long.
  EXPECT_EQ(Normalized(std::string(5000, '/').replace(0, 1, ".") + "a"), "a");
}

}  // namespace
}  // namespace ci::daemon
