// Where the Kubernetes API server is, how to trust it and how to authenticate to it: from the
// pod's service account (in-cluster) or from a kubeconfig file, with client-go's semantics
// (rest.InClusterConfig, tools/clientcmd). No requests here: the result is a value that an HTTPS
// client turns into a TLS context and an Authorization header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/env_reader.h"
#include "core/status.h"
#include "k8s/token_file.h"

namespace ci::k8s {

// Where the kubelet mounts a pod's service-account token, CA and namespace.
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// The API server and the TLS settings for it. TLS is always on (an http:// server is refused)
// and verified unless a kubeconfig says insecure-skip-tls-verify.
struct ApiServer {
  std::string host;             // without brackets: "10.96.0.1", "fd00::1", "api.example"
  uint16_t port = 443;          // a server URL without a port means 443
  std::string base_path;        // "" or "/prefix": a server URL with a path (an API behind a proxy)
  std::string server_name;      // the name the certificate must carry and the SNI: tls-server-name,
                                // else host (an address is checked as an IP SAN, sent as no SNI)
  bool skip_verify = false;     // insecure-skip-tls-verify: no check of the server at all
  std::string ca_pem;           // the CA bundle; empty (and verifying): the system's trust store
  std::string client_cert_pem;  // both or neither: the client certificate (mutual TLS)
  std::string client_key_pem;

  std::string HostPort() const;  // the Host header: "api.example:443", "[fd00::1]:6443"
  std::string Url() const;       // "https://[fd00::1]:6443/prefix"
};

// The Authorization header's value, computed per request: a token file is re-read when it
// rotates (TokenFile). Copies share the file's cache.
class Credentials {
 public:
  Credentials() = default;  // anonymous (a client certificate alone, or none): no header
  static Credentials Bearer(std::string token);
  static Credentials BearerFile(std::shared_ptr<TokenFile> file);
  static Credentials Basic(const std::string& username, const std::string& password);

  // "Bearer <token>", "Basic <base64(user:password)>", or "" for none.
  Result<std::string> Authorization() const;
  // What it is without the secret, for logs: "bearer token from /path", "basic auth as alice".
  const std::string& Describe() const { return describe_; }

 private:
  std::string header_;
  std::shared_ptr<TokenFile> file_;
  std::string describe_ = "no credentials";
};

struct KubeConfig {
  ApiServer server;
  Credentials credentials;
  std::string namespace_name;  // the context's or the pod's namespace; "" when none is said
  bool in_cluster = false;
  std::string origin;  // for logs and errors: "in-cluster (<root>)", "kubeconfig <path>, context c"

  // What kubectl uses when nothing is said.
  std::string Namespace() const { return namespace_name.empty() ? "default" : namespace_name; }
};

// In a pod: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, <root>/token (read again
// when it rotates), <root>/ca.crt (required: the server is always verified), the namespace from
// $POD_NAMESPACE (the downward API) or <root>/namespace. `root` is a parameter for tests.
Result<KubeConfig> InClusterConfig(const EnvLookup& getenv,
                                   const std::string& root = kServiceAccountDir);

// A kubeconfig file: `context`, or its current-context when empty, gives the cluster, the user
// and the namespace. Relative file names in it are relative to the file's directory, as for
// kubectl. Refused with an error naming the entry: exec credential plugins and auth-provider (no
// subprocess runs here), impersonation (as, as-groups, ...) and proxy-url (not implemented, so
// not silently bypassed). Errors name the file, the field and its line.
Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// The daemon's configuration, in controller-runtime's order: $KUBECONFIG when set (only the
// first of its ':'-separated files that exists is read; kubectl would merge them all), else
// in-cluster when KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config when it exists.
Result<KubeConfig> ResolveKubeConfig(const EnvLookup& getenv,
                                     const std::string& service_account_dir = kServiceAccountDir);

// "https://host[:port][/path]" -> host, port and base_path of `server`. Anything else (http,
// no scheme, user info, a query) is an error saying what was expected.
Status ParseServerUrl(const std::string& url, ApiServer& server);

// A Kubernetes namespace name: a DNS-1123 label (lower-case alphanumerics and '-', at most 63).
bool IsNamespaceName(const std::string& name);

}  // namespace ci::k8s
