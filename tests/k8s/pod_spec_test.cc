// SandboxSpec -> Pod (k8s/pod_spec.h): golden JSON (tests/k8s/golden, UPDATE_GOLDEN=1 rewrites),
// the restricted Pod Security Standard checked on the JSON, the options Prepare derives, and the
// measures and downgrades read from the Pod value.
#include "k8s/pod_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "common/golden.h"
#include "core/json.h"
#include "core/policies.h"
#include "core/rfc3339.h"

namespace ci::k8s {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int64_t kSpecNow = 1700000000;  // 2023-11-14T22:13:20Z

void ExpectGolden(const std::string& name, const std::string& actual) {
  testing_support::ExpectGolden(CI_K8S_GOLDEN_DIR, name, actual);
}

SandboxSpec DefaultSpec() {
  SandboxSpec spec;
  spec.env = DefaultSandboxEnv();
  spec.security.seccomp_profile_json = std::string(*EmbeddedPolicy("seccomp-executor"));
  spec.security.seccomp_profile_name = "default";
  return spec;
}

PodRequest Request() {
  PodRequest r;
  r.now = kSpecNow;
  r.instance_id = "ci-7f3a9c";
  r.owner_description = "host builder-1, pid 4242";
  r.daemon_namespace = "default";
  return r;
}

// Every override, the lockdown off (the NetworkPolicy's way), a Localhost profile, the daemon's
// pod as owner in the same namespace, and a session.
K8sOptions Overridden() {
  K8sOptions o;
  o.namespace_ = "sandboxes";
  o.image = "registry.local:5000/ci/executor:1.2";
  o.service_account = "executor-sa";
  o.net_admin_lockdown = false;
  o.pod.node_selector = {{"sandbox.example.com/pool", "gvisor"}};
  o.pod.tolerations = {{"sandbox", "Equal", "true", "NoSchedule"}, {"dedicated", "Exists", "", ""}};
  o.pod.runtime_class = "gvisor";
  o.pod.priority_class = "sandbox-low";
  o.pod.image_pull_secrets = {"regcred"};
  o.pod.image_pull_policy = "Always";
  o.pod.seccomp_localhost_profile = "profiles/code-interpreter.json";
  o.owner = OwnerPod{"code-interpreter-7c9d5-x2x", "9d2c51b3-2b1e-4c59-9a5e-0d5f6c1b7e11", ""};
  o.sessions_outlive_daemon = false;  // so the session keeps its ownerReference
  return o;
}

SandboxSpec SessionSpec() {
  SandboxSpec spec = DefaultSpec();
  spec.session_expires_at = kSpecNow + 1800;
  spec.limits.memory_bytes = 512ull << 20;
  spec.limits.cpu_percent = 50;
  spec.limits.workspace_bytes = 10ull << 20;
  spec.limits.tmp_bytes = 5ull << 20;
  spec.session = {"code-session-0123456789abcdef0123456789abcdef", kSpecNow + 0.25,
                  kSpecNow + 1799.25, "alice"};
  return spec;
}

Pod SessionPodSpec() {
  PodRequest r = Request();
  r.daemon_namespace = "sandboxes";
  PodOptions options = PodOptionsFor(Overridden(), SessionSpec(), r);
  options.session_token = "5e55";
  return PodFromSpec(SessionSpec(), options);
}

Pod ExecutionPod(const K8sOptions& o = K8sOptions()) {
  return PodFromSpec(DefaultSpec(), PodOptionsFor(o, DefaultSpec(), Request()));
}

TEST(PodJson, ExecutionWithDefaults) { ExpectGolden("execution_default", PodJson(ExecutionPod())); }

TEST(PodJson, SessionWithEveryOverride) {
  ExpectGolden("session_overrides", PodJson(SessionPodSpec()));
}

TEST(PodJson, ExecutionWithALockdownImage) {
  K8sOptions o;
  o.lockdown_image = "iptables-tools:1";
  PodRequest r = Request();
  ExpectGolden("execution_lockdown_image",
               PodJson(PodFromSpec(DefaultSpec(), PodOptionsFor(o, DefaultSpec(), r))));
}

// --- the restricted Pod Security Standard (kubernetes.io/docs/concepts/security/
// pod-security-standards), checked on the JSON sent, one violation per line ---

const rapidjson::Value* Member(const rapidjson::Value& o, const char* key) {
  return o.IsObject() && o.HasMember(key) ? &o[key] : nullptr;
}

bool IsTrue(const rapidjson::Value* v) { return v != nullptr && v->IsBool() && v->GetBool(); }
bool IsFalse(const rapidjson::Value* v) { return v != nullptr && v->IsBool() && !v->GetBool(); }

std::vector<std::string> RestrictedViolations(const std::string& pod_json) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(pod_json, d, why)) return {"unparsable: " + why};
  std::vector<std::string> out;
  const rapidjson::Value& spec = d["spec"];
  for (const char* host : {"hostNetwork", "hostPID", "hostIPC"}) {
    if (IsTrue(Member(spec, host))) out.push_back(std::string(host) + " true");
  }
  const rapidjson::Value* pod_sc = Member(spec, "securityContext");
  const bool pod_non_root = pod_sc != nullptr && IsTrue(Member(*pod_sc, "runAsNonRoot"));
  const rapidjson::Value* pod_uid = pod_sc ? Member(*pod_sc, "runAsUser") : nullptr;
  if (pod_uid != nullptr && pod_uid->GetInt64() == 0) out.push_back("pod runAsUser 0");
  std::string pod_seccomp;
  if (const rapidjson::Value* p = pod_sc ? Member(*pod_sc, "seccompProfile") : nullptr) {
    pod_seccomp = (*p)["type"].GetString();
  }
  for (const char* list : {"initContainers", "containers"}) {
    const rapidjson::Value* containers = Member(spec, list);
    if (containers == nullptr) continue;
    for (const auto& c : containers->GetArray()) {
      std::string name = std::string(list) + " " + c["name"].GetString() + ": ";
      const rapidjson::Value* sc = Member(c, "securityContext");
      if (sc == nullptr) {
        out.push_back(name + "no securityContext");
        continue;
      }
      if (IsTrue(Member(*sc, "privileged"))) out.push_back(name + "privileged");
      if (!IsFalse(Member(*sc, "allowPrivilegeEscalation"))) {
        out.push_back(name + "allowPrivilegeEscalation not false");
      }
      const rapidjson::Value* non_root = Member(*sc, "runAsNonRoot");
      if (IsFalse(non_root) || (!pod_non_root && !IsTrue(non_root))) {
        out.push_back(name + "runAsNonRoot not true");
      }
      if (const rapidjson::Value* uid = Member(*sc, "runAsUser"); uid && uid->GetInt64() == 0) {
        out.push_back(name + "runAsUser 0");
      }
      const rapidjson::Value* seccomp = Member(*sc, "seccompProfile");
      std::string type = seccomp ? (*seccomp)["type"].GetString() : pod_seccomp;
      if (type != "RuntimeDefault" && type != "Localhost") out.push_back(name + "seccomp " + type);
      const rapidjson::Value* caps = Member(*sc, "capabilities");
      const rapidjson::Value* drop = caps ? Member(*caps, "drop") : nullptr;
      bool drops_all = false;
      if (drop != nullptr) {
        for (const auto& cap : drop->GetArray()) {
          drops_all = drops_all || std::string_view(cap.GetString()) == "ALL";
        }
      }
      if (!drops_all) out.push_back(name + "capabilities not dropping ALL");
      if (const rapidjson::Value* add = caps ? Member(*caps, "add") : nullptr) {
        for (const auto& cap : add->GetArray()) {
          if (std::string_view(cap.GetString()) != "NET_BIND_SERVICE") {
            out.push_back(name + "adds " + cap.GetString());
          }
        }
      }
    }
  }
  static const std::set<std::string> kAllowedVolumes = {
      "configMap", "csi",   "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
      "projected", "secret"};
  for (const auto& v : spec["volumes"].GetArray()) {
    for (const auto& m : v.GetObject()) {
      std::string key = m.name.GetString();
      if (key != "name" && kAllowedVolumes.count(key) == 0) out.push_back("volume type " + key);
    }
  }
  return out;
}

