// OCI/Docker seccomp JSON -> a classic BPF program, compiled once in the daemon with libseccomp.
// The shim only installs the bytes (seccomp.h), so no sandbox pays for parsing or compiling.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::runtime {

// Compiles `json` (defaultAction, defaultErrnoRet, architectures/archMap, syscalls[] with names,
// action, errnoRet, args) for this machine's architecture and returns the BPF program (an array
// of struct sock_filter). Rules with `includes` or `excludes` are judged for a sandbox holding no
// capabilities: `includes.caps` rules never apply, `excludes.caps` rules always do; `arches` is
// matched against the native architecture; `minKernel` is ignored.
// A syscall name this libseccomp does not know is skipped and appended to `skipped_names`.
// `log_denied`: every non-ALLOW action becomes SCMP_ACT_LOG, i.e. allowed and audited, to debug
// a profile without switching filtering off.
Result<std::string> CompileSeccompProfile(std::string_view json, bool log_denied,
                                          std::vector<std::string>* skipped_names);

}  // namespace ci::runtime
