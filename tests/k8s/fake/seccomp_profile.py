"""securityContext.seccompProfile as the kubelet and containerd/runc apply it, for the fake's pods.

- `RuntimeDefault`: containerd's default profile (contrib/seccomp DefaultProfile, the same as
  moby's profiles/seccomp/default.json) for x86_64, written here as data: an allow-list with
  EPERM for everything else, and more syscalls for the capabilities the container keeps (none
  after `drop: [ALL]`). Without CAP_SYS_ADMIN, clone with a namespace flag is refused and
  clone3 is ENOSYS (so glibc falls back to clone).
- `Localhost`: `<seccomp root>/<localhostProfile>`, an OCI-format JSON profile (containerd
  unmarshals it into specs.LinuxSeccomp, so docker's `archMap`/`includes` are ignored); a file
  that is not there is the runtime's CreateContainerError.
- `Unconfined`, or no field (the kubelet's default without --seccomp-default): no filter.

A profile becomes classic BPF through libseccomp (Debian's python3-seccomp, which exists for
/usr/bin/python3 only, so `compile_bpf` runs this file there), with runc's reading of the
profile: unknown syscall names are skipped, rules whose action is the default one are dropped,
and conditions on a repeated argument index become separate rules (OR), the others one rule
(AND). `LOADER` then installs the BPF in the container right before the command's exec."""

import json
import os
import subprocess
import sys

# The Python that has python3-seccomp (Debian's). Inside a pod it is the host's too (/usr).
DEBIAN_PYTHON = "/usr/bin/python3"

EPERM, ENOSYS = 1, 38
_CLONE_NAMESPACES = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

# containerd's unconditional allow-list (its amd64 arch_prctl/modify_ldt and the kernel >= 4.8
# ptrace trio included); names this libseccomp does not know are skipped, as runc does.
_ALLOWED = """
accept accept4 access adjtimex alarm arch_prctl bind brk cachestat capget capset chdir chmod
chown chown32 clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime
clock_gettime64 clock_nanosleep clock_nanosleep_time64 close close_range connect copy_file_range
creat dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2
epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit exit_group faccessat faccessat2
fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod fchmodat fchmodat2 fchown fchown32
fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork fremovexattr fsetxattr fstat
fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64 futex futex_requeue
futex_time64 futex_wait futex_waitv futex_wake futimesat getcpu getcwd getdents getdents64
getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getitimer getpeername
getpgid getpgrp getpid getppid getpriority getrandom getresgid getresgid32 getresuid
getresuid32 getrlimit get_robust_list getrusage getsid getsockname getsockopt get_thread_area
gettid gettimeofday getuid getuid32 getxattr getxattrat inotify_add_watch inotify_init
inotify_init1 inotify_rm_watch io_cancel ioctl io_destroy io_getevents io_pgetevents
io_pgetevents_time64 ioprio_get ioprio_set io_setup io_submit ipc kill landlock_add_rule
landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat listen
listmount listxattr listxattrat llistxattr _llseek lremovexattr lseek lsetxattr
lsm_get_self_attr lsm_list_modules lsm_set_self_attr lstat lstat64 madvise map_shadow_stack
membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall
mmap mmap2 modify_ldt mprotect mq_getsetattr mq_notify mq_open mq_timedreceive
mq_timedreceive_time64 mq_timedsend mq_timedsend_time64 mq_unlink mremap mseal msgctl msgget
msgrcv msgsnd msync munlock munlockall munmap name_to_handle_at nanosleep newfstatat _newselect
open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2 pkey_alloc pkey_free
pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2 prlimit64 process_mrelease
process_vm_readv process_vm_writev pselect6 pselect6_time64 ptrace pwrite64 pwritev pwritev2
read readahead readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg
remap_file_pages removexattr removexattrat rename renameat renameat2 restart_syscall rmdir rseq
rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend
rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr
sched_getparam sched_get_priority_max sched_get_priority_min sched_getscheduler
sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity sched_setattr
sched_setparam sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid setfsgid32 setfsuid
setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority setregid
setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32 setrlimit
set_robust_list setsid setsockopt set_thread_area set_tid_address setuid setuid32 setxattr
setxattrat shmat shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4 sigprocmask
sigreturn socketcall socketpair splice stat stat64 statfs statfs64 statmount statx symlink
symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create timer_delete
timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64 timerfd_create
timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill truncate
truncate64 ugetrlimit umask uname unlink unlinkat uretprobe utime utimensat utimensat_time64
utimes vfork vmsplice wait4 waitid waitpid write writev
""".split()