// Without the lockdown every pod passes `pod-security.kubernetes.io/enforce=restricted`.
TEST(PodSecurity, RestrictedWithoutTheLockdown) {
  K8sOptions o;
  o.net_admin_lockdown = false;
  EXPECT_THAT(RestrictedViolations(PodJson(ExecutionPod(o))), IsEmpty());
  EXPECT_THAT(RestrictedViolations(PodJson(SessionPodSpec())), IsEmpty());
}

// The lockdown's init container is the one exception (named as a downgrade below); the program's
// container stays restricted.
TEST(PodSecurity, TheLockdownInitContainerIsTheOnlyException) {
  EXPECT_THAT(RestrictedViolations(PodJson(ExecutionPod())),
              ElementsAre("initContainers network-lockdown: runAsNonRoot not true",
                          "initContainers network-lockdown: runAsUser 0",
                          "initContainers network-lockdown: adds NET_ADMIN"));
}

// The checker itself: it must catch what it checks.
TEST(PodSecurity, TheCheckerCatchesViolations) {
  std::string json = PodJson(SessionPodSpec());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = json;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  EXPECT_THAT(RestrictedViolations(replaced(R"("allowPrivilegeEscalation":false)",
                                            R"("allowPrivilegeEscalation":true)")),
              ElementsAre("containers executor: allowPrivilegeEscalation not false"));
  EXPECT_THAT(RestrictedViolations(replaced(R"("drop":["ALL"])", R"("drop":["NET_RAW"])")),
              ElementsAre("containers executor: capabilities not dropping ALL"));
  EXPECT_THAT(RestrictedViolations(replaced(R"("runAsNonRoot":true)", R"("runAsNonRoot":false)")),
              ElementsAre("containers executor: runAsNonRoot not true"));
  EXPECT_THAT(RestrictedViolations(replaced(R"("type":"Localhost")", R"("type":"Unconfined")")),
              ElementsAre("containers executor: seccomp Unconfined"));
  EXPECT_THAT(RestrictedViolations(replaced(R"("hostPID":false)", R"("hostPID":true)")),
              ElementsAre("hostPID true"));
  EXPECT_THAT(RestrictedViolations(replaced(R"("emptyDir":)", R"("hostPath":)")),
              ElementsAre("volume type hostPath"));
}

