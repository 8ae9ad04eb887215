#!/usr/bin/python3
"""Where the machine's CPU goes per isolated execution: `perf record -a -g` while 8 clients send
print(1) executions to a local daemon (bench_eval.py's configuration), each sample put in the
bucket of its process and of the kernel work it was in (its innermost known kernel function).

  tests/bench/profile_execution.py --bin build/code-interpreter [--requests 400] [--freq 499]

Prints ms of CPU per execution by process and by kind of work, and the machine's busy time
(/proc/stat) per execution for scale. Root (perf -a). tests/bench/README.md has the last table.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

from bench_eval import busy_seconds, start_daemon  # noqa: E402
from bench_table import throughput, wait_for_pool  # noqa: E402

# Innermost match wins: a fault taken inside fork is a fault, a mount namespace put by exit is
# namespace work.
KINDS = [
    ("page faults", ("exc_page_fault", "handle_mm_fault", "do_user_addr_fault",
                     "do_anonymous_page", "do_wp_page", "wp_page_copy")),
    ("namespaces", ("create_new_namespaces", "copy_net_ns", "setup_net", "cleanup_net",
                    "free_nsproxy", "put_ipc_ns", "create_user_ns", "free_ipc", "ops_exit",
                    "unshare_nsproxy", "switch_task_namespaces", "copy_namespaces")),
    ("mounts", ("path_mount", "do_mount", "__x64_sys_mount", "do_move_mount", "__x64_sys_pivot_root",
                "path_umount", "put_mnt_ns", "copy_mnt_ns", "namespace_unlock", "__x64_sys_umount",
                "cleanup_mnt", "mntput_no_expire", "do_new_mount", "vfs_get_tree")),
    ("cgroups", ("cgroup_mkdir", "cgroup_rmdir", "cgroup_attach", "cgroup_procs_write",
                 "css_", "cgroup_file_write", "cgroup_migrate", "cgroup_release",
                 "cgroup1_", "cgroup_kn_")),
    ("seccomp", ("seccomp_",)),
    ("fork", ("copy_process", "dup_mm", "copy_page_range", "kernel_clone", "__do_sys_clone")),
    ("exit", ("do_exit", "exit_mmap", "do_group_exit", "mmput", "release_task", "exit_notify")),
    ("exec", ("bprm_execve", "do_execveat", "load_elf_binary")),
]
PROCESSES = [("program (python forked by init)", ("python3",)),
             ("init", ("ci-init",)), ("shim", ("ci-shim",)),
             ("the zygote (forks each init)", ("exe",)),  # started as /proc/self/exe
             ("kernel workers", ("kworker", "ksoftirqd", "rcu_", "kcompactd", "migration"))]


def kind_of(frames):
    for name in frames:  # innermost first
        for kind, prefixes in KINDS:
            if name.startswith(prefixes):
                return kind
    if not frames or not any(f.startswith(("entry_SYSCALL", "do_syscall", "x64_sys_call"))
                             or f.startswith("__x64_sys") for f in frames):
        return "user code" if not frames else "other kernel (irq, scheduling)"
    return "other system calls"


def read_samples(data, daemon_pid):
    """[(process, kind)] of each sample in `data` (perf script's output)."""
    script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,ip,sym"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    out = []
    for block in script.split("\n\n"):
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        head = lines[0].split()
        comm, pid = " ".join(head[:-1]), head[-1].split("/")[0]
        kernel = []
        for line in lines[1:]:
            parts = line.split()
            if len(parts) >= 2 and not parts[1].startswith("[unknown]"):
                addr = int(parts[0], 16) if all(c in "0123456789abcdef" for c in parts[0]) else 0
                if addr >= 0xffff800000000000:
                    kernel.append(parts[1].split("+")[0])
        process = "other"
        if pid == str(daemon_pid):
            process = "daemon"
        elif pid == str(os.getpid()):
            process = "bench client"
        else:
            for name, prefixes in PROCESSES:
                if comm.startswith(prefixes):
                    process = name
                    break
        out.append((process, kind_of(kernel)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--freq", type=int, default=499)
    args, daemon = start_daemon(ap)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        try:
            wait_for_pool(daemon, timeout=120)
            throughput(daemon, 8, 40)  # the steady state, not the first requests
            perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(args.freq),
                                     "-o", data], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            busy = busy_seconds()
            rate, _, _, errors = throughput(daemon, 8, args.requests)
            busy = busy_seconds() - busy
            perf.send_signal(2)
            perf.wait()
            pid = daemon.proc.pid
        finally:
            daemon.stop()
            daemon.cleanup()
        samples = read_samples(data, pid)
    executions = args.requests + 40  # + 5 untimed per client
    per_sample = busy * 1000 / max(len(samples), 1) / executions  # ms of CPU per execution
    print(f"perf -F {args.freq}: {rate:.1f} executions/s, {errors} errors; machine busy {busy * 1000 / executions:.1f} "
          f"ms per execution; {len(samples)} samples\n")
    by_process = collections.Counter(p for p, _ in samples)
    by_kind = collections.Counter(k for _, k in samples)
    cells = collections.Counter(samples)
    kinds = [k for k, _ in by_kind.most_common()]
    print("| process | ms per execution | " + " | ".join(kinds) + " |")
    print("|---|---:|" + "---:|" * len(kinds))
    for process, n in by_process.most_common():
        row = " | ".join(f"{cells[(process, k)] * per_sample:.1f}" for k in kinds)
        print(f"| {process} | {n * per_sample:.1f} | {row} |")
    total = " | ".join(f"{by_kind[k] * per_sample:.1f}" for k in kinds)
    print(f"| all | {len(samples) * per_sample:.1f} | {total} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
