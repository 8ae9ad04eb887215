// The network namespace: only `lo`, brought up (shim child only).
#pragma once

#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

// A new network namespace starts with `lo` down; Python's socket tests, multiprocessing managers
// and local servers expect 127.0.0.1 to work. Needs CAP_NET_ADMIN in the namespace.
SysError BringUpLoopback();

}  // namespace ci::runtime