// --- what Prepare asks for ---

TEST(PodOptionsFor, AnExecutionPodsPid1IsTheAgentReadingItsAttach) {
  PodOptions p = PodOptionsFor(K8sOptions(), DefaultSpec(), Request());
  EXPECT_TRUE(p.agent);
  // With the places it empties between executions (a recycled pod, agent_container.h).
  EXPECT_THAT(p.command,
              ElementsAre("/usr/local/lib/code-interpreter/agent", "--wipe", "/workspace", "--wipe",
                          "/tmp", "--wipe", "/dev/shm", "--wipe", "/dev/mqueue"));
  Pod pod = PodFromSpec(DefaultSpec(), p);
  EXPECT_TRUE(pod.stdin);
  EXPECT_THAT(PodJson(pod), HasSubstr(R"("stdin":true,"tty":false)"));
  EXPECT_THAT(PodJson(pod), Not(HasSubstr("stdinOnce")));  // a broken attach closes nothing
  // A session's pod too (its calls are frames on the attach, not execs).
  PodOptions session = PodOptionsFor(K8sOptions(), SessionSpec(), Request());
  EXPECT_TRUE(session.agent);
  EXPECT_TRUE(PodFromSpec(SessionSpec(), session).stdin);
}

TEST(PodOptionsFor, AnExecutionPodLivesForTheExecutionPodTtl) {
  K8sOptions exec_driven;
  exec_driven.agent = false;
  PodOptions p = PodOptionsFor(exec_driven, DefaultSpec(), Request());
  EXPECT_EQ(p.kind, PodKind::kExecution);
  EXPECT_EQ(p.active_deadline_sec, 3600);
  EXPECT_EQ(p.expires_at, kSpecNow + 3600);
  K8sOptions o;
  o.execution_pod_ttl = std::chrono::seconds(900);
  EXPECT_EQ(PodOptionsFor(o, DefaultSpec(), Request()).active_deadline_sec, 900);
  EXPECT_THAT(p.command, ElementsAre("/bin/bash", "-c", "trap '' CHLD; exec sleep infinity"));
  EXPECT_EQ(p.lockdown_image, "code-interpreter-executor:latest");  // the executor image's iptables
}

