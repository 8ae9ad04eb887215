#include "daemon/auth/api_keys.h"

#include <fmt/format.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include "daemon/auth/secrets_equal.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;

constexpr size_t kMinKeyLength = 16;
constexpr auto kCheckEvery = 1s;

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// RFC 6750's b64token: what `Authorization: Bearer` can carry.
bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
         c == '~' || c == '+' || c == '/' || c == '=';
}

std::array<unsigned char, 32> Sha256(std::string_view s) {
  std::array<unsigned char, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// `name=value` into `limits`; an error names what is wrong, never echoing the field (a key put
// there by mistake stays out of the logs).
Status ParseLimit(std::string_view field, KeyLimits& limits) {
  const size_t eq = field.find('=');
  const std::string_view name = field.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? "" : field.substr(eq + 1);
  uint64_t n = 0;
  const bool number =
      !value.empty() && value.size() <= 9 &&
      std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (number) n = std::stoull(std::string(value));
  auto set = [&](auto& slot, uint64_t least) -> Status {
    if (slot) return Status::Error(fmt::format("{} is given twice", name));
    if (!number || n < least) {
      return Status::Error(
          fmt::format("{}= needs a whole number from {} to 999999999", name, least));
    }
    slot = static_cast<std::remove_reference_t<decltype(*slot)>>(n);
    return Status();
  };
  if (name == "sessions") return set(limits.sessions, 0);
  if (name == "executions") return set(limits.executions, 0);
  if (name == "files_mb") return set(limits.files_mb, 0);
  if (name == "mcp_sessions") return set(limits.mcp_sessions, 1);
  if (name == "model_calls") return set(limits.model_calls, 0);
  if (name == "egress") {
    if (limits.egress) return Status::Error("egress is given twice");
    if (value == "none") return (limits.egress.emplace(), Status());
    auto rules = ParseEgressRules(value, "egress=");
    if (!rules.ok()) return rules.status();
    if (rules->empty()) return Status::Error("egress= needs rules, or none");
    limits.egress = std::move(rules).value();
    return Status();
  }
  return Status::Error(
      "a field after the key is not a limit (sessions=, executions=, files_mb=, mcp_sessions=, "
      "model_calls=, egress=)");
}

}  // namespace

Result<std::vector<ApiKey>> ParseApiKeys(std::string_view text) {
  std::vector<ApiKey> keys;
  std::set<std::string> names;
  std::set<std::array<unsigned char, 32>> digests;
  size_t number = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++number;
    const std::string at = "line " + std::to_string(number) + ": ";
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    const std::vector<std::string_view> f = Fields(line);
    if (f.empty()) continue;
    if (f.size() < 2) {
      return Status::Error(at + "expected NAME and KEY separated by whitespace, found " +
                           std::to_string(f.size()) + " field(s)");
    }
    const std::string_view name = f[0], key = f[1];
    if (name.size() > 64 || !std::all_of(name.begin(), name.end(), IsNameChar)) {
      return Status::Error(at + "the NAME must be 1 to 64 of A-Z a-z 0-9 . _ -");
    }
    if (key.size() < kMinKeyLength) {
      return Status::Error(at + "the key of " + std::string(name) + " is shorter than " +
                           std::to_string(kMinKeyLength) +
                           " characters (make one with `openssl rand -hex 32`)");
    }
    if (!std::all_of(key.begin(), key.end(), IsTokenChar)) {
      return Status::Error(at + "the key of " + std::string(name) +
                           " has a character a bearer token cannot carry (use A-Z a-z 0-9 "
                           "- . _ ~ + / =)");
    }
    ApiKey k{std::string(name), Sha256(key), {}};
    for (size_t i = 2; i < f.size(); ++i) {
      if (Status s = ParseLimit(f[i], k.limits); !s.ok()) {
        return Status::Error(fmt::format("{}the limits of {}: {}", at, k.name, s.message()));
      }
    }
    if (!names.insert(k.name).second) {
      return Status::Error(at + "the NAME " + k.name + " is given twice");
    }
    if (!digests.insert(k.digest).second) {
      return Status::Error(at + "the key of " + k.name + " is another name's key too");
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

bool ApiKeys::FileId::operator==(const FileId& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec;
}

Result<std::unique_ptr<ApiKeys>> ApiKeys::Open(std::string path, Clock clock) {
  std::unique_ptr<ApiKeys> keys(new ApiKeys(path, std::move(clock)));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::Errno("API_KEYS_FILE " + path, errno);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return Status::Error("API_KEYS_FILE " + path + ": cannot be read");
  auto parsed = ParseApiKeys(text.str());
  if (!parsed.ok()) return parsed.status().Context("API_KEYS_FILE " + path);
  if (parsed->empty()) {
    return Status::Error("API_KEYS_FILE " + path + " has no key: every request would be refused");
  }
  keys->keys_ = std::move(parsed).value();
  keys->read_ = FileId{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
  keys->checked_ = keys->clock_();
  return keys;
}

void ApiKeys::ReloadIfChanged() {
  const auto now = clock_();
  if (now - checked_ < kCheckEvery) return;
  checked_ = now;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (!keys_.empty()) {
      spdlog::error("API_KEYS_FILE {}: {}; no API key is accepted until it is back", path_,
                    std::strerror(errno));
      keys_.clear();
      if (on_load_) on_load_(keys_);
    }
    read_.reset();
    return;
  }
  const FileId id{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
  if (read_ && *read_ == id) return;
  read_ = id;
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = in ? ParseApiKeys(text.str()) : Status::Error("cannot be read");
  if (!parsed.ok()) {
    spdlog::error("API_KEYS_FILE {} changed but {}; keeping the {} key(s) read before", path_,
                  parsed.status().message(), keys_.size());
    return;
  }
  keys_ = std::move(parsed).value();
  spdlog::info("API_KEYS_FILE {} re-read: {} key(s)", path_, keys_.size());
  if (on_load_) on_load_(keys_);
}

void ApiKeys::OnLoad(std::function<void(const std::vector<ApiKey>&)> listener) {
  on_load_ = std::move(listener);
  if (on_load_) on_load_(keys_);
}

Caller ApiKeys::Authenticate(std::optional<std::string_view> authorization) {
  ReloadIfChanged();
  if (!authorization) return {"", "Missing API key: send 'Authorization: Bearer <key>'", false};
  std::string_view v = *authorization;
  constexpr std::string_view kScheme = "bearer ";
  if (v.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), v.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    return {"", "Unsupported authorization: send 'Authorization: Bearer <key>'", false};
  }
  v.remove_prefix(kScheme.size());
  return Match(v);
}

Caller ApiKeys::AuthenticateKey(std::optional<std::string_view> key, std::string_view header) {
  ReloadIfChanged();
  if (!key || key->empty()) {
    return {"", "Missing API key: send '" + std::string(header) + ": <key>'", false};
  }
  return Match(*key);
}

namespace {

std::string_view AsText(const std::array<unsigned char, 32>& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

}  // namespace

Caller ApiKeys::Match(std::string_view v) const {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  const auto digest = Sha256(v);
  // Every key is compared, whatever matched: the time does not depend on which key (if any).
  size_t match = keys_.size();
  for (size_t i = 0; i < keys_.size(); ++i) {
    const bool equal = SecretsEqual(AsText(digest), AsText(keys_[i].digest));
    match = equal ? i : match;
  }
  if (match == keys_.size()) return {"", "Invalid API key", true};
  return {keys_[match].name, "", false};
}

}  // namespace ci::daemon
