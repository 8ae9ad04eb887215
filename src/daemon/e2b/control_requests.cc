#include "daemon/e2b/control_requests.h"

#include <algorithm>

#include "core/json.h"
#include "daemon/front/routes.h"

namespace ci::daemon::e2b {
namespace {

constexpr size_t kMaxPairs = 64;
constexpr size_t kMaxKey = 256;
constexpr size_t kMaxValue = 4096;

bool IsEnvName(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

// A JSON object of strings, within the bounds; `env` also wants names a shell takes.
Status ReadPairs(const rapidjson::Value& v, std::string_view field, bool env,
                 std::map<std::string, std::string>& out) {
  const std::string name(field);
  if (v.IsNull()) return Status();
  if (!v.IsObject()) return Status::Error("'" + name + "' must be an object of strings");
  if (v.MemberCount() > kMaxPairs) {
    return Status::Error("'" + name + "' has more than " + std::to_string(kMaxPairs) + " entries");
  }
  for (const auto& m : v.GetObject()) {
    std::string key(m.name.GetString(), m.name.GetStringLength());
    if (!m.value.IsString()) return Status::Error("'" + name + "." + key + "' must be a string");
    std::string value(m.value.GetString(), m.value.GetStringLength());
    if (key.empty() || key.size() > kMaxKey || value.size() > kMaxValue ||
        key.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return Status::Error("'" + name + "': keys must be 1-" + std::to_string(kMaxKey) +
                           " bytes and values at most " + std::to_string(kMaxValue) +
                           ", without NUL");
    }
    if (env && !IsEnvName(key)) {
      return Status::Error("'" + name + "': '" + key + "' is not a variable name");
    }
    out[key] = value;
  }
  return Status();
}

Status ReadTimeout(const rapidjson::Value& v, int64_t& out) {
  if (!v.IsInt64() || v.GetInt64() < 1 || v.GetInt64() > kMaxTimeoutSec) {
    return Status::Error("'timeout' must be an integer number of seconds from 1 to " +
                         std::to_string(kMaxTimeoutSec));
  }
  out = v.GetInt64();
  return Status();
}

// `name` is true, or an object whose `enabled` is (autoResume's form).
bool IsTrue(const rapidjson::Value& doc, const char* name) {
  auto it = doc.FindMember(name);
  if (it == doc.MemberEnd()) return false;
  const rapidjson::Value& v = it->value;
  if (v.IsObject()) {
    auto enabled = v.FindMember("enabled");
    return enabled != v.MemberEnd() && enabled->value.IsBool() && enabled->value.GetBool();
  }
  return v.IsBool() && v.GetBool();
}

bool IsSet(const rapidjson::Value& doc, const char* name) {
  auto it = doc.FindMember(name);
  if (it == doc.MemberEnd() || it->value.IsNull()) return false;
  if (it->value.IsObject()) return it->value.MemberCount() > 0;
  if (it->value.IsArray()) return !it->value.Empty();
  return true;
}

// `allow_internet_access` of `doc`, and `allowOut` and `denyOut` of `rules` (a create's
// `network`, an update's body, named `prefix` in errors). The SDK's other network options (rules
// with transforms, an egress proxy of the user's, inbound traffic) are refused by name.
Status ReadNetwork(const rapidjson::Value& doc, const rapidjson::Value& rules,
                   const std::string& prefix, NetworkOptions& out) {
  if (auto a = doc.FindMember("allow_internet_access");
      a != doc.MemberEnd() && !a->value.IsNull()) {
    if (!a->value.IsBool()) return Status::Error("'allow_internet_access' must be a boolean");
    out.allow_internet_access = a->value.GetBool();
  }
  if (rules.IsNull()) return Status();
  if (!rules.IsObject()) return Status::Error("'network' must be an object");
  for (const auto& m : rules.GetObject()) {
    const std::string name(m.name.GetString(), m.name.GetStringLength());
    if (&rules == &doc && name == "allow_internet_access") continue;
    std::optional<std::vector<std::string>>* into = name == "allowOut"  ? &out.allow_out
                                                    : name == "denyOut" ? &out.deny_out
                                                                        : nullptr;
    const std::string field = "'" + prefix + name + "'";
    if (into == nullptr) {
      if (m.value.IsNull()) continue;
      return Status::Error(field + " is not supported by this server");
    }
    if (!m.value.IsArray()) return Status::Error(field + " must be a list of strings");
    into->emplace();
    for (const auto& item : m.value.GetArray()) {
      if (!item.IsString()) return Status::Error(field + " must be a list of strings");
      (*into)->emplace_back(item.GetString(), item.GetStringLength());
    }
  }
  return Status();
}

}  // namespace

Result<NetworkOptions> ParseNetworkUpdate(std::string_view body) {
  auto parsed = ParseJsonObject(body, "the body");
  if (!parsed.ok()) return parsed.status();
  NetworkOptions out;
  if (Status s = ReadNetwork(*parsed, *parsed, "", out); !s.ok()) return s;
  return out;
}

Result<NewSandbox> ParseNewSandbox(std::string_view body) {
  auto parsed = ParseJsonObject(body, "the body");
  if (!parsed.ok()) return parsed.status();
  const rapidjson::Document& doc = *parsed;
  NewSandbox r;
  auto tpl = doc.FindMember("templateID");
  if (tpl == doc.MemberEnd() || !tpl->value.IsString()) {
    return Status::Error("'templateID' is required and must be a string");
  }
  r.template_id = tpl->value.GetString();
  if (auto t = doc.FindMember("timeout"); t != doc.MemberEnd() && !t->value.IsNull()) {
    if (Status s = ReadTimeout(t->value, r.timeout_sec); !s.ok()) return s;
  }
  if (auto m = doc.FindMember("metadata"); m != doc.MemberEnd()) {
    if (Status s = ReadPairs(m->value, "metadata", false, r.metadata); !s.ok()) return s;
  }
  if (auto e = doc.FindMember("envVars"); e != doc.MemberEnd()) {
    if (Status s = ReadPairs(e->value, "envVars", true, r.env_vars); !s.ok()) return s;
  }
  // What this server cannot do yet is refused by name, never accepted and ignored.
  const std::pair<const char*, const char*> refused[] = {
      {"autoPause",
       "sandboxes are not paused at their timeout on this server yet (an idle one is, "
       "by SESSION_IDLE_PAUSE_SEC)"},
  };
  for (const auto& [field, why] : refused) {
    if (IsTrue(doc, field)) return Status::Error("'" + std::string(field) + "': " + why);
  }
  const rapidjson::Value no_rules;
  auto n = doc.FindMember("network");
  const rapidjson::Value& rules = n == doc.MemberEnd() ? no_rules : n->value;
  if (Status s = ReadNetwork(doc, rules, "network.", r.network); !s.ok()) return s;
  for (const char* field : {"volumeMounts", "mcp", "iam"}) {
    if (IsSet(doc, field)) {
      return Status::Error("'" + std::string(field) + "' is not supported by this server");
    }
  }
  return r;
}

Result<std::optional<int64_t>> ParseTimeout(std::string_view body, bool required) {
  auto parsed = ParseJsonObject(body, "the body");
  if (!parsed.ok()) return parsed.status();
  auto t = parsed->FindMember("timeout");
  if (t == parsed->MemberEnd() || t->value.IsNull()) {
    if (required) return Status::Error("'timeout' is required");
    return std::optional<int64_t>();
  }
  int64_t seconds = 0;
  if (Status s = ReadTimeout(t->value, seconds); !s.ok()) return s;
  return std::optional<int64_t>(seconds);
}

Result<ListQuery> ParseListQuery(std::string_view target) {
  ListQuery q;
  if (auto metadata = QueryParameter(target, "metadata"); metadata && !metadata->empty()) {
    // "k=v&k2=v2" as URLSearchParams writes it, of keys and values the JS SDK encoded already
    // (encodeURIComponent): '+' is a space, then two rounds of percent-decoding.
    std::string_view rest = *metadata;
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      const size_t eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return Status::Error("'metadata' must be key=value pairs joined by '&'");
      }
      auto decode = [](std::string_view s) {
        std::string form(s);
        std::replace(form.begin(), form.end(), '+', ' ');
        return PercentDecode(PercentDecode(form));
      };
      q.metadata[decode(pair.substr(0, eq))] = decode(pair.substr(eq + 1));
    }
  }
  if (auto state = QueryParameter(target, "state"); state && !state->empty()) {
    q.running = q.paused = false;
    std::string_view rest = *state;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view one = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (one == "running") {
        q.running = true;
      } else if (one == "paused") {
        q.paused = true;
      } else {
        return Status::Error("'state' takes running and paused, not '" + std::string(one) + "'");
      }
    }
  }
  if (auto limit = QueryParameter(target, "limit"); limit && !limit->empty()) {
    size_t n = 0;
    for (char c : *limit) {
      if (c < '0' || c > '9' || n > 100) return Status::Error("'limit' must be from 1 to 100");
      n = n * 10 + static_cast<size_t>(c - '0');
    }
    if (n < 1 || n > 100) return Status::Error("'limit' must be from 1 to 100");
    q.limit = n;
  }
  q.next_token = QueryParameter(target, "nextToken").value_or("");
  return q;
}

}  // namespace ci::daemon::e2b
