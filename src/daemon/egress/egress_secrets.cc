#include "daemon/egress/egress_secrets.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/header_text.h"

namespace ci::daemon {
namespace {

constexpr size_t kMaxSecretsFile = 1 << 20;

// A header name as RFC 9110 allows it (a token).
bool SecretsIsToken(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// Headers the proxy owns (the framing, the hop, the destination): a secret may not set them.
bool SecretsReservedHeader(std::string_view name) {
  for (std::string_view h :
       {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
        "upgrade", "accept-encoding", "expect"}) {
    if (EqualsIgnoringCase(name, h)) return true;
  }
  return name.size() >= 6 && EqualsIgnoringCase(name.substr(0, 6), "proxy-");
}

std::string_view SecretsTrim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::vector<EgressSecret>> ParseEgressSecrets(std::string_view text, std::string_view what) {
  std::vector<EgressSecret> out;
  size_t number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view line = SecretsTrim(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++number;
    if (line.empty() || line.front() == '#') continue;
    auto bad = [&](std::string why) {
      return Status::Error(std::string(what) + " line " + std::to_string(number) + ": " + why);
    };
    const size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      return bad("expected '<destination> <Header-Name>: <value>'");
    }
    auto rule = ParseEgressRule(line.substr(0, space));
    // Not the parser's message: it quotes the text, which may be a value written first.
    if (!rule.ok())
      return bad("the first word is not a domain or *.wildcard (with an optional :port)");
    if (rule->kind == EgressRule::Kind::kCidr) {
      return bad("a secret's destination is a domain or a *.wildcard, not an address or CIDR");
    }
    std::string_view rest = SecretsTrim(line.substr(space));
    const size_t colon = rest.find(':');
    std::string_view name = colon == std::string_view::npos ? rest : rest.substr(0, colon);
    if (colon == std::string_view::npos || !SecretsIsToken(name)) {
      return bad("expected a header name and ':' after the destination");
    }
    if (SecretsReservedHeader(name)) {
      return bad("the proxy sets " + std::string(name) + " itself");
    }
    std::string_view value = SecretsTrim(rest.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) return bad("the value has a control character");
    }
    if (value.size() < kMinSecretLength) {
      return bad("the value is shorter than " + std::to_string(kMinSecretLength) +
                 " characters (it is masked wherever it appears in answers)");
    }
    for (const EgressSecret& s : out) {
      if (s.destination.ToString() == rule->ToString() && EqualsIgnoringCase(s.header, name)) {
        return bad(std::string(name) + " for " + rule->ToString() + " is set on an earlier line");
      }
    }
    out.push_back({std::move(rule).value(), std::string(name), std::string(value)});
  }
  return out;
}

EgressSecrets::EgressSecrets(std::vector<EgressSecret> secrets) : secrets_(std::move(secrets)) {}

EgressSecrets::EgressSecrets(std::string path, std::vector<EgressSecret> secrets, FileId id)
    : path_(std::move(path)), secrets_(std::move(secrets)), id_(id) {}

namespace {

struct SecretsFileRead {
  Status status;
  std::string text;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  int64_t mtime_ns = 0;
};

// The file's text with the identity of the version read (fstat on the descriptor read from).
SecretsFileRead SecretsReadFile(const std::string& path) {
  SecretsFileRead out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.status = Status::Error("cannot open " + path + ": " + std::strerror(errno));
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    out.status = Status::Error(path + " is not a regular file");
    return out;
  }
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.size = st.st_size;
  out.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (static_cast<size_t>(st.st_size) > kMaxSecretsFile) {
    ::close(fd);
    out.status = Status::Error(path + " is larger than 1 MiB");
    return out;
  }
  char buf[8192];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) out.status = Status::Error("cannot read " + path + ": " + std::strerror(errno));
    if (n <= 0) break;
    out.text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

Result<std::shared_ptr<EgressSecrets>> EgressSecrets::Open(std::string path) {
  SecretsFileRead read = SecretsReadFile(path);
  if (!read.status.ok()) return read.status;
  auto secrets = ParseEgressSecrets(read.text, path);
  if (!secrets.ok()) return secrets.status();
  FileId id{read.dev, read.ino, read.size, read.mtime_ns};
  return std::shared_ptr<EgressSecrets>(
      new EgressSecrets(std::move(path), std::move(secrets).value(), id));
}

void EgressSecrets::ReloadIfChanged() {
  if (path_.empty()) return;
  struct stat st {};
  FileId now;
  if (::stat(path_.c_str(), &st) == 0) {
    now = {st.st_dev, st.st_ino, st.st_size,
           int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
  }
  if (now == id_) return;
  SecretsFileRead read = SecretsReadFile(path_);
  // Remembered good or not: a bad version is reported once, not on every lookup.
  id_ = read.status.ok() ? FileId{read.dev, read.ino, read.size, read.mtime_ns} : now;
  if (!read.status.ok()) {
    spdlog::warn("egress secrets: keeping the last good secrets: {}", read.status.message());
    return;
  }
  auto parsed = ParseEgressSecrets(read.text, path_);
  if (!parsed.ok()) {
    spdlog::warn("egress secrets: keeping the last good secrets: {}", parsed.status().message());
    return;
  }
  secrets_ = std::move(parsed).value();
  spdlog::info("egress secrets: read {} secrets from {}", secrets_.size(), path_);
}

std::vector<EgressSecret> EgressSecrets::For(std::string_view host, uint16_t port) {
  std::lock_guard lock(mu_);
  ReloadIfChanged();
  std::vector<EgressSecret> out;
  for (const EgressSecret& s : secrets_) {
    if (!s.destination.MatchesName(host, port)) continue;
    bool taken = false;
    for (const EgressSecret& o : out) taken = taken || EqualsIgnoringCase(o.header, s.header);
    if (!taken) out.push_back(s);
  }
  return out;
}

}  // namespace ci::daemon
