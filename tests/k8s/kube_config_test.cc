#include "k8s/kube_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "core/base64.h"
#include "scratch_dir.h"

namespace ci::k8s {
namespace {

using ::testing::HasSubstr;

const char kCa[] = "-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n";
const char kCert[] = "-----BEGIN CERTIFICATE-----\nY2VydA==\n-----END CERTIFICATE-----\n";
const char kKey[] = "-----BEGIN PRIVATE KEY-----\na2V5\n-----END PRIVATE KEY-----\n";

// An environment for the loaders, without touching the test's own.
struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup Lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string AuthorizationOf(const KubeConfig& c) {
  auto h = c.credentials.Authorization();
  EXPECT_TRUE(h.ok()) << h.status().message();
  return h.ok() ? *h : "<error>";
}

std::string ErrorOf(const Result<KubeConfig>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "<ok>" : r.status().message();
}

// ---- values -------------------------------------------------------------------------------

TEST(Base64, RoundTripsAndRefusesWhatIsNotBase64) {
  for (std::string s : std::initializer_list<std::string>{"", "a", "ab", "abc", "abcd", "c:p:w",
                                                          std::string("\0\xff", 2)}) {
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back.has_value()) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("c:p:w"), "YzpwOnc=");
  EXPECT_EQ(Base64Decode("Yzpw\nOnc=\n"), "c:p:w");  // wrapped lines
  for (const char* bad : {"YzpwOnc", "Yzp*", "QQ==QQ==", "-_-_"}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
}

TEST(ServerUrl, HostPortAndPath) {
  struct Case {
    const char* url;
    const char* host;
    int port;
    const char* path;
    const char* host_port;
  } cases[] = {
      {"https://api.example", "api.example", 443, "", "api.example:443"},
      {"https://10.0.0.1:6443/", "10.0.0.1", 6443, "", "10.0.0.1:6443"},
      {"https://[fd00::1]:6443", "fd00::1", 6443, "", "[fd00::1]:6443"},
      {"https://[fd00::1]", "fd00::1", 443, "", "[fd00::1]:443"},
      {"https://rancher:8443/k8s/clusters/c-1/", "rancher", 8443, "/k8s/clusters/c-1",
       "rancher:8443"},
  };
  for (const Case& c : cases) {
    ApiServer s;
    Status st = ParseServerUrl(c.url, s);
    ASSERT_TRUE(st.ok()) << c.url << ": " << st.message();
    EXPECT_EQ(s.host, c.host) << c.url;
    EXPECT_EQ(s.port, c.port) << c.url;
    EXPECT_EQ(s.base_path, c.path) << c.url;
    EXPECT_EQ(s.HostPort(), c.host_port) << c.url;
  }
  ApiServer v6;
  ASSERT_TRUE(ParseServerUrl("https://[fd00::1]:6443/base", v6).ok());
  EXPECT_EQ(v6.Url(), "https://[fd00::1]:6443/base");
}

TEST(ServerUrl, RefusesWhatIsNotHttps) {
  for (const char* bad :
       {"http://a:8080", "a:6443", "https://", "https://u:p@a", "https://a:0", "https://a:65536",
        "https://a:x", "https://a:", "https://[::1", "https://[::1]x", "https://a/?watch=1"}) {
    ApiServer s;
    Status st = ParseServerUrl(bad, s);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_THAT(st.message(), HasSubstr(std::string("server '") + bad + "'"));
  }
  ApiServer s;
  EXPECT_THAT(ParseServerUrl("http://a", s).message(), HasSubstr("plain http is refused"));
}

TEST(Credentials, HeaderValues) {
  EXPECT_EQ(*Credentials().Authorization(), "");
  EXPECT_EQ(*Credentials::Bearer("t0k").Authorization(), "Bearer t0k");
  EXPECT_EQ(*Credentials::Basic("c", "p:w").Authorization(), "Basic YzpwOnc=");
  EXPECT_EQ(Credentials::Basic("c", "secret").Describe(), "basic auth as c");
}

TEST(Namespace, Dns1123Labels) {
  for (const char* ok : {"default", "team-a", "a", "x1"}) EXPECT_TRUE(IsNamespaceName(ok)) << ok;
  const std::string too_long(64, 'a');
  EXPECT_TRUE(IsNamespaceName(too_long.substr(1)));
  for (const std::string& bad :
       std::initializer_list<std::string>{"", "Team", "-a", "a-", "a_b", "a.b", too_long}) {
    EXPECT_FALSE(IsNamespaceName(bad)) << bad;
  }
}

// ---- kubeconfig -----------------------------------------------------------------------------

// Three contexts over two clusters and three users, data and file fields mixed.
class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("pki/ca.crt", kCa);
    dir_.Write("pki/client.crt", kCert);
    dir_.Write("keys/client.key", kKey);
    dir_.Write("token", "file-token\n");
    config_ = dir_.Write("kube/config", Config("current-context: staging\n"));
  }
  std::string Config(const std::string& extra) const {
    return "apiVersion: v1\nkind: Config\n" + extra +
           "clusters:\n"
           "- name: prod\n"
           "  cluster:\n"
           "    server: https://[fd00::1]:6443\n"
           "    certificate-authority-data: " +
           Base64Encode(kCa) +
           "\n"
           "- name: staging\n"
           "  cluster:\n"
           "    server: https://staging.example:8443/api-proxy/\n"
           "    certificate-authority: ../pki/ca.crt\n"
           "    tls-server-name: api.staging\n"
           "contexts:\n"
           "- name: prod\n"
           "  context: {cluster: prod, user: admin, namespace: team-a}\n"
           "- name: staging\n"
           "  context: {cluster: staging, user: ci}\n"
           "- name: rotating\n"
           "  context: {cluster: prod, user: robot}\n"
           "users:\n"
           "- name: admin\n"
           "  user:\n"
           "    client-certificate-data: " +
           Base64Encode(kCert) +
           "\n"
           "    client-key: ../keys/client.key\n"
           "- name: ci\n"
           "  user:\n"
           "    token: static-token\n"
           "- name: robot\n"
           "  user:\n"
           "    tokenFile: ../token\n";
  }
  // `user` replaces the staging context's user "ci" (so the other entries stay valid).
  Result<KubeConfig> WithUser(const std::string& user_yaml) {
    std::string text = Config("current-context: staging\n");
    text += "- name: ci\n  user:\n" + user_yaml;
    text.replace(text.find("- name: ci\n  user:\n    token: static-token\n"),
                 std::string("- name: ci\n  user:\n    token: static-token\n").size(), "");
    return LoadKubeconfig(dir_.Write("kube/config", text));
  }
  Result<KubeConfig> WithStagingCluster(const std::string& cluster_yaml) {
    std::string text = Config("current-context: staging\n");
    std::string old =
        "    server: https://staging.example:8443/api-proxy/\n"
        "    certificate-authority: ../pki/ca.crt\n"
        "    tls-server-name: api.staging\n";
    text.replace(text.find(old), old.size(), cluster_yaml);
    return LoadKubeconfig(dir_.Write("kube/config", text));
  }

