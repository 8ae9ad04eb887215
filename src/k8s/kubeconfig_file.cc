// LoadKubeconfig: a kubeconfig file (client-go tools/clientcmd/api/v1 types) -> KubeConfig.
// The checks are client-go's (clientcmd/validation.go ConfirmUsable) where it has them: both a
// *-data field and its file is an error, a client certificate needs its key, token and basic auth
// exclude each other, a CA with insecure-skip-tls-verify is refused.
#include <filesystem>
#include <utility>

#include "core/base64.h"
#include "k8s/config_file.h"
#include "k8s/kube_config.h"
#include "k8s/yaml_tree.h"

namespace ci::k8s {
namespace {

bool IsPem(const std::string& s) { return s.find("-----BEGIN ") != std::string::npos; }

// One kubeconfig: its path for errors, its directory for relative file names.
class File {
 public:
  explicit File(const std::string& path)
      : path_(path), dir_(std::filesystem::absolute(path).parent_path().string()) {}

  const std::string& path() const { return path_; }
  Status Fail(const std::string& where, int line, const std::string& what) const {
    std::string at = line > 0 ? " (line " + std::to_string(line) + ")" : "";
    return Status::Error("kubeconfig " + path_ + ": " + where + at + ": " + what);
  }
  // kubectl resolves a relative name against the kubeconfig's directory, not the working one.
  std::string Resolve(const std::string& name) const {
    return name.empty() || name.front() == '/' ? name : dir_ + "/" + name;
  }

 private:
  std::string path_;
  std::string dir_;
};

// The scalar fields of one mapping, named by `where` (`users["bob"].user`); the first error is
// kept so the readers below are tables of fields.
class Entry {
 public:
  Entry(const File& file, const YamlNode& body, std::string where)
      : file_(file), body_(body), where_(std::move(where)) {}

  bool Has(const char* key) const { return body_.Find(key) != nullptr; }

  std::string String(const char* key) {
    const YamlNode* n = body_.Find(key);
    if (n == nullptr) return "";
    if (n->kind != YamlNode::Kind::kScalar) Fail(key, "expected a string");
    return n->scalar;
  }

  // YAML 1.1's spellings, as the Go YAML reader kubectl uses accepts.
  bool Bool(const char* key) {
    std::string v = String(key);
    if (v.empty() || v == "false" || v == "False" || v == "FALSE" || v == "no" || v == "off") {
      return false;
    }
    if (v == "true" || v == "True" || v == "TRUE" || v == "yes" || v == "on") return true;
    Fail(key, "expected true or false, not '" + v + "'");
    return false;
  }

  // PEM bytes from the base64 `data_key` or the file `file_key` names; "" when neither is set.
  std::string Pem(const char* data_key, const char* file_key) {
    if (Has(data_key) && Has(file_key)) {
      Fail(data_key, std::string("both ") + data_key + " and " + file_key + " are set; keep one");
      return "";
    }
    if (Has(data_key)) {
      auto bytes = Base64Decode(String(data_key));
      if (!bytes) Fail(data_key, "not base64");
      if (bytes && !IsPem(*bytes)) Fail(data_key, "not PEM (no -----BEGIN line)");
      return bytes.value_or("");
    }
    if (!Has(file_key)) return "";
    std::string path = file_.Resolve(String(file_key));
    auto text = ReadConfigFile(path);
    if (!text.ok()) Fail(file_key, text.status().message());
    if (text.ok() && !IsPem(*text)) Fail(file_key, path + " is not PEM (no -----BEGIN line)");
    return text.ok() ? std::move(text).value() : "";
  }

  void Refuse(const char* key, const std::string& why) {
    if (Has(key)) Fail(key, why);
  }

  void Fail(const char* key, const std::string& what) {
    const YamlNode* n = body_.Find(key);
    if (error_.ok())
      error_ =
          file_.Fail(where_.empty() ? key : where_ + "." + key, n ? n->line : body_.line, what);
  }

  const std::string& where() const { return where_; }
  const Status& error() const { return error_; }

