#include "k8s/token_file.h"

#include <sys/stat.h>

#include <utility>

#include "k8s/config_file.h"

namespace ci::k8s {
namespace {

constexpr char kSpace[] = " \t\r\n";

}  // namespace

TokenFile::TokenFile(std::string path, Clock now) : path_(std::move(path)), now_(std::move(now)) {}

Result<std::string> TokenFile::Read(Identity* seen) const {
  struct stat st;
  auto text = ReadConfigFile(path_, &st);
  if (!text.ok()) return text.status().Context("bearer token");
  *seen = Identity{st.st_mtim, st.st_ino, st.st_size};
  std::string& t = *text;
  t.erase(0, t.find_first_not_of(kSpace));
  t.erase(t.find_last_not_of(kSpace) + 1);
  if (t.empty()) return Status::Error("bearer token: " + path_ + " is empty");
  return std::move(t);
}

Result<std::string> TokenFile::Token() {
  std::lock_guard lock(mu_);
  struct stat st;
  bool changed = ::stat(path_.c_str(), &st) != 0 ||
                 !(Identity{st.st_mtim, st.st_ino, st.st_size} == identity_);
  bool stale = token_.empty() || now_() - read_at_ >= kMaxAge;
  if (!changed && !stale) return token_;
  Identity seen;
  auto fresh = Read(&seen);
  if (!fresh.ok()) {
    if (!token_.empty()) return token_;
    return fresh.status();
  }
  token_ = std::move(fresh).value();
  identity_ = seen;
  read_at_ = now_();
  return token_;
}

}  // namespace ci::k8s