# What each capability in the bounding set adds (containerd's switch over the capabilities).
_BY_CAPABILITY = {
    "DAC_READ_SEARCH": ["open_by_handle_at"],
    "SYS_ADMIN": ["bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen",
                  "fspick", "lookup_dcookie", "mount", "mount_setattr", "move_mount",
                  "open_tree", "perf_event_open", "quotactl", "quotactl_fd", "setdomainname",
                  "sethostname", "setns", "syslog", "umount", "umount2", "unshare"],
    "SYS_BOOT": ["reboot"],
    "SYS_CHROOT": ["chroot"],
    "SYS_MODULE": ["delete_module", "init_module", "finit_module"],
    "SYS_PACCT": ["acct"],
    "SYS_PTRACE": ["kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv",
                   "process_vm_writev", "ptrace"],
    "SYS_RAWIO": ["iopl", "ioperm"],
    "SYS_TIME": ["settimeofday", "stime", "clock_settime", "clock_settime64"],
    "SYS_TTY_CONFIG": ["vhangup"],
    "SYS_NICE": ["get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"],
    "SYSLOG": ["syslog"],
    "BPF": ["bpf"],
    "PERFMON": ["perf_event_open"],
}

_AF_ALG, _AF_VSOCK = 38, 40


def _rule(names, *args, action="SCMP_ACT_ALLOW", errno=None):
    rule = {"names": list(names), "action": action,
            "args": [{"index": i, "value": v, "valueTwo": v2, "op": op} for i, op, v, v2 in args]}
    if errno is not None:
        rule["errnoRet"] = errno
    return rule


def runtime_default(caps):
    """containerd's DefaultProfile for amd64, for a container whose bounding set is `caps`
    (names without CAP_). An OCI LinuxSeccomp dict."""
    rules = [_rule(_ALLOWED),
             # socket(2) for every family but AF_ALG and AF_VSOCK: three ranges, one condition
             # each (two != conditions on one index would be OR-ed by runc).
             _rule(["socket"], (0, "SCMP_CMP_LT", _AF_ALG, 0)),
             _rule(["socket"], (0, "SCMP_CMP_EQ", _AF_ALG + 1, 0)),
             _rule(["socket"], (0, "SCMP_CMP_GT", _AF_VSOCK, 0))]
    # personality(2) only for PER_LINUX, PER_LINUX32, UNAME26 variants and the query 0xffffffff.
    rules += [_rule(["personality"], (0, "SCMP_CMP_EQ", p, 0))
              for p in (0x0, 0x0008, 0x20000, 0x20008, 0xffffffff)]
    for cap in sorted(caps):
        if cap in _BY_CAPABILITY:
            rules.append(_rule(_BY_CAPABILITY[cap]))
    if "SYS_ADMIN" not in caps:
        rules.append(_rule(["clone"], (0, "SCMP_CMP_MASKED_EQ", _CLONE_NAMESPACES, 0)))
        rules.append(_rule(["clone3"], action="SCMP_ACT_ERRNO", errno=ENOSYS))
    return {"defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": rules}


class ProfileError(Exception):
    """The runtime could not load the profile (the container's CreateContainerError)."""


def profile_for(pod, container, caps, seccomp_root):
    """The profile the container runs under, or None for Unconfined; the container's
    securityContext.seccompProfile wins over the pod's."""
    sc = container.get("securityContext") or {}
    pod_sc = pod["spec"].get("securityContext") or {}
    field = sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}
    kind = field.get("type", "Unconfined")
    if kind == "RuntimeDefault":
        return runtime_default(caps)
    if kind != "Localhost":
        return None
    path = os.path.join(seccomp_root, field.get("localhostProfile") or "")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise ProfileError(f'cannot load seccomp profile "{path}": {e}') from None
    except ValueError as e:
        raise ProfileError(f'decoding seccomp profile failed "{path}": {e}') from None


_compiled = {}