 private:
  const File& file_;
  const YamlNode& body_;
  std::string where_;
  Status error_;
};

// `list_key` entries are {name: N, <body_key>: {...}}: the body of the one named `name`.
Result<const YamlNode*> FindNamed(const File& file, const YamlNode& root, const char* list_key,
                                  const std::string& name, const char* body_key,
                                  const std::string& wanted_by) {
  const YamlNode* list = root.Find(list_key);
  std::string names;
  if (list != nullptr && list->kind == YamlNode::Kind::kSequence) {
    for (const YamlNode& item : list->items) {
      const YamlNode* n = item.Find("name");
      if (n == nullptr || n->kind != YamlNode::Kind::kScalar) continue;
      if (n->scalar != name) {
        names += (names.empty() ? "" : ", ") + n->scalar;
        continue;
      }
      const YamlNode* body = item.Find(body_key);
      if (body == nullptr || body->kind != YamlNode::Kind::kMapping) {
        return file.Fail(std::string(list_key) + "[\"" + name + "\"]." + body_key, item.line,
                         "missing or not a mapping");
      }
      return body;
    }
  }
  return file.Fail(list_key, list ? list->line : 0,
                   "no entry named \"" + name + "\" (" + wanted_by +
                       "); there are: " + (names.empty() ? "none" : names));
}

Status ReadCluster(const File& file, const YamlNode& body, const std::string& name,
                   ApiServer& server) {
  Entry e(file, body, "clusters[\"" + name + "\"].cluster");
  std::string url = e.String("server");
  if (e.error().ok() && url.empty()) e.Fail("server", "missing: the API server's https URL");
  if (Status s = ParseServerUrl(url, server); e.error().ok() && !s.ok()) {
    e.Fail("server", s.message());
  }
  server.server_name = e.String("tls-server-name");
  if (server.server_name.empty()) server.server_name = server.host;
  server.skip_verify = e.Bool("insecure-skip-tls-verify");
  server.ca_pem = e.Pem("certificate-authority-data", "certificate-authority");
  if (server.skip_verify && !server.ca_pem.empty()) {
    e.Fail("insecure-skip-tls-verify",
           "a CA together with insecure-skip-tls-verify: true is contradictory (client-go refuses "
           "it too); keep one");
  }
  e.Refuse("proxy-url", "not supported: the daemon connects to the API server directly");
  return e.error();
}

Status ReadUser(const File& file, const YamlNode& body, const std::string& name,
                KubeConfig& config) {
  Entry e(file, body, "users[\"" + name + "\"].user");
  const char* no_subprocess =
      " the daemon runs no credential subprocess; give this user a token, tokenFile or client "
      "certificate (for instance a service account's token)";
  if (const YamlNode* exec = body.Find("exec")) {
    const YamlNode* cmd = exec->Find("command");
    std::string what =
        cmd && cmd->kind == YamlNode::Kind::kScalar ? " ('" + cmd->scalar + "')" : "";
    e.Fail("exec", "exec credential plugins" + what + " are not supported:" + no_subprocess);
  }
  if (const YamlNode* provider = body.Find("auth-provider")) {
    const YamlNode* n = provider->Find("name");
    std::string what = n && n->kind == YamlNode::Kind::kScalar ? " '" + n->scalar + "'" : "";
    e.Fail("auth-provider", "auth-provider" + what + " is not supported:" + no_subprocess);
  }
  for (const char* key : {"as", "as-uid", "as-groups", "as-user-extra"}) {
    e.Refuse(key, "impersonation is not supported: use the identity's own credentials");
  }
  config.server.client_cert_pem = e.Pem("client-certificate-data", "client-certificate");
  config.server.client_key_pem = e.Pem("client-key-data", "client-key");
  if (config.server.client_cert_pem.empty() != config.server.client_key_pem.empty()) {
    bool cert = !config.server.client_cert_pem.empty();
    e.Fail(cert ? (e.Has("client-certificate") ? "client-certificate" : "client-certificate-data")
                : (e.Has("client-key") ? "client-key" : "client-key-data"),
           cert ? "a client certificate without its key (client-key or client-key-data)"
                : "a client key without its certificate (client-certificate or "
                  "client-certificate-data)");
  }
  std::string token = e.String("token"), token_file = file.Resolve(e.String("tokenFile"));
  bool basic = e.Has("username") || e.Has("password");
  if (basic && (!token.empty() || !token_file.empty())) {
    e.Fail("username", "more than one authentication method (token and basic auth); keep one");
  }
  if (!e.error().ok()) return e.error();
  if (!token_file.empty()) {
    // As client-go: the file wins over a token next to it, which is only its first value.
    auto source = std::make_shared<TokenFile>(token_file);
    if (auto t = source->Token(); !t.ok()) e.Fail("tokenFile", t.status().message());
    config.credentials = Credentials::BearerFile(std::move(source));
  } else if (!token.empty()) {
    config.credentials = Credentials::Bearer(token);
  } else if (basic) {
    config.credentials = Credentials::Basic(e.String("username"), e.String("password"));
  }
  return e.error();
}

}  // namespace

Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  File file(path);
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status().Context("kubeconfig");
  auto parsed = ParseYaml(*text);
  if (!parsed.ok()) return Status::Error("kubeconfig " + path + ": " + parsed.status().message());
  const YamlNode& root = *parsed;
  if (root.kind != YamlNode::Kind::kMapping) {
    return file.Fail("(top level)", root.line, "expected a mapping (apiVersion, clusters, ...)");
  }
  Entry top(file, root, "");
  std::string name = context.empty() ? top.String("current-context") : context;
  if (!top.error().ok()) return top.error();
  if (name.empty()) {
    return file.Fail("current-context", 0,
                     "not set: choose a context (kubectl config use-context NAME)");
  }
  auto ctx = FindNamed(file, root, "contexts", name, "context",
                       context.empty() ? "the current-context" : "the context asked for");
  if (!ctx.ok()) return ctx.status();
  Entry c(file, **ctx, "contexts[\"" + name + "\"].context");
  std::string cluster = c.String("cluster"), user = c.String("user");
  KubeConfig config;
  config.namespace_name = c.String("namespace");
  if (cluster.empty()) c.Fail("cluster", "missing: the context names no cluster");
  if (user.empty()) c.Fail("user", "missing: the context names no user");
  if (!config.namespace_name.empty() && !IsNamespaceName(config.namespace_name)) {
    c.Fail("namespace", "'" + config.namespace_name + "' is not a DNS-1123 label");
  }
  if (!c.error().ok()) return c.error();
  auto cluster_body = FindNamed(file, root, "clusters", cluster, "cluster", "context " + name);
  if (!cluster_body.ok()) return cluster_body.status();
  if (Status s = ReadCluster(file, **cluster_body, cluster, config.server); !s.ok()) return s;
  auto user_body = FindNamed(file, root, "users", user, "user", "context " + name);
  if (!user_body.ok()) return user_body.status();
  if (Status s = ReadUser(file, **user_body, user, config); !s.ok()) return s;
  config.origin = "kubeconfig " + path + ", context " + name;
  return config;
}

}  // namespace ci::k8s