  ScratchDir dir_;
  std::string config_;
};

TEST_F(KubeconfigTest, TheCurrentContextWithCaFileRelativeToTheKubeconfig) {
  auto c = LoadKubeconfig(config_);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->in_cluster);
  EXPECT_EQ(c->server.Url(), "https://staging.example:8443/api-proxy");
  EXPECT_EQ(c->server.server_name, "api.staging");
  EXPECT_FALSE(c->server.skip_verify);
  EXPECT_EQ(c->server.ca_pem, kCa);  // ../pki/ca.crt from kube/, not from the working directory
  EXPECT_EQ(c->server.client_cert_pem, "");
  EXPECT_EQ(AuthorizationOf(*c), "Bearer static-token");
  EXPECT_EQ(c->namespace_name, "");
  EXPECT_EQ(c->Namespace(), "default");
  EXPECT_EQ(c->origin, "kubeconfig " + config_ + ", context staging");
}

TEST_F(KubeconfigTest, ANamedContextWithDataFieldsAndAClientCertificate) {
  auto c = LoadKubeconfig(config_, "prod");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.host, "fd00::1");
  EXPECT_EQ(c->server.HostPort(), "[fd00::1]:6443");
  EXPECT_EQ(c->server.server_name, "fd00::1");
  EXPECT_EQ(c->server.ca_pem, kCa);
  EXPECT_EQ(c->server.client_cert_pem, kCert);  // -data
  EXPECT_EQ(c->server.client_key_pem, kKey);    // a file next to it
  EXPECT_EQ(AuthorizationOf(*c), "");           // the certificate is the identity
  EXPECT_EQ(c->Namespace(), "team-a");
}

