// The seccomp stage (shim child only): the last stage before init accepts a payload.
#pragma once

#include "runtime/plan.h"
#include "runtime/sys_error.h"

namespace ci {

// Loads the plan's OCI seccomp profile with libseccomp. An empty profile loads no filter.
// Not implemented yet (the next issue fills it): a non-empty profile is refused rather than
// silently ignored, so nobody believes a filter is active when it is not.
SysError LoadSeccomp(const Plan& plan);

}  // namespace ci
