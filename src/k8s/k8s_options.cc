#include "k8s/k8s_options.h"

#include <algorithm>

namespace ci::k8s {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// The same message as EnvReader's, so every startup error reads alike.
// "'ITEM' " + why: appended, not `"'" + std::string&&` (GCC 12 -Wrestrict in release builds).
Status ItemError(std::string_view item, std::string_view why) {
  std::string m = "'";
  m.append(item).append("' ").append(why);
  return Status::Error(std::move(m));
}

Status Invalid(const char* name, std::string_view raw, std::string_view expected) {
  std::string m = "invalid environment variable ";
  m.append(name).append("='").append(raw).append("': expected ").append(expected);
  return Status::Error(std::move(m));
}

std::vector<std::string_view> SplitList(std::string_view text) {
  std::vector<std::string_view> items;
  while (!text.empty()) {
    size_t comma = text.find(',');
    items.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) items.push_back(text);  // a trailing comma: an empty item, refused
  }
  return items;
}

// A label value's or a qualified name's part: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most
// 63 characters.
bool IsNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// An image reference as the kubelet takes it: no validation of its grammar here (the runtime
// names a bad one as InvalidImageName), only that it is one word of printable characters.
bool IsImageRef(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
}

// A localhostProfile: a relative path inside the kubelet's seccomp directory.
bool IsRelativeProfilePath(std::string_view s) {
  if (s.empty() || s.front() == '/' || !IsImageRef(s)) return false;
  for (std::string_view rest = s; !rest.empty();) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
    if (rest.empty()) return false;  // a trailing slash names a directory
  }
  return true;
}

}  // namespace

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (std::string_view rest = s;;) {
    size_t dot = rest.find('.');
    if (!IsDnsLabel(rest.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    rest.remove_prefix(dot + 1);
  }
}

bool IsLabelValue(std::string_view s) { return s.empty() || IsNamePart(s); }

bool IsQualifiedName(std::string_view s) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) return IsNamePart(s);
  return IsDnsSubdomain(s.substr(0, slash)) && IsNamePart(s.substr(slash + 1));
}

Result<std::map<std::string, std::string>> ParseNodeSelector(std::string_view text) {
  std::map<std::string, std::string> selector;
  for (std::string_view item : SplitList(text)) {
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (eq == std::string_view::npos || !IsQualifiedName(key) || !IsLabelValue(value)) {
      return ItemError(item, "is not KEY=VALUE with a label key and a label value");
    }
    selector[std::string(key)] = std::string(value);
  }
  return selector;
}

Result<std::vector<Toleration>> ParseTolerations(std::string_view text) {
  static const char* kEffects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
  std::vector<Toleration> tolerations;
  for (std::string_view item : SplitList(text)) {
    Toleration t;
    std::string_view rest = item;
    if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
      t.effect = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
      if (std::find(std::begin(kEffects), std::end(kEffects), t.effect) == std::end(kEffects)) {
        return ItemError(item, "has an effect other than NoSchedule, PreferNoSchedule, NoExecute");
      }
    }
    size_t eq = rest.find('=');
    t.key = rest.substr(0, eq);
    if (eq != std::string_view::npos) {
      t.op = "Equal";
      t.value = rest.substr(eq + 1);
    }
    if (!IsQualifiedName(t.key) || !IsLabelValue(t.value)) {
      return ItemError(item, "is not KEY[=VALUE][:EFFECT] with a label key and a label value");
    }
    tolerations.push_back(std::move(t));
  }
  return tolerations;
}