TEST_F(KubeconfigTest, ATokenFileIsReadAgainWhenItRotates) {
  auto c = LoadKubeconfig(config_, "rotating");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(AuthorizationOf(*c), "Bearer file-token");
  EXPECT_EQ(c->credentials.Describe(), "bearer token from " + dir_.root() + "/kube/../token");
  dir_.Replace("token", "rotated-token\n");
  EXPECT_EQ(AuthorizationOf(*c), "Bearer rotated-token");
  KubeConfig copy = *c;  // copies share the file's cache
  EXPECT_EQ(AuthorizationOf(copy), "Bearer rotated-token");

  auto both = WithUser("    token: first-value\n    tokenFile: ../token\n");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(AuthorizationOf(*both), "Bearer rotated-token");  // the file wins, as in client-go
}

TEST_F(KubeconfigTest, NoCurrentContextIsAnErrorNamingTheFileAndField) {
  std::string path = dir_.Write("kube/config", Config(""));
  EXPECT_EQ(ErrorOf(LoadKubeconfig(path)),
            "kubeconfig " + path +
                ": current-context: not set: choose a context (kubectl config use-context NAME)");
  std::string empty = dir_.Write("kube/config", Config("current-context: \"\"\n"));
  EXPECT_THAT(ErrorOf(LoadKubeconfig(empty)), HasSubstr("current-context: not set"));
  EXPECT_TRUE(LoadKubeconfig(path, "prod").ok());  // a context asked for needs none
}

TEST_F(KubeconfigTest, AnUnknownContextListsTheKnownOnes) {
  std::string path = dir_.Write("kube/config", Config("current-context: nope\n"));
  EXPECT_THAT(ErrorOf(LoadKubeconfig(path)),
              HasSubstr(": contexts (line 14): no entry named \"nope\" (the current-context); "
                        "there are: prod, staging, rotating"));
}

TEST_F(KubeconfigTest, AContextNamingAMissingClusterOrUser) {
  std::string text = Config("current-context: x\n") +
                     "- name: x\n  user: {}\n";  // appended to users: an anonymous user
  text.insert(text.find("users:\n"), "- name: x\n  context: {cluster: gone, user: x}\n");
  EXPECT_THAT(ErrorOf(LoadKubeconfig(dir_.Write("kube/config", text))),
              HasSubstr(": clusters (line 4): no entry named \"gone\" (context x); there are: "
                        "prod, staging"));
  text.replace(text.find("cluster: gone, user: x"), 22, "cluster: prod, user: who");
  EXPECT_THAT(ErrorOf(LoadKubeconfig(dir_.Write("kube/config", text))),
              HasSubstr("no entry named \"who\" (context x)"));
  text.replace(text.find("cluster: prod, user: who"), 24, "cluster: prod");
  EXPECT_THAT(ErrorOf(LoadKubeconfig(dir_.Write("kube/config", text))),
              HasSubstr("contexts[\"x\"].context.user (line 22): missing"));
  text.replace(text.find("{cluster: prod}"), 15, "{cluster: prod, user: x}");
  auto anonymous = LoadKubeconfig(dir_.Write("kube/config", text));
  ASSERT_TRUE(anonymous.ok()) << anonymous.status().message();
  EXPECT_EQ(AuthorizationOf(*anonymous), "");
}

