#include "runtime/init/rootless.h"

#include <sys/resource.h>
#include <unistd.h>

#include <string>

namespace ci::runtime {
namespace {

class NoCgroup final : public Cgroup {
 public:
  SysError Create(const CgroupLimits&) override { return SysOk(); }
  SysError AddProcess(pid_t) override { return SysOk(); }
  CgroupStats ReadStats() const override { return {}; }
  SysError Remove() override { return SysOk(); }
  std::string description() const override { return "none (rlimits)"; }
};

// The directory must let us create an entry: the sandbox's parent when it exists (created by an
// earlier run or by the administrator for us), else the place the parent would be created in.
bool CanCreateUnder(const std::string& dir, const std::string& child) {
  const std::string parent = dir + "/" + child;
  if (::access(parent.c_str(), F_OK) == 0) return ::access(parent.c_str(), W_OK | X_OK) == 0;
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

}  // namespace

bool CgroupWritableByMe(const CgroupLayout& layout) {
  if (layout.version == 2) {
    // layout.root is the parent directory sandboxes' cgroups go into (SetUpCgroups prepared it).
    return ::access(layout.root.c_str(), W_OK | X_OK) == 0;
  }
  if (layout.version == 1) {
    for (const char* controller : {"memory", "pids"}) {
      if (!CanCreateUnder(layout.root + "/" + controller, kCgroupParent)) return false;
    }
    return true;
  }
  return false;
}

std::unique_ptr<Cgroup> MakeNoCgroup() { return std::make_unique<NoCgroup>(); }

SysError SetFallbackRlimits(const Plan& plan) {
  // RLIMIT_DATA, not RLIMIT_AS: Python, numpy/OpenBLAS and glibc's per-thread arenas reserve far
  // more address space than they ever touch, so an AS limit the size of the memory limit breaks
  // ordinary programs. Since Linux 4.7 RLIMIT_DATA counts private writable mappings (the heap and
  // anonymous mmap, where every large allocation lands), which is what a memory limit is about.
  // It counts reservations, not resident pages, so it is stricter than memory.max, and it is per
  // process: a program that forks N children may use N times the limit (the pids limit bounds N).
  // An allocation over it fails (ENOMEM -> MemoryError in Python, exit 1) instead of an OOM kill.
  const rlim_t data = static_cast<rlim_t>(plan.memory_bytes);
  struct rlimit data_limit = {data, data};
  if (::setrlimit(RLIMIT_DATA, &data_limit) != 0) return SysFail("setrlimit RLIMIT_DATA");
  // RLIMIT_NPROC is checked at fork/clone against the tasks (threads included, like pids.max) of
  // the caller's real uid. Since Linux 5.14 that count is kept per (user namespace, uid): the
  // sandbox's own namespace counts only its uid 65532, i.e. exactly this sandbox (init too with
  // the one-id map), which is what pids.max counts. Each ancestor namespace is checked too, against
  // the limit its creator had: the daemon's user as a whole stays bounded by the daemon's own
  // RLIMIT_NPROC. (Before 5.14 the count was per host uid: all sandboxes of the daemon's user, and
  // the daemon's own threads, would share it.)
  const rlim_t nproc = static_cast<rlim_t>(plan.pids);
  struct rlimit nproc_limit = {nproc, nproc};
  if (::setrlimit(RLIMIT_NPROC, &nproc_limit) != 0) return SysFail("setrlimit RLIMIT_NPROC");
  return SysOk();
}

}  // namespace ci::runtime
