#include "daemon/config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <tuple>

#include "daemon/http/connection_limit.h"

namespace ci::daemon {
namespace {

Result<Config> Load(std::map<std::string, std::string> env) {
  return LoadConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Config, OnyxDefaults) {
  auto c = Load({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->executor_backend, "local");
  EXPECT_EQ(c->host, "0.0.0.0");
  EXPECT_EQ(c->port, 8000);
  EXPECT_EQ(c->max_exec_timeout_ms, 60000);
  EXPECT_EQ(c->max_output_bytes, 1000000u);
  EXPECT_EQ(c->cpu_time_limit_sec, 5u);
  EXPECT_EQ(c->memory_limit_mb, 256u);
  EXPECT_EQ(c->file_storage_dir, "/tmp/code-interpreter-files");
  EXPECT_EQ(c->max_file_size_mb, 100u);
  EXPECT_EQ(c->file_ttl_sec, 3600u);
  EXPECT_EQ(c->file_storage_max_mb, 10240u);
  EXPECT_EQ(c->max_concurrent_executions, 16u);
  EXPECT_DOUBLE_EQ(c->backend_check_timeout_sec, 2.5);
}

TEST(Config, TheConnectionCapKeepsDescriptorsForSandboxes) {
  auto c = Load({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->max_connections, 0u);  // derived
  EXPECT_EQ(ConnectionCap(0, 1024), 384u);
  EXPECT_EQ(ConnectionCap(0, 256), 16u);
  EXPECT_EQ(ConnectionCap(0, 1u << 20), kMaxDerivedConnections);
  EXPECT_EQ(ConnectionCap(0, UINT64_MAX), kMaxDerivedConnections);
  EXPECT_EQ(ConnectionCap(100000, 256), 100000u);  // MAX_CONNECTIONS wins
  c = Load({{"MAX_CONNECTIONS", "50"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->max_connections, 50u);
}

// A file of the test's own, removed at the end.
struct ConfigTempFile {
  std::string path;
  explicit ConfigTempFile(const std::string& text) {
    char name[] = "/tmp/config_test_XXXXXX";
    const int fd = ::mkstemp(name);
    path = name;
    const ssize_t n = ::write(fd, text.data(), text.size());
    (void)n;
    ::close(fd);
  }
  ~ConfigTempFile() { ::unlink(path.c_str()); }
};

TEST(Config, EgressSecretsSettingsAreCheckedAtStartup) {
  ConfigTempFile secrets("# the index\npypi.test:8080 Authorization: Bearer sk-startup-1\n");
  ConfigTempFile bad_secrets("pypi.test Authorization: Bearer sk-startup-1\n10.0.0.0/8 X: y\n");
  ConfigTempFile not_pem("not a certificate\n");
  auto c = Load({{"EGRESS_SECRETS_FILE", secrets.path},
                 {"EGRESS_TLS_INTERCEPT", "pypi.test, *.example.com:443"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->egress_secrets_file, secrets.path);
  ASSERT_EQ(c->egress_tls_intercept.size(), 2u);
  EXPECT_EQ(c->egress_tls_intercept[1].ToString(), "*.example.com:443");
  for (auto [name, value, says] :
       std::initializer_list<std::tuple<const char*, std::string, const char*>>{
           {"EGRESS_SECRETS_FILE", "/nonexistent/secrets", "EGRESS_SECRETS_FILE: cannot open"},
           {"EGRESS_SECRETS_FILE", bad_secrets.path, "line 2"},
           {"EGRESS_TLS_INTERCEPT", "10.0.0.0/8", "not addresses"},
           {"EGRESS_TLS_INTERCEPT", "*", "EGRESS_TLS_INTERCEPT"},
           {"EGRESS_UPSTREAM_CA_FILE", "/nonexistent/ca.pem", "EGRESS_UPSTREAM_CA_FILE"},
           {"EGRESS_UPSTREAM_CA_FILE", not_pem.path, "no PEM certificate"}}) {
    auto bad = Load({{name, value}});
    ASSERT_FALSE(bad.ok()) << name << "=" << value;
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status().message();
    EXPECT_EQ(bad.status().message().find("sk-startup"), std::string::npos);
  }
}

TEST(Config, EgressPoliciesAreCheckedAtStartup) {
  auto none = Load({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->egress_default.none());
  EXPECT_TRUE(none->egress_max.none());
  auto c = Load({{"EGRESS_ALLOW", "pypi.org, *.pythonhosted.org"},
                 {"EGRESS_ALLOW_MAX", "*.org, pypi.org"},
                 {"EGRESS_DENY", "evil.pythonhosted.org"},
                 {"EGRESS_HOSTS", "pypi.test=10.0.0.5, pypi.test=10.0.0.6"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->egress_default.ToString(), "pypi.org,*.pythonhosted.org -evil.pythonhosted.org");
  EXPECT_EQ(c->egress_max.ToString(), "*.org,pypi.org -evil.pythonhosted.org");
  EXPECT_EQ(c->egress_hosts.at("pypi.test").size(), 2u);
  // Without a bound, EGRESS_ALLOW is its own.
  auto own = Load({{"EGRESS_ALLOW", "pypi.org"}});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->egress_max.ToString(), "pypi.org");
  for (auto [name, value, says] :
       std::initializer_list<std::tuple<const char*, const char*, const char*>>{
           {"EGRESS_ALLOW", "pypi.org, *", "EGRESS_ALLOW: '*'"},
           {"EGRESS_DENY", "10.0.0.0/40", "EGRESS_DENY"},
           {"EGRESS_ALLOW_MAX", "x.org:0", "EGRESS_ALLOW_MAX"},
           {"EGRESS_HOSTS", "pypi.test", "EGRESS_HOSTS"},
           {"EGRESS_HOSTS", "*.test=10.0.0.1", "EGRESS_HOSTS"},
           {"EGRESS_HOSTS", "pypi.test=not-an-ip", "EGRESS_HOSTS"}}) {
    auto bad = Load({{name, value}});
    ASSERT_FALSE(bad.ok()) << name << "=" << value;
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status().message();
  }
  auto wider = Load({{"EGRESS_ALLOW", "pypi.org, evil.com"}, {"EGRESS_ALLOW_MAX", "pypi.org"}});
  ASSERT_FALSE(wider.ok());
  EXPECT_NE(wider.status().message().find("EGRESS_ALLOW: 'evil.com' is not within"),
            std::string::npos)
      << wider.status().message();
}

TEST(Config, ReadsValues) {
  auto c = Load({{"PORT", "0"},
                 {"LOG_LEVEL", "DEBUG"},
                 {"LOG_FORMAT", "json"},
                 {"MEMORY_LIMIT_MB", "128"},
                 {"EXECUTOR_BACKEND", "Docker"},
                 {"BACKEND_CHECK_TIMEOUT_SEC", "0.5"},
                 {"LOG_LEVEL", "warning"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->port, 0);
  EXPECT_EQ(c->log_format, "json");
  EXPECT_EQ(c->memory_limit_mb, 128u);
  EXPECT_EQ(c->executor_backend, "docker");
  EXPECT_DOUBLE_EQ(c->backend_check_timeout_sec, 0.5);
}

TEST(Config, WarmPoolsPerLanguageAndWarmImports) {
  auto d = Load({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->warm_pool_size, 2u);
  EXPECT_EQ(d->warm_pool_size_bash, 1u);
  EXPECT_EQ(d->warm_pool_size_javascript, 1u);
  EXPECT_EQ(d->warm_pool_size_go, 1u);
  EXPECT_TRUE(d->warm_imports.empty());
  auto c = Load({{"WARM_POOL_SIZE", "4"},
                 {"WARM_POOL_SIZE_BASH", "0"},
                 {"WARM_POOL_SIZE_JAVASCRIPT", "3"},
                 {"WARM_POOL_SIZE_GO", "5"},
                 {"WARM_IMPORTS", " numpy,pandas , matplotlib.pyplot,_x1"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->warm_pool_size, 4u);
  EXPECT_EQ(c->warm_pool_size_bash, 0u);
  EXPECT_EQ(c->warm_pool_size_javascript, 3u);
  EXPECT_EQ(c->warm_pool_size_go, 5u);
  EXPECT_EQ(c->warm_imports,
            (std::vector<std::string>{"numpy", "pandas", "matplotlib.pyplot", "_x1"}));
  for (const char* bad : {"numpy,,pandas", "os;import sys", "1abc", "a..b", "a.", ".a", "x,"}) {
    auto r = Load({{"WARM_IMPORTS", bad}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("WARM_IMPORTS"), std::string::npos);
  }
}

TEST(Config, Booleans) {
  EXPECT_FALSE(Load({})->strict_hardening);
  EXPECT_TRUE(Load({{"STRICT_HARDENING", "true"}})->strict_hardening);
  EXPECT_TRUE(Load({{"STRICT_HARDENING", "1"}})->strict_hardening);
  EXPECT_TRUE(Load({{"STRICT_HARDENING", "YES"}})->strict_hardening);
  EXPECT_FALSE(Load({{"STRICT_HARDENING", "false"}})->strict_hardening);
}

TEST(Config, InvalidValuesNameTheVariable) {
  auto expect_error = [](std::map<std::string, std::string> env, const std::string& name) {
    auto c = Load(env);
    ASSERT_FALSE(c.ok()) << name;
    EXPECT_NE(c.status().message().find(name), std::string::npos) << c.status().message();
  };
  expect_error({{"PORT", "80a"}}, "PORT");
  expect_error({{"PORT", "70000"}}, "PORT");
  expect_error({{"PORT", ""}}, "PORT");
  expect_error({{"MAX_OUTPUT_BYTES", "-1"}}, "MAX_OUTPUT_BYTES");
  expect_error({{"MEMORY_LIMIT_MB", "1.5"}}, "MEMORY_LIMIT_MB");
  expect_error({{"EXECUTOR_BACKEND", "lxc"}}, "EXECUTOR_BACKEND");
  expect_error({{"LOG_FORMAT", "xml"}}, "LOG_FORMAT");
  expect_error({{"BACKEND_CHECK_TIMEOUT_SEC", "nan"}}, "BACKEND_CHECK_TIMEOUT_SEC");
  expect_error({{"SANDBOX_ROOTFS", "relative/dir"}}, "SANDBOX_ROOTFS");
  expect_error({{"FILE_STORAGE_DIR", ""}}, "FILE_STORAGE_DIR");
  expect_error({{"STRICT_HARDENING", "maybe"}}, "STRICT_HARDENING");
  expect_error({{"CPU_QUOTA_PERCENT", "-5"}}, "CPU_QUOTA_PERCENT");
  expect_error({{"FILE_STORAGE_MAX_MB", "0"}}, "FILE_STORAGE_MAX_MB");
}

}  // namespace
}  // namespace ci::daemon

namespace ci::daemon {
namespace {

TEST(Config, SeccompSettings) {
  auto defaults = Load({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->seccomp_profile, "default");
  EXPECT_FALSE(defaults->seccomp_log_denied);
  auto c = Load({{"SECCOMP_PROFILE", "strict"}, {"SECCOMP_LOG_DENIED", "true"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->seccomp_profile, "strict");
  EXPECT_TRUE(c->seccomp_log_denied);
  auto bad = Load({{"SECCOMP_PROFILE", "relative.json"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SECCOMP_PROFILE"), std::string::npos);
}

}  // namespace
}  // namespace ci::daemon

namespace ci::daemon {
namespace {

TEST(Config, SandboxIdRange) {
  auto d = Load({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->sandbox_id_first, 2147418112u);
  EXPECT_EQ(d->sandbox_id_count, 65536u);
  auto c = Load({{"SANDBOX_ID_RANGE", "300000-300099"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sandbox_id_first, 300000u);
  EXPECT_EQ(c->sandbox_id_count, 100u);
  for (const char* bad :
       {"", "300000", "300000-", "5-10", "300099-300000", "1-2-3", "x-y", "300000-4294967295"}) {
    auto r = Load({{"SANDBOX_ID_RANGE", bad}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("SANDBOX_ID_RANGE"), std::string::npos);
    EXPECT_NE(r.status().message().find("FIRST-LAST"), std::string::npos);
  }
}

}  // namespace
}  // namespace ci::daemon