TEST_F(KubeconfigTest, ExecPluginsAreRefusedNamingTheUser) {
  std::string message =
      ErrorOf(WithUser("    exec:\n"
                       "      apiVersion: client.authentication.k8s.io/v1\n"
                       "      command: aws\n"
                       "      args: [eks, get-token]\n"));
  EXPECT_THAT(message, HasSubstr("kubeconfig " + config_ + ": users[\"ci\"].user.exec (line "));
  EXPECT_THAT(message, HasSubstr("exec credential plugins ('aws') are not supported"));
  EXPECT_THAT(message, HasSubstr("give this user a token, tokenFile or client certificate"));
}

TEST_F(KubeconfigTest, AuthProviderAndImpersonationAreRefused) {
  EXPECT_THAT(ErrorOf(WithUser("    auth-provider:\n      name: oidc\n")),
              HasSubstr("users[\"ci\"].user.auth-provider (line 31): auth-provider 'oidc' is not "
                        "supported"));
  EXPECT_THAT(ErrorOf(WithUser("    token: t\n    as: admin\n")),
              HasSubstr("users[\"ci\"].user.as (line 32): impersonation is not supported"));
}

TEST_F(KubeconfigTest, UserFieldConflicts) {
  EXPECT_THAT(ErrorOf(WithUser("    token: t\n    username: u\n    password: p\n")),
              HasSubstr("users[\"ci\"].user.username (line 32): more than one authentication "
                        "method"));
  EXPECT_THAT(ErrorOf(WithUser("    client-certificate: ../pki/client.crt\n")),
              HasSubstr("users[\"ci\"].user.client-certificate (line 31): a client certificate "
                        "without its key"));
  EXPECT_THAT(ErrorOf(WithUser("    client-key: ../keys/client.key\n")),
              HasSubstr("users[\"ci\"].user.client-key (line 31): a client key without its "
                        "certificate"));
  EXPECT_THAT(ErrorOf(WithUser("    client-key-data: " + Base64Encode(kKey) +
                               "\n    client-key: ../keys/client.key\n")),
              HasSubstr("users[\"ci\"].user.client-key-data (line 31): both client-key-data and "
                        "client-key are set"));
  EXPECT_THAT(ErrorOf(WithUser("    client-certificate-data: not*base64\n")),
              HasSubstr("users[\"ci\"].user.client-certificate-data (line 31): not base64"));
  EXPECT_THAT(ErrorOf(WithUser("    client-certificate-data: " + Base64Encode("plain") + "\n")),
              HasSubstr("client-certificate-data (line 31): not PEM"));
  EXPECT_THAT(ErrorOf(WithUser("    client-certificate: ../nowhere.crt\n    client-key: k\n")),
              HasSubstr("client-certificate (line 31): reading " + dir_.root() +
                        "/kube/../nowhere.crt: No such file or directory"));
  EXPECT_THAT(ErrorOf(WithUser("    tokenFile: ../nowhere\n")),
              HasSubstr("users[\"ci\"].user.tokenFile (line 31): bearer token: reading"));
  EXPECT_THAT(ErrorOf(WithUser("    token: [a, b]\n")),
              HasSubstr("users[\"ci\"].user.token (line 31): expected a string"));
}

