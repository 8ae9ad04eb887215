"""One container of a fake pod: a bubblewrap sandbox over a read-only "image" made of the
host's /usr, /etc, /opt and /var (without Docker's data), with the pod's emptyDir directories bind-mounted at the
container's mountPaths, its own pid/ipc/uts namespaces and hostname, running the container's
command as the container's uid. Exec enters those namespaces with nsenter, so every exec sees
the same mounts and processes as the container (a `kill -9 -1` reaches a session's shell).
The command and every exec run in the pod's cgroup (cgroups.py), joined before they exec
anything, and see it read-only at /sys/fs/cgroup; `medium: Memory` emptyDirs are tmpfs mounts.
Both also get the container's seccomp filter (seccomp_profile.py), installed after the fake's
own steps, where runc installs it, and (with the isolated pod network) the pod's own network
namespace, where only `lo` is up.

Needs root (bind mounts and setns); tests/k8s/README.md says what is not emulated."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

from . import seccomp_profile
from .cgroups import memory_bytes

IMAGE_DIRS = ("usr", "etc", "opt", "var")
EMPTY_DIRS = ("home", "root", "run", "mnt", "srv", "media")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Run by /bin/sh before bwrap or nsenter: write our own pid into each cgroup.procs given ($1 says
# how many), then exec the rest, so no process of the pod ever runs outside its cgroup (a fork
# bomb's first fork is already counted). 125: joining failed, nothing ran.
JOIN_CGROUP = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; '
               'n=$((n - 1)); shift; done; exec "$@"')


# Where the host mounts and unmounts while pods start (the Docker lane's containers run beside
# this suite): a recursive bind of /var would meet a mount going away while bwrap remounts it
# read-only ("Unable to apply mount flags"), so the image's /var is built around them.
VOLATILE_VAR = ("/var/lib/docker", "/var/lib/containerd", "/var/tmp")


def _image_var(path="/var"):
    """bwrap arguments for a read-only /var without VOLATILE_VAR: the parents of a left-out
    directory are made and their other entries bound one by one."""
    argv = ["--perms", "0755", "--dir", path]
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        if full in VOLATILE_VAR:
            argv += ["--perms", "1777" if full == "/var/tmp" else "0755", "--dir", full]
        elif os.path.islink(full):
            argv += ["--symlink", os.readlink(full), full]
        elif any(v.startswith(full + "/") for v in VOLATILE_VAR):
            argv += _image_var(full)
        else:
            argv += ["--ro-bind", full, full]
    return argv


class StartError(Exception):
    """The container could not be created; .reason is the kubelet's waiting/terminated reason."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


# What containerd and CRI-O grant a container unless told otherwise (containerd's
# oci.DefaultCapabilities); "drop"/"add" edit this set.
DEFAULT_CAPS = {"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
                "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL",
                "AUDIT_WRITE"}


def capabilities(spec):
    """The capability names (without CAP_) a container keeps, from securityContext.capabilities.
    They bound even a root container, so uid 0 in a fake pod is not the host's full root."""
    drop = set(spec.get("drop") or [])
    caps = set() if "ALL" in drop else DEFAULT_CAPS - drop
    return caps | set(spec.get("add") or [])


def identity(pod, container):
    """(uid, gid, supplementary groups) the container runs as; an unset runAsUser means the
    image's user, which for the fake's host "image" is root."""
    pod_sc = pod["spec"].get("securityContext") or {}
    sc = container.get("securityContext") or {}
    uid = sc.get("runAsUser", pod_sc.get("runAsUser", 0))
    gid = sc.get("runAsGroup", pod_sc.get("runAsGroup", 0))
    groups = list(pod_sc.get("supplementalGroups") or [])
    if "fsGroup" in pod_sc:
        groups.append(pod_sc["fsGroup"])
    return int(uid), int(gid), [int(g) for g in groups]


def hostname(pod):
    """spec.hostname if set, else the pod's name (the kubelet's GeneratePodHostNameAndDomain)."""
    return pod["spec"].get("hostname") or pod["metadata"]["name"][:63].rstrip("-.")


def environment(pod, container):
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": hostname(pod), "HOME": "/root"}
    uid = identity(pod, container)[0]
    if uid != 0:
        env["HOME"] = "/"
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = str(e["value"])
    return env


def _joined(cgroup, argv):
    files = cgroup.join_files()
    return ["/bin/sh", "-c", JOIN_CGROUP, "fake-kubelet-join", str(len(files)), *files, *argv]


