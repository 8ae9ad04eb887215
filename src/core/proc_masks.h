// What of /proc a sandbox may not read or change, for every backend: the local runtime mounts it
// (src/runtime/init/mounts.cc), the Docker backend hands it to runc as MaskedPaths/ReadonlyPaths.
#pragma once

namespace ci {

// Under /proc, read-only: readable, never changed (the sandbox's own sysctls included).
inline constexpr const char* kReadOnlyProcDirs[] = {"sys", "irq", "bus", "fs"};

// Under /proc, each read as empty (/dev/null bound over it): host facts no program needs, namely
// kernel memory and symbols, the kernel's build configuration, the boot id (the same host across
// sandboxes), every process's timers and scheduler state, keys, and sysrq.
inline constexpr const char* kMaskedProcFiles[] = {
    "kcore",       "kallsyms",      "config.gz",     "modules",
    "vmallocinfo", "kpagecount",    "kpageflags",    "kpagecgroup",
    "keys",        "key-users",     "timer_list",    "timer_stats",
    "sched_debug", "latency_stats", "sysrq-trigger", "sys/kernel/random/boot_id"};

// Under /proc, empty directories instead: the host's hardware listings.
inline constexpr const char* kEmptyProcDirs[] = {"acpi", "asound", "scsi"};

}  // namespace ci