TEST_F(KubeconfigTest, BasicAuth) {
  auto c = WithUser("    username: carol\n    password: 'p:w'\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(AuthorizationOf(*c), "Basic " + Base64Encode("carol:p:w"));
}

TEST_F(KubeconfigTest, ClusterFields) {
  auto skip =
      WithStagingCluster("    server: https://10.0.0.1\n    insecure-skip-tls-verify: true\n");
  ASSERT_TRUE(skip.ok()) << skip.status().message();
  EXPECT_TRUE(skip->server.skip_verify);
  EXPECT_EQ(skip->server.ca_pem, "");
  EXPECT_EQ(skip->server.server_name, "10.0.0.1");

  EXPECT_THAT(ErrorOf(WithStagingCluster("    server: https://a\n"
                                         "    insecure-skip-tls-verify: true\n"
                                         "    certificate-authority: ../pki/ca.crt\n")),
              HasSubstr("clusters[\"staging\"].cluster.insecure-skip-tls-verify (line 12): a CA "
                        "together with insecure-skip-tls-verify"));
  EXPECT_THAT(ErrorOf(WithStagingCluster("    server: https://a\n"
                                         "    insecure-skip-tls-verify: maybe\n")),
              HasSubstr("insecure-skip-tls-verify (line 12): expected true or false"));
  EXPECT_THAT(ErrorOf(WithStagingCluster("    server: http://a:8080\n")),
              HasSubstr("clusters[\"staging\"].cluster.server (line 11): server 'http://a:8080': "
                        "plain http is refused"));
  EXPECT_THAT(ErrorOf(WithStagingCluster("    certificate-authority: ../pki/ca.crt\n")),
              HasSubstr("clusters[\"staging\"].cluster.server (line 10): missing"));
  EXPECT_THAT(ErrorOf(WithStagingCluster("    server: https://a\n"
                                         "    certificate-authority: ../pki/ca.crt\n"
                                         "    certificate-authority-data: " +
                                         Base64Encode(kCa) + "\n")),
              HasSubstr("certificate-authority-data (line 13): both certificate-authority-data "
                        "and certificate-authority are set"));
  EXPECT_THAT(ErrorOf(WithStagingCluster("    server: https://a\n"
                                         "    proxy-url: http://proxy:3128\n")),
              HasSubstr("cluster.proxy-url (line 12): not supported"));
}

TEST_F(KubeconfigTest, ABadNamespaceAndBadYamlAreErrors) {
  std::string text = Config("current-context: prod\n");
  text.replace(text.find("namespace: team-a"), 17, "namespace: Team_A");
  EXPECT_THAT(ErrorOf(LoadKubeconfig(dir_.Write("kube/config", text))),
              HasSubstr("contexts[\"prod\"].context.namespace (line 16): 'Team_A' is not a "
                        "DNS-1123 label"));
  std::string broken = dir_.Write("kube/config", "clusters: [\n");
  EXPECT_THAT(ErrorOf(LoadKubeconfig(broken)), HasSubstr("kubeconfig " + broken + ": line "));
  std::string list = dir_.Write("kube/config", "- a\n");
  EXPECT_THAT(ErrorOf(LoadKubeconfig(list)), HasSubstr("expected a mapping"));
  EXPECT_EQ(ErrorOf(LoadKubeconfig(dir_.Path("none"))),
            "kubeconfig: reading " + dir_.Path("none") + ": No such file or directory");
}

// ---- kubectl's own output -------------------------------------------------------------------

// What tests/k8s/kubectl_config.sh makes kubectl write, read back context by context.
void CheckKubectlConfig(const std::string& dir) {
  std::string path = dir + "/config";
  std::string ca = "-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n";
  auto b = LoadKubeconfig(path);  // use-context b
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->origin, "kubeconfig " + path + ", context b");
  EXPECT_EQ(b->server.Url(), "https://dev.example:8443/base");
  EXPECT_EQ(b->server.server_name, "api.dev");
  EXPECT_EQ(b->server.ca_pem, ca);
  EXPECT_EQ(b->server.client_cert_pem, ca);  // the script writes the same fake PEM twice
  EXPECT_THAT(b->server.client_key_pem, HasSubstr("-----BEGIN PRIVATE KEY-----"));
  EXPECT_EQ(AuthorizationOf(*b), "");

  auto a = LoadKubeconfig(path, "a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->server.HostPort(), "[fd00::1]:6443");
  EXPECT_EQ(a->server.ca_pem, ca);  // --embed-certs: certificate-authority-data
  EXPECT_EQ(a->namespace_name, "team-a");
  EXPECT_EQ(AuthorizationOf(*a), "Bearer alice-token");

  auto c = LoadKubeconfig(path, "c");  // the cluster kubectl names "y", quoted
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.Url(), "https://10.0.0.1:443");
  EXPECT_TRUE(c->server.skip_verify);
  EXPECT_EQ(AuthorizationOf(*c), "Basic " + Base64Encode("carol:p:w"));

  EXPECT_THAT(ErrorOf(LoadKubeconfig(path, "d")),
              HasSubstr("users[\"dave\"].user.exec (line 55): exec credential plugins ('aws')"));

  auto e = LoadKubeconfig(path, "e");  // tokenFile relative, as `kubectl config set` stores it
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(AuthorizationOf(*e), "Bearer erin-token");
}