TEST(PodOptionsFor, ASessionEndsByItselfAtItsExpiry) {
  SandboxSpec spec = SessionSpec();
  PodOptions p = PodOptionsFor(K8sOptions(), spec, Request());
  EXPECT_EQ(p.kind, PodKind::kSession);
  EXPECT_EQ(p.active_deadline_sec, 1800);
  EXPECT_EQ(p.expires_at, kSpecNow + 1800);
  // The agent ends it then (it kills everything and exits), or exec-driven, PID 1's sleep.
  ASSERT_GE(p.command.size(), 2u);
  EXPECT_THAT(std::vector<std::string>(p.command.end() - 2, p.command.end()),
              ElementsAre("--expires-at", std::to_string(kSpecNow + 1800)));
  K8sOptions exec_driven;
  exec_driven.agent = false;
  EXPECT_THAT(PodOptionsFor(exec_driven, spec, Request()).command,
              ElementsAre("/bin/bash", "-c", "trap '' CHLD; exec sleep 1800"));
  spec.session_expires_at = kSpecNow - 5;  // already past: the shortest deadline, never 0 (none)
  EXPECT_EQ(PodOptionsFor(K8sOptions(), spec, Request()).active_deadline_sec, 1);
}

// A session that outlives its daemon (the default) must not be garbage-collected with the
// daemon's pod; an execution pod still is.
TEST(PodOptions, ASessionOutlivingItsDaemonHasNoOwnerReference) {
  K8sOptions o = Overridden();
  o.sessions_outlive_daemon = true;
  PodRequest r = Request();
  r.daemon_namespace = "sandboxes";
  EXPECT_FALSE(PodOptionsFor(o, SessionSpec(), r).owner.has_value());
  EXPECT_TRUE(PodOptionsFor(o, DefaultSpec(), r).owner.has_value());
  // The pod says so, for every replica's reaper.
  Pod pod = PodFromSpec(SessionSpec(), PodOptionsFor(o, SessionSpec(), r));
  EXPECT_EQ(pod.annotations[kOutlivesDaemonAnnotation], "true");
  o.sessions_outlive_daemon = false;
  EXPECT_TRUE(PodOptionsFor(o, SessionSpec(), r).owner.has_value());
  pod = PodFromSpec(SessionSpec(), PodOptionsFor(o, SessionSpec(), r));
  EXPECT_FALSE(pod.annotations.contains(kOutlivesDaemonAnnotation));
}

// An owner in another namespace would look deleted to the garbage collector, which would remove
// the pod at once: the reference is only set within the executor namespace.
TEST(PodOptionsFor, OwnerOnlyWithinTheExecutorNamespace) {
  K8sOptions o;
  o.namespace_ = "sandboxes";
  o.owner = OwnerPod{"daemon-0", "uid-1", ""};
  PodRequest r = Request();
  r.daemon_namespace = "sandboxes";
  EXPECT_TRUE(PodOptionsFor(o, DefaultSpec(), r).owner.has_value());
  r.daemon_namespace = "ci";
  EXPECT_FALSE(PodOptionsFor(o, DefaultSpec(), r).owner.has_value());
  o.owner->namespace_ = "sandboxes";  // POD_NAMESPACE wins over the connection's namespace
  EXPECT_TRUE(PodOptionsFor(o, DefaultSpec(), r).owner.has_value());
  o.owner->namespace_ = "ci";
  r.daemon_namespace = "sandboxes";
  EXPECT_FALSE(PodOptionsFor(o, DefaultSpec(), r).owner.has_value());
}

TEST(PodFromSpec, ValuesFromTheSpec) {
  SandboxSpec spec = DefaultSpec();
  spec.env = {"A=b=c", "EMPTY="};
  spec.hostname = "Not_A_Label";  // the API server would refuse it: the pod's name is kept
  spec.security.read_only_root = false;
  Pod p = PodFromSpec(spec, PodOptionsFor(K8sOptions(), spec, Request()));
  EXPECT_THAT(p.env, ElementsAre(std::pair<std::string, std::string>{"A", "b=c"},
                                 std::pair<std::string, std::string>{"EMPTY", ""}));
  EXPECT_EQ(p.hostname, "");
  EXPECT_FALSE(p.read_only_root);
  EXPECT_EQ(p.labels.at(kExpiresLabel), std::to_string(kSpecNow + 3600));
  EXPECT_EQ(p.annotations.at(kExpiresAnnotation), "2023-11-14T23:13:20Z");
  EXPECT_THAT(MeasureNames(PodMeasures(p)),
              Not(Contains("read-only root (kubernetes readOnlyRootFilesystem)")));
}

