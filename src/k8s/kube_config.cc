// The configuration values, in-cluster configuration and the choice between it and a kubeconfig
// (LoadKubeconfig is in kubeconfig_file.cc).
#include "k8s/kube_config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <utility>

#include "core/base64.h"
#include "k8s/config_file.h"

namespace ci::k8s {
namespace {

std::string Get(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Only digits, 1..65535.
bool ParsePort(const std::string& s, uint16_t& port) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  long v = std::strtol(s.c_str(), nullptr, 10);
  if (v < 1 || v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

std::string Trimmed(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r\n"));
  s.erase(s.find_last_not_of(" \t\r\n") + 1);
  return s;
}

}  // namespace

std::string ApiServer::HostPort() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::string ApiServer::Url() const { return "https://" + HostPort() + base_path; }

Credentials Credentials::Bearer(std::string token) {
  Credentials c;
  c.header_ = "Bearer " + std::move(token);
  c.describe_ = "bearer token";
  return c;
}

Credentials Credentials::BearerFile(std::shared_ptr<TokenFile> file) {
  Credentials c;
  c.describe_ = "bearer token from " + file->path();
  c.file_ = std::move(file);
  return c;
}

Credentials Credentials::Basic(const std::string& username, const std::string& password) {
  Credentials c;
  c.header_ = "Basic " + Base64Encode(username + ":" + password);
  c.describe_ = "basic auth as " + username;
  return c;
}

Result<std::string> Credentials::Authorization() const {
  if (file_ == nullptr) return header_;
  auto token = file_->Token();
  if (!token.ok()) return token.status();
  return "Bearer " + *token;
}

bool IsNamespaceName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return false;
  }
  return name.front() != '-' && name.back() != '-';
}

Status ParseServerUrl(const std::string& url, ApiServer& server) {
  auto invalid = [&](const std::string& why) {
    return Status::Error("server '" + url + "': " + why + " (expected https://host[:port][/path])");
  };
  constexpr std::string_view kHttps = "https://";
  if (url.rfind("http://", 0) == 0) {
    return invalid("plain http is refused: the API server's identity and the credentials need TLS");
  }
  if (url.rfind(kHttps, 0) != 0) return invalid("not an https URL");
  std::string rest = url.substr(kHttps.size());
  if (rest.find_first_of("?#") != std::string::npos) return invalid("a query or fragment");
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  server.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!server.base_path.empty() && server.base_path.back() == '/') server.base_path.pop_back();
  if (authority.find('@') != std::string::npos) return invalid("user info in the URL");
  std::string port;
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    size_t close = authority.find(']');
    if (close == std::string::npos) return invalid("unterminated '['");
    server.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return invalid("expected ':' after ']'");
      port = authority.substr(close + 2);
      if (port.empty()) return invalid("an empty port");
    }
  } else if (size_t colon = authority.find(':'); colon != std::string::npos) {
    server.host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return invalid("an empty port");
  } else {
    server.host = authority;
  }
  if (server.host.empty()) return invalid("no host");
  server.port = 443;
  if (!port.empty() && !ParsePort(port, server.port)) return invalid("port is not 1..65535");
  return Status();
}

Result<KubeConfig> InClusterConfig(const EnvLookup& getenv, const std::string& root) {
  auto fail = [&](const std::string& what) {
    return Status::Error("in-cluster configuration (" + root + "): " + what);
  };
  KubeConfig c;
  c.in_cluster = true;
  c.origin = "in-cluster (" + root + ")";
  c.server.host = Get(getenv, "KUBERNETES_SERVICE_HOST");
  std::string port = Get(getenv, "KUBERNETES_SERVICE_PORT");
  if (c.server.host.empty() || port.empty()) {
    return fail("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set");
  }
  if (!ParsePort(port, c.server.port)) {
    return fail("invalid KUBERNETES_SERVICE_PORT='" + port + "': expected 1..65535");
  }
  c.server.server_name = c.server.host;
  auto token = std::make_shared<TokenFile>(root + "/token");
  if (auto t = token->Token(); !t.ok()) return fail(t.status().message());
  c.credentials = Credentials::BearerFile(std::move(token));
  auto ca = ReadConfigFile(root + "/ca.crt");
  if (!ca.ok()) return fail("the cluster's CA: " + ca.status().message());
  if (ca->find("-----BEGIN ") == std::string::npos) return fail(root + "/ca.crt is not PEM");
  c.server.ca_pem = std::move(ca).value();
  c.namespace_name = Get(getenv, "POD_NAMESPACE");
  std::string ns_file = root + "/namespace";
  if (c.namespace_name.empty() && Exists(ns_file)) {
    auto ns = ReadConfigFile(ns_file);
    if (!ns.ok()) return fail(ns.status().message());
    c.namespace_name = Trimmed(std::move(ns).value());
  }
  if (!c.namespace_name.empty() && !IsNamespaceName(c.namespace_name)) {
    return fail("namespace '" + c.namespace_name + "' is not a DNS-1123 label");
  }
  return c;
}

Result<KubeConfig> ResolveKubeConfig(const EnvLookup& getenv,
                                     const std::string& service_account_dir) {
  if (std::string list = Get(getenv, "KUBECONFIG"); !list.empty()) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = std::min(list.find(':', start), list.size());
      std::string path = list.substr(start, end - start);
      if (!path.empty() && Exists(path)) return LoadKubeconfig(path);
      start = end + 1;
    }
    return Status::Error("KUBECONFIG='" + list + "': no such file");
  }
  if (!Get(getenv, "KUBERNETES_SERVICE_HOST").empty()) {
    return InClusterConfig(getenv, service_account_dir);
  }
  std::string home = Get(getenv, "HOME");
  std::string path = home + "/.kube/config";
  if (!home.empty() && Exists(path)) return LoadKubeconfig(path);
  return Status::Error(
      "no Kubernetes configuration: not in a cluster (KUBERNETES_SERVICE_HOST is not set), "
      "KUBECONFIG is not set, and " +
      (home.empty() ? std::string("HOME is not set") : path + " does not exist"));
}

}  // namespace ci::k8s