def pod_volumes(pod, pod_dir, memory_limit):
    """{volume name: host directory}, made once per pod (idempotent: each container asks).
    A disk emptyDir is a 0777 directory; `medium: Memory` is a tmpfs of
    min(sizeLimit, the pod's memory limit) bytes, as the kubelet sizes it (SizeMemoryBackedVolumes);
    its pages are charged to the memory cgroup of the pod's process that writes them."""
    dirs = {}
    for v in pod["spec"].get("volumes") or []:
        if "emptyDir" not in v:
            kind = next((k for k in v if k != "name"), "?")
            raise StartError("ContainerCreating",
                             f'volume "{v["name"]}": the fake supports emptyDir only, '
                             f"not {kind}")
        path = os.path.join(pod_dir, "volumes", v["name"])
        os.makedirs(path, exist_ok=True)
        empty_dir = v["emptyDir"] or {}
        if empty_dir.get("medium") == "Memory" and not os.path.ismount(path):
            sizes = [s for s in (memory_limit, empty_dir.get("sizeLimit") and
                                 memory_bytes(empty_dir["sizeLimit"])) if s]
            options = "mode=0777" + (f",size={min(sizes)}" if sizes else "")
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path],
                                  stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise StartError("CreateContainerError", f'volume "{v["name"]}": mount tmpfs: '
                                                         f"{done.stderr.strip()}")
        os.chmod(path, 0o777)  # the kubelet creates emptyDir world-writable
        dirs[v["name"]] = path
    return dirs


def mounts_under(directory):
    """Mount points below directory, deepest first (from /proc/self/mountinfo)."""
    prefix = directory.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
                  for line in f]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def unmount_volumes(pod_dir):
    """Unmount the pod's tmpfs volumes (before its directory is removed: rmtree would only
    empty them). Lazily if something still holds one."""
    for point in mounts_under(pod_dir):
        if subprocess.run(["umount", point], stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["umount", "-l", point], stderr=subprocess.DEVNULL)