TEST(PodFromSpec, Quantities) {
  EXPECT_EQ(BytesQuantity(256ull << 20), "256Mi");
  EXPECT_EQ(BytesQuantity(2ull << 30), "2Gi");
  EXPECT_EQ(BytesQuantity(800ull << 10), "800Ki");
  EXPECT_EQ(BytesQuantity(1536), "1536");
  EXPECT_EQ(BytesQuantity(0), "0");
  EXPECT_EQ(Rfc3339(kSpecNow), "2023-11-14T22:13:20Z");
}

// --- the enforcement report, read from the Pod value ---

TEST(PodMeasures, DefaultsWithTheLockdown) {
  EXPECT_THAT(MeasureNames(PodMeasures(ExecutionPod())),
              ElementsAre("pid namespace (kubernetes)", "mount namespace (kubernetes)",
                          "network namespace (loopback only, iptables of the network-lockdown "
                          "init)",
                          "no capabilities (kubernetes capabilities drop ALL)",
                          "read-only root (kubernetes readOnlyRootFilesystem)",
                          "no_new_privs (kubernetes allowPrivilegeEscalation false)",
                          "seccomp (RuntimeDefault profile)", "memory limit 256 MiB (kubernetes)",
                          "no controlling terminal (kubernetes, no tty)",
                          "CPU time limit 5 s (RLIMIT_CPU, ulimit in the run's wrapper)",
                          "open files limit 1024 (ulimit in the run's wrapper)",
                          "queued signals limit 1024 (ulimit in the run's wrapper)",
                          "message queue limit 800 KiB (ulimit in the run's wrapper)",
                          "locked memory limit 8 MiB (ulimit in the run's wrapper)"));
}

TEST(PodMeasures, CpuCapLocalhostProfileAndNoNetworkClaimWithoutTheLockdown) {
  auto names = MeasureNames(PodMeasures(SessionPodSpec()));
  EXPECT_THAT(names, Contains("CPU cap 50% (kubernetes limits.cpu)"));
  EXPECT_THAT(names, Contains("memory limit 512 MiB (kubernetes, Guaranteed QoS, no swap)"));
  EXPECT_THAT(names, Contains("seccomp (Localhost profiles/code-interpreter.json profile)"));
  for (const Measure& m : PodMeasures(SessionPodSpec())) {
    EXPECT_NE(m.kind, MeasureKind::kNetworkNamespace);
    EXPECT_NE(m.kind, MeasureKind::kPidsLimit);
  }
}

std::vector<std::string> DowngradeNames(const Pod& pod) {
  std::vector<std::string> names;
  for (const Downgrade& d : PodDowngrades(pod)) names.push_back(d.measure);
  return names;
}

TEST(PodDowngrades, WhatAPodCannotEnforce) {
  EXPECT_THAT(
      DowngradeNames(ExecutionPod()),
      ElementsAre("pids limit 64", "restricted Pod Security Standard", "host facts masked in /proc",
                  "own host uid/gid per sandbox", "seccomp (default profile)"));
  // Without the lockdown, network isolation rests on the NetworkPolicy; with the node's own
  // Localhost profile, the executor profile is no downgrade.
  auto session = DowngradeNames(SessionPodSpec());
  EXPECT_THAT(session, Contains("network isolation"));
  EXPECT_THAT(session, Not(Contains("restricted Pod Security Standard")));
  EXPECT_THAT(session, Not(Contains("seccomp (default profile)")));
  for (const Downgrade& d : PodDowngrades(SessionPodSpec())) {
    EXPECT_FALSE(d.reason.empty()) << d.measure;
    EXPECT_FALSE(d.fix.empty()) << d.measure;
  }
}

}  // namespace
}  // namespace ci::k8s