TEST(KubectlConfig, TheCheckedInOutputOfKubectl132) { CheckKubectlConfig(CI_K8S_KUBECTL_DIR); }

// `kubectl config view` of one context, with the files it names inlined (--flatten): what
// kubectl itself reads from the kubeconfig, relative names resolved its way.
std::string KubectlView(const std::string& config, const std::string& context,
                        const std::string& jsonpath) {
  std::string cmd = "cd / && kubectl config view --kubeconfig '" + config + "' --context " +
                    context + " --minify --flatten -o jsonpath='" + jsonpath + "'";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "<popen failed>";
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

TEST(KubectlConfig, WhatTheInstalledKubectlWritesAndReads) {
  if (std::system("kubectl version --client >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no kubectl: only the checked-in output (kubectl 1.32) is read";
  }
  ScratchDir dir;
  std::string cmd = std::string("sh ") + CI_K8S_KUBECTL_SCRIPT + " " + dir.root();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  CheckKubectlConfig(dir.root());

  std::string config = dir.root() + "/config";
  for (const char* context : {"a", "b", "c"}) {
    SCOPED_TRACE(context);
    auto ours = LoadKubeconfig(config, context);
    ASSERT_TRUE(ours.ok()) << ours.status().message();
    auto view = [&](const char* path) {
      return KubectlView(config, context, std::string("{") + path + "}");
    };
    ApiServer server;
    ASSERT_TRUE(ParseServerUrl(view(".clusters[0].cluster.server"), server).ok());
    EXPECT_EQ(ours->server.Url(), server.Url());
    EXPECT_EQ(ours->namespace_name, view(".contexts[0].context.namespace"));
    EXPECT_EQ(ours->server.skip_verify,
              view(".clusters[0].cluster.insecure-skip-tls-verify") == "true");
    EXPECT_EQ(ours->server.ca_pem,
              Base64Decode(view(".clusters[0].cluster.certificate-authority-data")));
    EXPECT_EQ(ours->server.client_cert_pem,
              Base64Decode(view(".users[0].user.client-certificate-data")));
    EXPECT_EQ(ours->server.client_key_pem, Base64Decode(view(".users[0].user.client-key-data")));
  }
}

// ---- in-cluster -----------------------------------------------------------------------------

class InClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("sa/token", "sa-token\n");
    dir_.Write("sa/ca.crt", kCa);
    dir_.Write("sa/namespace", "executors\n");
    env_.vars = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  }
  Result<KubeConfig> Load() { return InClusterConfig(env_.Lookup(), dir_.Path("sa")); }

  ScratchDir dir_;
  Env env_;
};

TEST_F(InClusterTest, TheServiceAccountTree) {
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->in_cluster);
  EXPECT_EQ(c->server.Url(), "https://10.96.0.1:443");
  EXPECT_EQ(c->server.server_name, "10.96.0.1");
  EXPECT_FALSE(c->server.skip_verify);
  EXPECT_EQ(c->server.ca_pem, kCa);
  EXPECT_EQ(AuthorizationOf(*c), "Bearer sa-token");
  EXPECT_EQ(c->Namespace(), "executors");
  EXPECT_EQ(c->origin, "in-cluster (" + dir_.Path("sa") + ")");
}