Result<K8sOptions> K8sOptionsFromEnv(const EnvLookup& getenv) {
  // An empty variable is an unset one, as onyx reads them (`os.environ.get(X) or default`).
  const EnvLookup set = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  K8sOptions o;
  EnvReader env(set);
  env.String("KUBERNETES_EXECUTOR_NAMESPACE", o.namespace_);
  env.String("KUBERNETES_EXECUTOR_IMAGE", o.image);
  env.String("KUBERNETES_EXECUTOR_SERVICE_ACCOUNT", o.service_account);
  env.Bool("KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN", o.net_admin_lockdown);
  env.String("KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE", o.lockdown_image);
  env.Bool("KUBERNETES_SESSIONS_OUTLIVE_DAEMON", o.sessions_outlive_daemon);
  env.Bool("KUBERNETES_EXECUTOR_AGENT", o.agent);
  env.String("KUBERNETES_EXECUTOR_AGENT_PATH", o.agent_path);
  env.Bool("KUBERNETES_SHARED_WARM_POOL", o.shared_warm_pool);
  env.String("KUBERNETES_EXECUTOR_RUNTIME_CLASS", o.pod.runtime_class);
  env.String("KUBERNETES_EXECUTOR_PRIORITY_CLASS", o.pod.priority_class);
  env.String("KUBERNETES_EXECUTOR_SECCOMP_PROFILE", o.pod.seccomp_localhost_profile);
  std::string sandbox_api = "pods";
  env.Choice("KUBERNETES_SANDBOX_API", sandbox_api, {"pods", "agent-sandbox"});
  o.agent_sandbox = sandbox_api == "agent-sandbox";
  std::string policy = "ifnotpresent";
  env.Choice("KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY", policy, {"ifnotpresent", "always", "never"});
  if (!env.error().ok()) return env.error();
  o.pod.image_pull_policy = policy == "always"  ? "Always"
                            : policy == "never" ? "Never"
                                                : "IfNotPresent";

  // Names are checked here, at startup, rather than by the API server at the first pod.
  struct NameCheck {
    const char* variable;
    const std::string& value;
    bool (*valid)(std::string_view);
    const char* expected;
  };
  const NameCheck checks[] = {
      {"KUBERNETES_EXECUTOR_NAMESPACE", o.namespace_, IsDnsLabel,
       "a namespace name (lower-case letters, digits and '-', at most 63)"},
      {"KUBERNETES_EXECUTOR_IMAGE", o.image, IsImageRef, "an image reference without spaces"},
      {"KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE", o.lockdown_image, IsImageRef,
       "an image reference without spaces"},
      {"KUBERNETES_EXECUTOR_SERVICE_ACCOUNT", o.service_account, IsDnsSubdomain,
       "a ServiceAccount name (a DNS-1123 subdomain)"},
      {"KUBERNETES_EXECUTOR_RUNTIME_CLASS", o.pod.runtime_class, IsDnsSubdomain,
       "a RuntimeClass name (a DNS-1123 subdomain)"},
      {"KUBERNETES_EXECUTOR_PRIORITY_CLASS", o.pod.priority_class, IsDnsSubdomain,
       "a PriorityClass name (a DNS-1123 subdomain)"},
      {"KUBERNETES_EXECUTOR_SECCOMP_PROFILE", o.pod.seccomp_localhost_profile,
       IsRelativeProfilePath,
       "a path relative to the kubelet's seccomp directory (no '..', no leading '/')"},
  };
  if (o.agent_sandbox && o.shared_warm_pool) {
    return Status::Error(
        "KUBERNETES_SHARED_WARM_POOL=true and KUBERNETES_SANDBOX_API=agent-sandbox: with "
        "agent-sandbox the warm pools are SandboxWarmPools, shared by every replica already; "
        "unset KUBERNETES_SHARED_WARM_POOL");
  }
  if (o.agent_path.front() != '/' || o.agent_path.find_first_of(" \t\n") != std::string::npos) {
    return Invalid("KUBERNETES_EXECUTOR_AGENT_PATH", o.agent_path,
                   "an absolute path in the executor image, without spaces");
  }
  for (const NameCheck& c : checks) {
    // Empty: not set (the namespace and the image have defaults, so they are never empty).
    if (!c.value.empty() && !c.valid(c.value)) return Invalid(c.variable, c.value, c.expected);
  }

  if (const char* raw = set("KUBERNETES_EXECUTOR_NODE_SELECTOR")) {
    auto selector = ParseNodeSelector(raw);
    if (!selector.ok()) {
      return Invalid("KUBERNETES_EXECUTOR_NODE_SELECTOR", raw, selector.status().message());
    }
    o.pod.node_selector = *selector;
  }
  if (const char* raw = set("KUBERNETES_EXECUTOR_TOLERATIONS")) {
    auto tolerations = ParseTolerations(raw);
    if (!tolerations.ok()) {
      return Invalid("KUBERNETES_EXECUTOR_TOLERATIONS", raw, tolerations.status().message());
    }
    o.pod.tolerations = *tolerations;
  }
  if (const char* raw = set("KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS")) {
    for (std::string_view name : SplitList(raw)) {
      if (!IsDnsSubdomain(name)) {
        return Invalid("KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS", raw,
                       "Secret names (DNS-1123 subdomains) separated by ','");
      }
      o.pod.image_pull_secrets.emplace_back(name);
    }
  }

  // The downward API's fieldRefs metadata.name and metadata.uid; one without the other is a
  // half-configured Deployment, not a reason to guess.
  const char* pod_name = set("POD_NAME");
  const char* pod_uid = set("POD_UID");
  if ((pod_name == nullptr) != (pod_uid == nullptr)) {
    const char* given = pod_name != nullptr ? "POD_NAME" : "POD_UID";
    const char* missing = pod_name != nullptr ? "POD_UID" : "POD_NAME";
    return Status::Error(std::string("invalid environment variable ") + given + ": " + missing +
                         " must be set with it (downward API metadata.name and metadata.uid) "
                         "for executor pods to name the daemon's pod as their owner");
  }
  if (pod_name != nullptr) {
    if (!IsDnsSubdomain(pod_name)) {
      return Invalid("POD_NAME", pod_name, "a pod name (downward API metadata.name)");
    }
    const char* ns = set("POD_NAMESPACE");
    o.owner = OwnerPod{pod_name, pod_uid, ns != nullptr ? ns : ""};
  }
  return o;
}

}  // namespace ci::k8s
