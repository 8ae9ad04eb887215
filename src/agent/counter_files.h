// The sandbox's cgroup counters read by the agent itself (kReadCounters), where an exec of a shell
// cost a fork, an exec and a round trip per read (twice per session call, once per execution of a
// recycled pod). The text is the in-container probe's (container/cgroup_probe.h): an "@name" line
// per file, then the file's lines.
#pragma once

#include <cstdint>
#include <string>

namespace ci::agent {

// The counter files the probe scripts print (cgroup_probe.cc), relative to /sys/fs/cgroup: v2's,
// then v1's controller directories.
inline constexpr const char* kCounterFiles[] = {"memory.events",
                                                "pids.events",
                                                "memory.peak",
                                                "cpu.stat",
                                                "memory/memory.oom_control",
                                                "memory/memory.max_usage_in_bytes",
                                                "pids/pids.events",
                                                "cpuacct/cpuacct.usage"};

// The counter files under `root` that can be read, then what `extras` (agent_wire.h
// CounterExtras) asks for; `proc` is where the processes are listed.
std::string ReadCounterFiles(uint8_t extras, const std::string& root = "/sys/fs/cgroup",
                             const std::string& proc = "/proc");

}  // namespace ci::agent
