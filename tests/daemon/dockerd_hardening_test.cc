// The hardening given to the nested dockerd's process, applied for real in a forked child: the
// capabilities of policies/dockerd-capabilities.json are gone from every set, the seccomp filter
// of policies/seccomp-dockerd.json is on, and what it denies is refused by the filter (not by a
// missing capability), while what a container engine needs still works.
#include "daemon/bootstrap/dockerd_hardening.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace ci::daemon {
namespace {

TEST(DockerdHardeningTest, ThePoliciesCompile) {
  auto h = PrepareDockerdHardening();
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_FALSE(h->seccomp_bpf.empty());
  EXPECT_GE(h->dropped.size(), 10u);
  for (int cap : {CAP_SYS_MODULE, CAP_SYS_BOOT, CAP_SYS_TIME, CAP_SYS_RAWIO}) {
    EXPECT_TRUE((h->drop_mask >> cap) & 1) << cap;
  }
  for (int cap : {CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SETUID, CAP_CHOWN, CAP_KILL}) {
    EXPECT_FALSE((h->drop_mask >> cap) & 1) << "dockerd needs capability " << cap;
  }
}

// Exit codes of the child: 0 all as expected, else the number of the check that failed.
int HardenedChild(const DockerdHardening& h) {
  const char* step = "";
  if (ApplyDockerdHardening(h, &step) != 0) return 10;
  auto self = ReadProcessSecurity(::getpid());
  if (!self.ok() || self->seccomp_mode != 2) return 11;
  if ((self->cap_bounding & h.drop_mask) != 0 || (self->cap_effective & h.drop_mask) != 0)
    return 12;
  if (self->no_new_privs) return 13;  // runc must still be able to change AppArmor profiles
  // An invalid clock: the kernel would say EINVAL, so EPERM can only be the filter.
  timespec ts{0, 0};
  if (::syscall(SYS_clock_settime, 12345, &ts) != -1 || errno != EPERM) return 14;
  if (::syscall(SYS_init_module, nullptr, 0, "") != -1 || errno != EPERM) return 15;
  // What an engine needs: namespaces (unshare of a mount namespace), capabilities kept.
  if (::unshare(CLONE_NEWNS) != 0) return 16;
  if (::prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN) != 1) return 17;
  return 0;
}

TEST(DockerdHardeningTest, AChildGetsExactlyWhatThePoliciesSay) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the nested dockerd runs as root)";
  auto h = PrepareDockerdHardening();
  ASSERT_TRUE(h.ok());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(HardenedChild(*h));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "check number " << WEXITSTATUS(status) << " failed";
}

}  // namespace
}  // namespace ci::daemon
