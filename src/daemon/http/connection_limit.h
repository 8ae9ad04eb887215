// How many connections the HTTP server holds at once: derived from the process's descriptor
// limit, so a flood of connections cannot take the descriptors sandboxes and files need.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ci::daemon {

// Descriptors kept out of the connections' share: sandboxes (pipes, pidfds, sockets), the file
// store, backend connections and logs.
constexpr uint64_t kDescriptorsKeptBack = 256;
constexpr size_t kMaxDerivedConnections = 4096;

// Raises the soft RLIMIT_NOFILE to the hard limit (a default of 1024 is far below what a busy
// daemon needs); returns the soft limit in force afterwards.
uint64_t RaiseOpenFileLimit();

// MAX_CONNECTIONS when set (`configured` > 0), else half of what `open_files` leaves after
// kDescriptorsKeptBack, between 16 and kMaxDerivedConnections.
size_t ConnectionCap(uint32_t configured, uint64_t open_files);

}  // namespace ci::daemon
