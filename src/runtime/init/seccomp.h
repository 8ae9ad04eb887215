// The seccomp stage (shim child only): the last stage before init accepts a payload.
#pragma once

#include "runtime/kernel/sys_error.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

// Installs the plan's BPF program (compiled by the daemon, seccomp_profile.h). An empty program
// installs no filter. Needs no_new_privs (or CAP_SYS_ADMIN, which init no longer holds), so the
// stage runs after no_new_privs. No allocation and no libseccomp here: only the kernel call.
SysError LoadSeccomp(const Plan& plan);

}  // namespace ci::runtime
