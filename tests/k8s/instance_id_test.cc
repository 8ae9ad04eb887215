// The daemon's owner label (k8s_executor.h): in a cluster its pod's name, elsewhere host and pid,
// and which owners of this host are gone (the reaper's rule for a restarted daemon).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "k8s/k8s_executor.h"

namespace ci::k8s {
namespace {

TEST(InstanceId, InAClusterItIsThePodName) {
  K8sOptions o;
  o.owner = OwnerPod{"code-interpreter-7c9d-x2", "uid-1", "ns"};
  EXPECT_EQ(InstanceId(o), "code-interpreter-7c9d-x2");
}

TEST(InstanceId, ElsewhereHostAndPid) {
  EXPECT_EQ(InstanceId(K8sOptions()), HostInstancePrefix() + std::to_string(getpid()));
}

TEST(LabelValue, OnlyLabelCharactersAtMost63) {
  EXPECT_EQ(LabelValue("_build/host:1"), "build-host-1");
  EXPECT_EQ(LabelValue(std::string(100, 'a')).size(), 63u);
}

TEST(OwnerGoneHere, ADeadPidOfThisHostOnly) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // reaped: that pid is free now
  EXPECT_TRUE(OwnerGoneHere(HostInstancePrefix() + std::to_string(child)));
  EXPECT_FALSE(OwnerGoneHere(HostInstancePrefix() + std::to_string(getpid())));   // ourselves
  EXPECT_FALSE(OwnerGoneHere(HostInstancePrefix() + std::to_string(getppid())));  // alive
  EXPECT_FALSE(OwnerGoneHere("other-host-" + std::to_string(child)));  // not ours to judge
  EXPECT_FALSE(OwnerGoneHere(HostInstancePrefix() + "12ab"));
  EXPECT_FALSE(OwnerGoneHere("code-interpreter-7c9d-x2"));  // a pod name
}

}  // namespace
}  // namespace ci::k8s