def compile_bpf(profile):
    """The profile as classic BPF bytes (cached: the backend's pods all share one profile)."""
    key = json.dumps(profile, sort_keys=True)
    if key not in _compiled:
        done = subprocess.run([DEBIAN_PYTHON, "-I", os.path.abspath(__file__)], input=key.encode(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines() or ["failed"]
            raise ProfileError(f"seccomp profile: {lines[-1]}")
        _compiled[key] = done.stdout
    return _compiled[key]


# Runs in the pod, as `python3 -I -S -c LOADER FD COMMAND...`, right before the command: read the
# BPF from FD (a memfd of the fake's), set no_new_privs if asked ("nnp"; without it the caller
# must still hold CAP_SYS_ADMIN or already have no_new_privs), install the filter (prctl
# PR_SET_SECCOMP), close FD, exec. 126: the filter could not be installed. Python's own ignored
# SIGPIPE and SIGXFSZ go back to the default first: an exec keeps SIG_IGN, and a runtime's
# processes start with every disposition the default.
LOADER = r"""
import ctypes, os, signal, sys
for s in (signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(s, signal.SIG_DFL)
fd, nnp, argv = int(sys.argv[1]), sys.argv[2] == "nnp", sys.argv[3:]
code = os.pread(fd, os.fstat(fd).st_size, 0)
os.close(fd)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
prog = Prog(len(code) // 8, code)
libc = ctypes.CDLL(None, use_errno=True)
if nnp and libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
    sys.stderr.write("fake kubelet: seccomp: " + os.strerror(ctypes.get_errno()) + "\n")
    sys.exit(126)
try:
    os.execvp(argv[0], argv)
except OSError as e:
    sys.stderr.write("exec " + argv[0] + ": " + e.strerror + "\n")
    sys.exit(127 if e.errno == 2 else 126)
"""


def loader_args(fd, no_new_privs):
    return [DEBIAN_PYTHON, "-I", "-S", "-c", LOADER, str(fd), "nnp" if no_new_privs else "-"]


# -- the compiler, run under Debian's python3 (python3-seccomp) ----------------------------------

def _build(profile):
    import seccomp
    ops = {"SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT, "SCMP_CMP_LE": seccomp.LE,
           "SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_GE": seccomp.GE, "SCMP_CMP_GT": seccomp.GT,
           "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ}
    arches = {"SCMP_ARCH_X86": seccomp.Arch.X86, "SCMP_ARCH_X32": seccomp.Arch.X32}

    def action(name, errno, default_errno=EPERM):
        if name == "SCMP_ACT_ALLOW":
            return seccomp.ALLOW
        if name == "SCMP_ACT_ERRNO":
            return seccomp.ERRNO(default_errno if errno is None else errno)
        if name in ("SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD"):
            return seccomp.KILL
        if name == "SCMP_ACT_KILL_PROCESS":
            return seccomp.KILL_PROCESS
        if name == "SCMP_ACT_TRAP":
            return seccomp.TRAP
        if name == "SCMP_ACT_LOG":
            return seccomp.LOG
        if name == "SCMP_ACT_TRACE":
            return seccomp.TRACE(errno or 0)
        raise ValueError(f"unsupported seccomp action {name!r}")

    default_errno = profile.get("defaultErrnoRet")
    default = profile.get("defaultAction", "")
    f = seccomp.SyscallFilter(action(default, default_errno))
    for arch in profile.get("architectures") or []:
        if arch in arches:  # x86_64 is the filter's own; other machines' are not filtered here
            f.add_arch(arches[arch])
    for rule in profile.get("syscalls") or []:
        act_name, errno = rule.get("action", ""), rule.get("errnoRet")
        if act_name == default and (act_name != "SCMP_ACT_ERRNO" or
                                    (errno or EPERM) == (default_errno or EPERM)):
            continue  # what the default does anyway (libseccomp refuses such a rule)
        act = action(act_name, errno)
        conds = [seccomp.Arg(a["index"], ops[a["op"]], a.get("value", 0), a.get("valueTwo", 0))
                 for a in rule.get("args") or []]
        indices = [a["index"] for a in rule.get("args") or []]
        # runc: a repeated index makes each condition its own rule (OR); else one rule (AND).
        groups = [[c] for c in conds] if len(set(indices)) < len(indices) else [conds]
        for name in rule.get("names") or []:
            if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) == -1:
                continue  # unknown to this libseccomp: runc skips it too
            for group in groups:
                f.add_rule(act, name, *group)
    return f


if __name__ == "__main__":
    _build(json.load(sys.stdin)).export_bpf(sys.stdout)
