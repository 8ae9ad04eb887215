// The Kubernetes backend's options from the environment (k8s/k8s_options.h): the onyx variables,
// ours for the pods, and an error naming the variable for every invalid value.
#include "k8s/k8s_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace ci::k8s {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Result<K8sOptions> Read(const std::map<std::string, std::string>& env) {
  return K8sOptionsFromEnv([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The error of an environment that must be refused.
std::string ErrorOf(const std::map<std::string, std::string>& env) {
  auto o = Read(env);
  EXPECT_FALSE(o.ok()) << "accepted";
  return o.ok() ? "" : o.status().message();
}

TEST(K8sOptions, Defaults) {
  auto o = Read({});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->namespace_, "default");
  EXPECT_EQ(o->image, "code-interpreter-executor:latest");
  EXPECT_EQ(o->service_account, "");
  EXPECT_TRUE(o->net_admin_lockdown);  // onyx's default
  EXPECT_EQ(o->lockdown_image, "");
  EXPECT_EQ(o->pod, PodOverrides{});
  EXPECT_EQ(o->pod.image_pull_policy, "IfNotPresent");
  EXPECT_FALSE(o->owner.has_value());
  EXPECT_TRUE(o->agent);
  EXPECT_EQ(o->agent_path, "/usr/local/lib/code-interpreter/agent");  // the executor image's
  EXPECT_FALSE(o->shared_warm_pool);
}

TEST(K8sOptions, Agent) {
  auto o = Read({{"KUBERNETES_EXECUTOR_AGENT", "false"},
                 {"KUBERNETES_EXECUTOR_AGENT_PATH", "/opt/ci/agent"}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->agent);
  EXPECT_EQ(o->agent_path, "/opt/ci/agent");
}

TEST(K8sOptions, SharedWarmPool) {
  auto o = Read({{"KUBERNETES_SHARED_WARM_POOL", "true"}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->shared_warm_pool);
}

TEST(K8sOptions, SandboxApi) {
  auto pods = Read({});
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  EXPECT_FALSE(pods->agent_sandbox);
  auto claimed = Read({{"KUBERNETES_SANDBOX_API", "agent-sandbox"}});
  ASSERT_TRUE(claimed.ok()) << claimed.status().message();
  EXPECT_TRUE(claimed->agent_sandbox);
  auto unknown = Read({{"KUBERNETES_SANDBOX_API", "sandboxes"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("pods|agent-sandbox"));
  // Its warm pools are shared already: asking for the other sharing is a mistake to name.
  auto both =
      Read({{"KUBERNETES_SANDBOX_API", "agent-sandbox"}, {"KUBERNETES_SHARED_WARM_POOL", "true"}});
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("unset KUBERNETES_SHARED_WARM_POOL"));
}

TEST(K8sOptions, OnyxVariables) {
  auto o = Read({{"KUBERNETES_EXECUTOR_NAMESPACE", "sandboxes"},
                 {"KUBERNETES_EXECUTOR_IMAGE", "registry.local:5000/ci/executor@sha256:abc"},
                 {"KUBERNETES_EXECUTOR_SERVICE_ACCOUNT", "executor-sa"},
                 {"KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN", "false"}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->namespace_, "sandboxes");
  EXPECT_EQ(o->image, "registry.local:5000/ci/executor@sha256:abc");
  EXPECT_EQ(o->service_account, "executor-sa");
  EXPECT_FALSE(o->net_admin_lockdown);
}

// onyx turns the lockdown off with false/0/no (any case); we take true/1/yes for on and refuse
// anything else instead of reading it as on.
TEST(K8sOptions, LockdownValues) {
  for (const char* off : {"false", "0", "no", "FALSE", "No"}) {
    auto o = Read({{"KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN", off}});
    ASSERT_TRUE(o.ok()) << off;
    EXPECT_FALSE(o->net_admin_lockdown) << off;
  }
  for (const char* on : {"true", "1", "yes", "True"}) {
    auto o = Read({{"KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN", on}});
    ASSERT_TRUE(o.ok()) << on;
    EXPECT_TRUE(o->net_admin_lockdown) << on;
  }
  EXPECT_EQ(ErrorOf({{"KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN", "off"}}),
            "invalid environment variable KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN='off': expected "
            "one of true|false|1|0|yes|no");
}

// `VAR=` in a compose file or a Helm value means the default, as onyx reads it.
TEST(K8sOptions, EmptyIsUnset) {
  auto o = Read({{"KUBERNETES_EXECUTOR_NAMESPACE", ""},
                 {"KUBERNETES_EXECUTOR_IMAGE", ""},
                 {"KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN", ""},
                 {"KUBERNETES_EXECUTOR_TOLERATIONS", ""},
                 {"POD_NAME", ""}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->namespace_, "default");
  EXPECT_EQ(o->image, "code-interpreter-executor:latest");
  EXPECT_TRUE(o->net_admin_lockdown);
  EXPECT_TRUE(o->pod.tolerations.empty());
}

TEST(K8sOptions, PodOverrides) {
  auto o = Read({{"KUBERNETES_EXECUTOR_NODE_SELECTOR",
                  "sandbox.example.com/pool=gvisor,kubernetes.io/arch=amd64"},
                 {"KUBERNETES_EXECUTOR_TOLERATIONS",
                  "sandbox=true:NoSchedule,dedicated:NoExecute,example.com/any"},
                 {"KUBERNETES_EXECUTOR_RUNTIME_CLASS", "gvisor"},
                 {"KUBERNETES_EXECUTOR_PRIORITY_CLASS", "sandbox-low"},
                 {"KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS", "regcred,mirror.creds"},
                 {"KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY", "always"},
                 {"KUBERNETES_EXECUTOR_SECCOMP_PROFILE", "profiles/code-interpreter.json"},
                 {"KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE", "busybox-iptables:1"}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->pod.node_selector,
            (std::map<std::string, std::string>{{"kubernetes.io/arch", "amd64"},
                                                {"sandbox.example.com/pool", "gvisor"}}));
  EXPECT_THAT(o->pod.tolerations, ElementsAre(Toleration{"sandbox", "Equal", "true", "NoSchedule"},
                                              Toleration{"dedicated", "Exists", "", "NoExecute"},
                                              Toleration{"example.com/any", "Exists", "", ""}));
  EXPECT_EQ(o->pod.runtime_class, "gvisor");
  EXPECT_EQ(o->pod.priority_class, "sandbox-low");
  EXPECT_THAT(o->pod.image_pull_secrets, ElementsAre("regcred", "mirror.creds"));
  EXPECT_EQ(o->pod.image_pull_policy, "Always");
  EXPECT_EQ(o->pod.seccomp_localhost_profile, "profiles/code-interpreter.json");
  EXPECT_EQ(o->lockdown_image, "busybox-iptables:1");
}

// Each invalid value stops startup with the variable's name and what it should be.
TEST(K8sOptions, InvalidValuesNameTheVariable) {
  const std::string too_long(64, 'a');
  const std::pair<const char*, const char*> cases[] = {
      {"KUBERNETES_EXECUTOR_NAMESPACE", "Sandboxes"},
      {"KUBERNETES_EXECUTOR_NAMESPACE", "a.b"},
      {"KUBERNETES_EXECUTOR_NAMESPACE", too_long.c_str()},
      {"KUBERNETES_EXECUTOR_IMAGE", "python 3"},
      {"KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE", "a\tb"},
      {"KUBERNETES_EXECUTOR_SERVICE_ACCOUNT", "-sa"},
      {"KUBERNETES_EXECUTOR_RUNTIME_CLASS", "gVisor"},
      {"KUBERNETES_EXECUTOR_PRIORITY_CLASS", "low_priority"},
      {"KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS", "regcred,"},
      {"KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS", "Reg"},
      {"KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY", "sometimes"},
      {"KUBERNETES_EXECUTOR_SECCOMP_PROFILE", "/var/lib/kubelet/seccomp/x.json"},
      {"KUBERNETES_EXECUTOR_SECCOMP_PROFILE", "profiles/../../etc/x.json"},
      {"KUBERNETES_EXECUTOR_SECCOMP_PROFILE", "profiles/"},
      {"KUBERNETES_EXECUTOR_NODE_SELECTOR", "pool"},
      {"KUBERNETES_EXECUTOR_NODE_SELECTOR", "pool=a b"},
      {"KUBERNETES_EXECUTOR_NODE_SELECTOR", "a=1,,b=2"},
      {"KUBERNETES_EXECUTOR_TOLERATIONS", "sandbox=true:NoRun"},
      {"KUBERNETES_EXECUTOR_TOLERATIONS", "=x:NoSchedule"},
      {"KUBERNETES_EXECUTOR_TOLERATIONS", "k=-v-"},
      {"KUBERNETES_EXECUTOR_AGENT", "maybe"},
      {"KUBERNETES_SHARED_WARM_POOL", "shared"},
      {"KUBERNETES_EXECUTOR_AGENT_PATH", "agent"},
      {"KUBERNETES_EXECUTOR_AGENT_PATH", "/usr/local/lib/my agent"},
      {"POD_NAME", "Daemon_Pod"},
  };
  for (const auto& [name, value] : cases) {
    std::map<std::string, std::string> env = {{name, value}};
    if (std::string(name) == "POD_NAME") env["POD_UID"] = "1234";
    std::string error = ErrorOf(env);
    EXPECT_THAT(error, HasSubstr(std::string("invalid environment variable ") + name + "='" +
                                 value + "': expected "))
        << name << "=" << value;
  }
}

TEST(K8sOptions, InvalidSelectorSaysWhatIsWrong) {
  EXPECT_THAT(
      ErrorOf({{"KUBERNETES_EXECUTOR_TOLERATIONS", "a:NoRun"}}),
      HasSubstr("'a:NoRun' has an effect other than NoSchedule, PreferNoSchedule, NoExecute"));
  EXPECT_THAT(ErrorOf({{"KUBERNETES_EXECUTOR_NODE_SELECTOR", "pool"}}),
              HasSubstr("'pool' is not KEY=VALUE"));
}

// The downward API gives the daemon's pod; both name and uid, or neither.
TEST(K8sOptions, OwnerPodFromTheDownwardApi) {
  auto o = Read({{"POD_NAME", "code-interpreter-7c9d5-x2x"},
                 {"POD_UID", "9d2c51b3-2b1e-4c59-9a5e-0d5f6c1b7e11"},
                 {"POD_NAMESPACE", "ci"}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_TRUE(o->owner.has_value());
  EXPECT_EQ(*o->owner,
            (OwnerPod{"code-interpreter-7c9d5-x2x", "9d2c51b3-2b1e-4c59-9a5e-0d5f6c1b7e11", "ci"}));
  EXPECT_THAT(ErrorOf({{"POD_NAME", "code-interpreter-7c9d5-x2x"}}),
              HasSubstr("POD_UID must be set with it"));
  EXPECT_THAT(ErrorOf({{"POD_UID", "9d2c51b3"}}), HasSubstr("POD_NAME must be set with it"));
}

TEST(K8sNames, Validators) {
  EXPECT_TRUE(IsDnsLabel("a"));
  EXPECT_TRUE(IsDnsLabel("ci-2"));
  EXPECT_FALSE(IsDnsLabel(""));
  EXPECT_FALSE(IsDnsLabel("-a"));
  EXPECT_FALSE(IsDnsLabel("a-"));
  EXPECT_FALSE(IsDnsLabel("A"));
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'a')));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_TRUE(IsDnsSubdomain("a.b-c.d"));
  EXPECT_FALSE(IsDnsSubdomain("a..b"));
  EXPECT_FALSE(IsDnsSubdomain("a."));
  EXPECT_FALSE(IsDnsSubdomain(std::string(127, 'a') + "." + std::string(126, 'b')));  // 254
  EXPECT_TRUE(IsLabelValue(""));
  EXPECT_TRUE(IsLabelValue("A_b.c-1"));
  EXPECT_FALSE(IsLabelValue("_a"));
  EXPECT_FALSE(IsLabelValue("a/b"));
  EXPECT_FALSE(IsLabelValue(std::string(64, 'a')));
  EXPECT_TRUE(IsQualifiedName("app"));
  EXPECT_TRUE(IsQualifiedName("example.com/My_Key"));
  EXPECT_FALSE(IsQualifiedName("Example.com/key"));
  EXPECT_FALSE(IsQualifiedName("example.com/"));
  EXPECT_FALSE(IsQualifiedName("/key"));
  EXPECT_FALSE(IsQualifiedName(""));
}

}  // namespace
}  // namespace ci::k8s