TEST_F(InClusterTest, TheRotatedTokenIsSent) {
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(AuthorizationOf(*c), "Bearer sa-token");
  dir_.Replace("sa/token", "sa-token-2\n");
  EXPECT_EQ(AuthorizationOf(*c), "Bearer sa-token-2");
}

TEST_F(InClusterTest, IPv6HostAndPodNamespace) {
  env_.vars["KUBERNETES_SERVICE_HOST"] = "fd00:10:96::1";
  env_.vars["KUBERNETES_SERVICE_PORT"] = "6443";
  env_.vars["POD_NAMESPACE"] = "from-downward-api";
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.Url(), "https://[fd00:10:96::1]:6443");
  EXPECT_EQ(c->Namespace(), "from-downward-api");
}

TEST_F(InClusterTest, NoNamespaceFileMeansDefault) {
  std::filesystem::remove(dir_.Path("sa/namespace"));
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->namespace_name, "");
  EXPECT_EQ(c->Namespace(), "default");
}

TEST_F(InClusterTest, ErrorsNameTheVariableOrFile) {
  std::string where = "in-cluster configuration (" + dir_.Path("sa") + "): ";
  env_.vars["KUBERNETES_SERVICE_PORT"] = "https";
  EXPECT_EQ(ErrorOf(Load()), where + "invalid KUBERNETES_SERVICE_PORT='https': expected 1..65535");
  env_.vars.erase("KUBERNETES_SERVICE_PORT");
  EXPECT_EQ(ErrorOf(Load()),
            where + "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set");
  env_.vars["KUBERNETES_SERVICE_PORT"] = "443";
  std::filesystem::remove(dir_.Path("sa/ca.crt"));
  EXPECT_EQ(ErrorOf(Load()), where + "the cluster's CA: reading " + dir_.Path("sa/ca.crt") +
                                 ": No such file or directory");
  std::filesystem::remove(dir_.Path("sa/token"));
  EXPECT_EQ(ErrorOf(Load()), where + "bearer token: reading " + dir_.Path("sa/token") +
                                 ": No such file or directory");
}

// ---- which one ------------------------------------------------------------------------------

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("sa/token", "sa-token");
    dir_.Write("sa/ca.crt", kCa);
    kubeconfig_ =
        "clusters: [{name: c, cluster: {server: 'https://from-file'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n";
  }
  Result<KubeConfig> Resolve() { return ResolveKubeConfig(env_.Lookup(), dir_.Path("sa")); }

  ScratchDir dir_;
  Env env_;
  std::string kubeconfig_;
};

TEST_F(ResolveTest, KubeconfigFirstThenInClusterThenHome) {
  std::string home_config = dir_.Write("home/.kube/config", kubeconfig_);
  std::string listed = dir_.Write("second", kubeconfig_);
  env_.vars = {{"KUBECONFIG", dir_.Path("missing") + ":" + listed + ":" + home_config},
               {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
               {"KUBERNETES_SERVICE_PORT", "443"},
               {"HOME", dir_.Path("home")}};
  auto c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->origin, "kubeconfig " + listed + ", context x");  // the first that exists

  env_.vars.erase("KUBECONFIG");
  c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->in_cluster);

  env_.vars.erase("KUBERNETES_SERVICE_HOST");
  c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->origin, "kubeconfig " + home_config + ", context x");
}

TEST_F(ResolveTest, NothingToGoOn) {
  env_.vars = {{"KUBECONFIG", dir_.Path("a") + ":" + dir_.Path("b")}};
  EXPECT_EQ(ErrorOf(Resolve()),
            "KUBECONFIG='" + dir_.Path("a") + ":" + dir_.Path("b") + "': no such file");
  env_.vars = {{"HOME", dir_.Path("home")}};
  EXPECT_EQ(ErrorOf(Resolve()),
            "no Kubernetes configuration: not in a cluster (KUBERNETES_SERVICE_HOST is not set), "
            "KUBECONFIG is not set, and " +
                dir_.Path("home") + "/.kube/config does not exist");
}

}  // namespace
}  // namespace ci::k8s
