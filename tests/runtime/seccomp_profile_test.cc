// The profile compiler: every embedded profile compiles, and bad input gives errors that name
// the problem. No sandbox needed.
#include "runtime/daemon/seccomp_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <set>

#include "core/policies.h"
#include "policy_readme.h"

namespace ci::runtime {
namespace {

using ::testing::HasSubstr;
using testing_support::DeniedInReadme;

Result<std::string> Compile(std::string_view json, std::vector<std::string>* skipped = nullptr) {
  std::vector<std::string> ignored;
  return CompileSeccompProfile(json, false, skipped ? skipped : &ignored);
}

std::string ErrorOf(std::string_view json) {
  auto r = Compile(json);
  EXPECT_FALSE(r.ok()) << json;
  return r.status().message();
}

TEST(SeccompProfile, EveryEmbeddedProfileCompiles) {
  for (const char* name : {"seccomp-executor", "seccomp-executor-strict", "seccomp-dockerd"}) {
    SCOPED_TRACE(name);
    auto text = EmbeddedPolicy(name);
    ASSERT_TRUE(text);
    EXPECT_EQ(*text, testing_support::ReadPolicyFile(std::string(name) + ".json"));
    for (bool log_denied : {false, true}) {
      std::vector<std::string> skipped;
      auto bpf = CompileSeccompProfile(*text, log_denied, &skipped);
      ASSERT_TRUE(bpf.ok()) << bpf.status().message();
      EXPECT_GT(bpf->size(), 8u);
      EXPECT_EQ(bpf->size() % 8, 0u);
    }
  }
  EXPECT_FALSE(EmbeddedPolicy("seccomp-nonexistent"));
}

TEST(SeccompProfile, UnknownNamesAreSkippedAndReported) {
  std::vector<std::string> skipped;
  auto bpf = Compile(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
      {"names":["read","no_such_syscall_b","write","no_such_syscall_a","no_such_syscall_a"],
       "action":"SCMP_ACT_ALLOW"}]})",
                     &skipped);
  ASSERT_TRUE(bpf.ok()) << bpf.status().message();
  EXPECT_EQ(skipped, (std::vector<std::string>{"no_such_syscall_a", "no_such_syscall_b"}));
}

TEST(SeccompProfile, ArgumentConditionsParse) {
  auto bpf = Compile(R"({"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":1,"syscalls":[
      {"names":["clone"],"action":"SCMP_ACT_ALLOW",
       "args":[{"index":0,"value":2114060288,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]},
      {"names":["socket"],"action":"SCMP_ACT_ALLOW",
       "args":[{"index":0,"value":2,"op":"SCMP_CMP_EQ"},{"index":1,"value":15,"valueTwo":1,
                "op":"SCMP_CMP_MASKED_EQ"}]},
      {"names":["personality"],"action":"SCMP_ACT_ALLOW",
       "args":[{"index":0,"value":0,"op":"SCMP_CMP_EQ"},{"index":0,"value":8,"op":"SCMP_CMP_EQ"}]},
      {"names":["getpriority"],"action":"SCMP_ACT_ERRNO","errnoRet":38,
       "args":[{"index":0,"value":1,"op":"SCMP_CMP_GT"},{"index":1,"value":5,"op":"SCMP_CMP_LE"}]},
      {"names":["kill"],"action":"SCMP_ACT_ALLOW",
       "args":[{"index":1,"value":9,"op":"SCMP_CMP_NE"}]}]})");
  EXPECT_TRUE(bpf.ok()) << bpf.status().message();
}

TEST(SeccompProfile, ErrorsNameTheProblem) {
  EXPECT_THAT(ErrorOf("{\"defaultAction\": "), HasSubstr("invalid JSON at offset"));
  EXPECT_THAT(ErrorOf("[]"), HasSubstr("expected a JSON object"));
  EXPECT_THAT(ErrorOf("{}"), HasSubstr("defaultAction"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_BOGUS"})"), HasSubstr("SCMP_ACT_BOGUS"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
                  {"names":["read"],"action":"SCMP_ACT_NOTIFY"}]})"),
              HasSubstr("SCMP_ACT_NOTIFY"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_VAX"]})"),
              HasSubstr("SCMP_ARCH_VAX"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],
                  "action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_XX"}]}]})"),
              HasSubstr("SCMP_CMP_XX"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],
                  "action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]})"),
              HasSubstr("index 0..5"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"]}]})"),
              HasSubstr("the rule for read has no action"));
  EXPECT_THAT(ErrorOf(R"({"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":99999})"),
              HasSubstr("defaultErrnoRet"));
}

// Docker's default.json grants mount & co. to containers holding CAP_SYS_ADMIN; our sandboxes hold
// none, so such a rule must change nothing.
TEST(SeccompProfile, CapabilityConditionalRulesNeverApply) {
  auto plain = Compile(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
      {"names":["read"],"action":"SCMP_ACT_ALLOW"}]})");
  auto with_caps = Compile(R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
      {"names":["read"],"action":"SCMP_ACT_ALLOW"},
      {"names":["mount"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_ADMIN"]}},
      {"names":["s390_runtime_instr"],"action":"SCMP_ACT_ALLOW","includes":{"arches":["s390x"]}}]})");
  ASSERT_TRUE(plain.ok() && with_caps.ok());
  EXPECT_EQ(*plain, *with_caps);
}

TEST(SeccompProfile, LogDeniedChangesTheProgram) {
  auto text = EmbeddedPolicy("seccomp-executor");
  std::vector<std::string> skipped;
  auto enforcing = CompileSeccompProfile(*text, false, &skipped);
  auto logging = CompileSeccompProfile(*text, true, &skipped);
  ASSERT_TRUE(enforcing.ok() && logging.ok());
  EXPECT_NE(*enforcing, *logging);
}

std::set<std::string> AllowedNames(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  std::set<std::string> out;
  for (const auto& rule : d["syscalls"].GetArray()) {
    if (std::string(rule["action"].GetString()) != "SCMP_ACT_ALLOW") continue;
    for (const auto& n : rule["names"].GetArray()) out.insert(n.GetString());
  }
  return out;
}

// The README's denied table and the profile agree (the runtime test then proves it in a sandbox).
TEST(SeccompProfile, ReadmeDeniedNamesAreNotAllowed) {
  const auto denied = DeniedInReadme("seccomp-executor");
  ASSERT_GT(denied.size(), 40u) << "the README's denied table was not found";
  const auto executor = AllowedNames(std::string(*EmbeddedPolicy("seccomp-executor")));
  const auto strict = AllowedNames(std::string(*EmbeddedPolicy("seccomp-executor-strict")));
  for (const auto& name : denied) {
    EXPECT_EQ(executor.count(name), 0u) << name << " is in the README's denied list";
    EXPECT_EQ(strict.count(name), 0u) << name << " is in the README's denied list";
  }
  for (const auto& name : strict) {
    EXPECT_EQ(executor.count(name), 1u) << "strict allows " << name << " but executor does not";
  }
}

}  // namespace
}  // namespace ci::runtime
