// SysError: the result of one step of sandbox setup. Keeps errno apart from the description so the
// child can report {stage, errno, message} to the daemon structurally. Exception-free on purpose:
// the shim is compiled with -fno-exceptions.
#pragma once

#include <cerrno>
#include <string>
#include <utility>

namespace ci::runtime {

struct SysError {
  int err = 0;       // errno of the failed call, 0 when the failure is not a system call's
  std::string what;  // what was being done: "bind /usr onto /usr"

  bool ok() const { return err == 0 && what.empty(); }
};

inline SysError SysOk() { return {}; }
// Reads errno before anything else can clobber it.
inline SysError SysFail(const char* what) { return {errno, what}; }
inline SysError SysFailErr(int err, std::string what) { return {err, std::move(what)}; }

#define CI_SYS_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::ci::runtime::SysError ci_sys_err_ = expr; \
    if (!ci_sys_err_.ok()) return ci_sys_err_;  \
  } while (0)

}  // namespace ci::runtime