class Container:
    def __init__(self, pod, container, pod_dir, cgroup, seccomp_root="/var/lib/kubelet/seccomp",
                 isolated_network=True, image_files=None, image_links=None):
        self.pod = pod
        self.seccomp_root = seccomp_root  # the kubelet's seccomp directory
        self.seccomp_fd = None  # a memfd with the container's BPF filter
        self.confined = False  # under a seccomp profile (then never run without seccomp_fd)
        # Its own network namespace (what a deny-all NetworkPolicy leaves a pod: itself), or
        # the host's (False).
        self.isolated_network = isolated_network
        self.cgroup = cgroup  # cgroups.PodCgroup, already made with the pod's limits
        self.spec = container
        self.name = container["name"]
        self.pod_dir = pod_dir
        self.proc = None
        self.init_pid = None  # host pid of the container's command, its pid namespace's init
        # A pidfd of that init: signals go through it, never through a pid the kernel may have
        # given to another process since (pid_max is 32768 here and CI wraps it in minutes).
        self.init_fd = None
        self.init_lock = threading.Lock()  # kill() closes init_fd while request threads signal
        self.uid, self.gid, self.groups = identity(pod, container)
        self.env = environment(pod, container)
        self.mounts = []  # (mountPath, host dir, read-only)
        # The command's output goes to its log and to every attached client (attach()), from
        # the moment each attached: no history, as with containerd. Its stdin is a pipe only
        # with `stdin: true`; attached clients write to it, and with `stdinOnce: true` the first
        # attach's end closes it.
        self.image_files = image_files or {}  # image path -> host file, over the host's dirs
        self.image_links = image_links or {}  # image path -> symbolic link target
        self.stdin = None
        self.stdin_lock = threading.Lock()
        self.listeners = []
        self.listeners_lock = threading.Lock()
        self.output_done = threading.Event()

    # -- creation ---------------------------------------------------------------------------

    def _privilege_args(self):
        """setpriv arguments for the container's identity and securityContext."""
        sc = self.spec.get("securityContext") or {}
        args = ["setpriv", "--reuid", str(self.uid), "--regid", str(self.gid)]
        args += ["--groups", ",".join(map(str, self.groups))] if self.groups else \
            ["--clear-groups"]
        if sc.get("allowPrivilegeEscalation") is False:
            args.append("--no-new-privs")
        caps = sorted(capabilities(sc.get("capabilities") or {}))
        args += ["--inh-caps=-all", "--bounding-set=" + ",".join(
            ["-all"] + [f"+{c.lower()}" for c in caps])]
        return args + ["--"]

    def _env_args(self, workdir):
        # env's "--" goes before the assignments: after them it would be taken as the command.
        return ["env", "-i", "-C", workdir, "--"] + [f"{k}={v}" for k, v in self.env.items()]

    def _process_args(self, command):
        """What runs the command inside the container: the identity (setpriv), the environment
        and, under a seccomp profile, the filter's loader, in runc's order: with no_new_privs
        (allowPrivilegeEscalation: false) the filter comes last, after the uid and capability
        change; without it first, so the profile must allow that change (as with runc)."""
        workdir = self.spec.get("workingDir") or "/"
        identity = self._privilege_args() + self._env_args(workdir)
        if not self.confined:
            return identity + list(command)
        if self.seccomp_fd is None:  # killed meanwhile: fail closed, never run unfiltered
            raise ProcessLookupError("the container is gone")
        nnp = (self.spec.get("securityContext") or {}).get("allowPrivilegeEscalation") is False
        load = seccomp_profile.loader_args(self.seccomp_fd, nnp)
        return identity + load + list(command) if nnp else load + identity + list(command)

    def _load_seccomp(self):
        """The container's filter into a memfd that the command and every exec inherit.
        A profile the runtime cannot load is its CreateContainerError."""
        caps = capabilities((self.spec.get("securityContext") or {}).get("capabilities") or {})
        try:
            profile = seccomp_profile.profile_for(self.pod, self.spec, caps, self.seccomp_root)
            if profile is None:
                return
            code = seccomp_profile.compile_bpf(profile)
        except seccomp_profile.ProfileError as e:
            raise StartError("CreateContainerError",
                             f"failed to create containerd container: {e}") from None
        self.seccomp_fd = os.memfd_create("fake-kubelet-seccomp")
        os.write(self.seccomp_fd, code)
        self.confined = True

    def start(self):
        if self.uid == 0 and self._run_as_non_root():
            ns, name = self.pod["metadata"]["namespace"], self.pod["metadata"]["name"]
            raise StartError("CreateContainerConfigError",
                             "container has runAsNonRoot and image will run as root "
                             f'(pod: "{name}_{ns}({self.pod["metadata"]["uid"]})", '
                             f'container: {self.name})')
        self._load_seccomp()
        try:
            self._start()
        except StartError:
            self._close_seccomp()  # a container that never ran is not kept: nothing closes it
            raise

    def _start(self):
        volumes = pod_volumes(self.pod, self.pod_dir, self.cgroup.memory)
        # --as-pid-1: the container's command is its pid namespace's init, as in a real
        # container, so `kill -9 -1` from an exec spares it and SIGTERM reaches it only if it
        # handles the signal (why a plain `sleep` pod needs the whole grace period).
        # --unshare-cgroup: bwrap starts inside the pod's cgroup (_joined), so the container's
        # cgroup namespace is rooted there and /proc/self/cgroup says "/", as with containerd.
        argv = ["bwrap", "--die-with-parent", "--unshare-pid", "--as-pid-1", "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup", "--hostname", hostname(self.pod)]
        if self.isolated_network:
            argv.append("--unshare-net")  # bwrap brings up lo in it, nothing else
        for entry in sorted(os.listdir("/")):
            full = os.path.join("/", entry)
            if os.path.islink(full):
                argv += ["--symlink", os.readlink(full), full]
            elif entry == "var":
                argv += _image_var()
            elif entry in IMAGE_DIRS and os.path.isdir(full):
                argv += ["--ro-bind", full, full]
        for inside, host in sorted(self.image_files.items()):
            parents = inside.split("/")[1:-1]
            for i in range(len(parents)):  # readable for the uid (bwrap's default is 0700)
                argv += ["--perms", "0755", "--dir", "/" + "/".join(parents[:i + 1])]
            argv += ["--ro-bind", host, inside]
        for entry in EMPTY_DIRS:
            argv += ["--dir", "/" + entry]
        for inside, target in sorted(self.image_links.items()):
            parents = inside.split("/")[1:-1]
            for i in range(len(parents)):
                argv += ["--perms", "0755", "--dir", "/" + "/".join(parents[:i + 1])]
            argv += ["--symlink", target, inside]
        argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--dir", "/tmp"]
        argv += masked_proc_args()
        # --dir: bwrap would make the parents of a mount point 0700, unreadable for the uid.
        argv += ["--dir", "/sys", "--dir", "/sys/fs", "--dir", "/sys/fs/cgroup"]
        for host, inside in self.cgroup.container_view():
            argv += ["--ro-bind", host, inside]  # the pod's counters and limits, read-only
        for m in self.spec.get("volumeMounts") or []:
            host = volumes[m["name"]]
            if m.get("subPath"):
                host = os.path.join(host, m["subPath"])
                os.makedirs(host, exist_ok=True)
            ro = bool(m.get("readOnly"))
            argv += ["--ro-bind" if ro else "--bind", host, m["mountPath"]]
            self.mounts.append((m["mountPath"], host, ro))
        if (self.spec.get("securityContext") or {}).get("readOnlyRootFilesystem"):
            argv += ["--remount-ro", "/"]
        command = (self.spec.get("command") or []) + (self.spec.get("args") or [])
        if not self.spec.get("command") and not self.spec.get("args"):
            command = ["sleep", "infinity"]  # no image entrypoint to run: keep the pod alive
        if not self.resolve(command[0]):
            raise StartError("StartError", f'failed to create containerd task: exec: '
                             f'"{command[0]}": executable file not found in $PATH: unknown')
        info_r, info_w = os.pipe()
        argv += ["--info-fd", str(info_w)]
        process = self._process_args(command)
        argv += process
        pipe = subprocess.PIPE
        self.proc = subprocess.Popen(_joined(self.cgroup, argv),
                                     stdin=pipe if self.spec.get("stdin") else subprocess.DEVNULL,
                                     stdout=pipe, stderr=pipe, pass_fds=self._fds(info_w),
                                     start_new_session=True)
        self.stdin = self.proc.stdin
        pumps = self._start_output_pumps()
        os.close(info_w)
        with os.fdopen(info_r) as info:
            text = info.read()
        if not text:
            self.proc.wait()
            for t in pumps:
                t.join()
            with open(os.path.join(self.pod_dir, f"{self.name}.log"), "rb") as f:
                tail = f.read()[-500:].decode(errors="replace").strip()
            raise StartError("CreateContainerError", f"failed to create the container: {tail}")
        self.init_pid = json.loads(text)["child-pid"]
        self.init_fd = _pidfd_of_child(self.init_pid, self.proc.pid)
        self._await_command(process[:len(process) - len(command)])

    def _await_command(self, wrappers):
        """Until the pod's init is the command itself, as with runc, whose init execs the
        command before the container counts as running. bwrap reports the pid before the
        sandbox's mounts are made, and then execs the wrappers in turn (setpriv, env, the
        seccomp loader); an exec before the last of them would not see the pod's files, or
        would read the loader in /proc/1/cmdline. Each wrapper runs with a tail of `process`
        as its argv, which no command has."""
        bwrap = os.path.realpath(shutil.which("bwrap"))
        wrapper_argvs = {"\0".join(wrappers[i:]) for i in range(len(wrappers))}
        while self.proc.poll() is None:
            try:
                with open(f"/proc/{self.init_pid}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace")
            except OSError:
                return  # the command is gone already
            # Empty in the middle of an execve (the new program's arguments not yet in place).
            if argv and self._exe() != bwrap and \
                    not any(argv.startswith(w + "\0") for w in wrapper_argvs):
                return
            time.sleep(0.002)

    def _start_output_pumps(self):
        """Threads copying stdout and stderr to the log and the attached clients, as read;
        output_done once both ended (the command and whatever inherited them are gone)."""
        log = open(os.path.join(self.pod_dir, f"{self.name}.log"), "ab")
        lock = threading.Lock()
        left = [2]

        def pump(channel, pipe):
            while data := os.read(pipe.fileno(), 65536):
                with lock:
                    log.write(data)
                    log.flush()
                with self.listeners_lock:
                    listeners = list(self.listeners)
                for listener in listeners:
                    listener(channel, data)
            pipe.close()
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    log.close()
                    self.output_done.set()

        pumps = [threading.Thread(target=pump, args=(1, self.proc.stdout), daemon=True),
                 threading.Thread(target=pump, args=(2, self.proc.stderr), daemon=True)]
        for t in pumps:
            t.start()
        return pumps

    # -- attach -----------------------------------------------------------------------------

    def attach(self, listener):
        """listener(channel, bytes) gets the command's output from now on; False when it has
        ended already."""
        with self.listeners_lock:
            if self.output_done.is_set():
                return False
            self.listeners.append(listener)
            return True

    def detach(self, listener):
        with self.listeners_lock:
            if listener in self.listeners:
                self.listeners.remove(listener)

    def write_stdin(self, data):
        """To the command's stdin; nothing without `stdin: true` (containerd drops it too)."""
        with self.stdin_lock:
            if self.stdin is None:
                return
            try:
                self.stdin.write(data)
                self.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the command stopped reading

    def close_stdin(self):
        with self.stdin_lock:
            if self.stdin is not None:
                try:
                    self.stdin.close()
                except OSError:
                    pass
                self.stdin = None

    def _fds(self, *fds):
        return fds + ((self.seccomp_fd,) if self.seccomp_fd is not None else ())

    def _exe(self):
        try:
            return os.readlink(f"/proc/{self.init_pid}/exe")
        except OSError:
            return None

    def _run_as_non_root(self):
        pod_sc = self.pod["spec"].get("securityContext") or {}
        sc = self.spec.get("securityContext") or {}
        return sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True

    # -- running ----------------------------------------------------------------------------

    def resolve(self, program):
        """Whether `program` exists as an executable in the container's view of the files
        (checked before exec, so a missing binary is the runtime's error, not exit code 127)."""
        candidates = [program] if "/" in program else \
            [os.path.join(d, program) for d in self.env.get("PATH", DEFAULT_PATH).split(":")]
        return any(os.access(self._host_path(c), os.X_OK) and
                   not os.path.isdir(self._host_path(c)) for c in candidates)

    def _host_path(self, path):
        if path in self.image_files:
            return self.image_files[path]
        for mount_path, host, _ in sorted(self.mounts, key=lambda m: -len(m[0])):
            if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
                return host + path[len(mount_path.rstrip("/")):]
        top = path.lstrip("/").split("/", 1)[0]
        return path if top in IMAGE_DIRS or os.path.islink("/" + top) else "/nonexistent"

    def exec(self, command, stdin, stdout, stderr):
        """Start `command` inside the running container; a Popen whose pid is nsenter's.
        ProcessLookupError when the init is gone (its pid may be another process's by now)."""
        self._signal_init(0)
        argv = ["nsenter", "-t", str(self.init_pid), "--mount", "--pid", "--ipc", "--uts",
                "--cgroup"] + (["--net"] if self.isolated_network else []) + ["--"]
        # runc makes every exec'd process the leader of a session of its own.
        argv += self._process_args(["/usr/bin/setsid"] + list(command))
        pipe = subprocess.PIPE
        return subprocess.Popen(_joined(self.cgroup, argv),
                                stdin=pipe if stdin else subprocess.DEVNULL,
                                stdout=pipe if stdout else subprocess.DEVNULL,
                                stderr=pipe if stderr else subprocess.DEVNULL,
                                pass_fds=self._fds(), start_new_session=True)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, size=300):
        """The end of what the command wrote (its log), for the server's own log."""
        try:
            with open(os.path.join(self.pod_dir, f"{self.name}.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - size))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def _signal_init(self, sig):
        with self.init_lock:
            if self.init_fd is None:
                raise ProcessLookupError(f"container {self.name} has no running command")
            signal.pidfd_send_signal(self.init_fd, sig)

    def signal_main(self, sig):
        """Signal the container's command (the namespace's init)."""
        try:
            self._signal_init(sig)
        except OSError:
            pass

    def kill(self):
        """SIGKILL the container's command, the namespace's init: the kernel then kills every
        process in the pod's pid namespace, execs included."""
        self.signal_main(signal.SIGKILL)
        if self.proc:
            self.proc.wait()
        with self.init_lock:
            if self.init_fd is not None:
                os.close(self.init_fd)
                self.init_fd = None
        self._close_seccomp()

    def _close_seccomp(self):
        if self.seccomp_fd is not None:
            os.close(self.seccomp_fd)
            self.seccomp_fd = None


# What containerd hides in every container's /proc (its default spec's MaskedPaths; runc binds
# /dev/null over a file and an empty read-only tmpfs over a directory).
MASKED_PROC_FILES = ("kcore", "keys", "latency_stats", "timer_list", "timer_stats",
                     "sched_debug")
MASKED_PROC_DIRS = ("acpi", "asound", "scsi")


def masked_proc_args():
    """bwrap arguments masking MASKED_PROC_* (those this kernel has) after --proc /proc."""
    argv = []
    for name in MASKED_PROC_FILES:
        if os.path.exists("/proc/" + name):
            argv += ["--dev-bind", "/dev/null", "/proc/" + name]  # nodev would make it EACCES
    for name in MASKED_PROC_DIRS:
        if os.path.isdir("/proc/" + name):
            argv += ["--tmpfs", "/proc/" + name, "--remount-ro", "/proc/" + name]
    return argv


def _pidfd_of_child(pid, parent):
    """A pidfd of `pid` if it is still `parent`'s child (bwrap's init, reported on its info fd),
    else None: it died at once and its pid may be another process's."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            ppid = re.search(r"^PPid:\s*(\d+)$", f.read(), re.M)
    except OSError:
        ppid = None
    if not ppid or int(ppid.group(1)) != parent:
        os.close(fd)
        return None
    return fd


def kill_exec(proc):
    """Kill an exec: nsenter's child (the command, inside the pod) and nsenter itself."""
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            for pid in f.read().split():
                os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass
