"""The fake kubelet's pod cgroups: memory, pids and cpu limits, as a kubelet with containerd
sets them, so a fork bomb or a memory bomb in a fake pod stops at the pod's limits instead of
reaching the machine running the tests.

Layout (one "instance" directory per fake server, so a sweep after a crash finds its own only):
  cgroup v1: <controller mount>/<the fake's own cgroup>/fake-kubelet/<instance>/<pod uid>, one
             per controller (memory, pids, cpu, cpuacct; cpu and cpuacct may share a mount);
  cgroup v2: /sys/fs/cgroup/fake-kubelet/<instance>/<pod uid> (under the root: a non-root v2
             cgroup that holds processes cannot enable controllers for its children).
v1 nests under the fake's own cgroup so whatever bounds the test run also bounds its pods."""

import os
import re
import signal
import time

V2_ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
CFS_PERIOD_US = 100000  # the kubelet's default cpuCFSQuotaPeriod (100 ms)
MIN_CFS_QUOTA_US = 1000  # the kubelet's floor for a tiny cpu limit

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_SUFFIXES = {"": 1, "n": 10 ** -9, "u": 10 ** -6, "m": 10 ** -3, "k": 10 ** 3, "M": 10 ** 6,
             "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18, "Ki": 2 ** 10,
             "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}


def quantity(text):
    """A Kubernetes resource.Quantity ("256Mi", "1.5Gi", "500m", "1e3", 1536) as a float."""
    m = _QUANTITY.match(str(text).strip())
    if not m:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    number, suffix = m.groups()
    if suffix[:1] in ("e", "E"):
        return float(number) * 10 ** int(suffix[1:])
    if suffix not in _SUFFIXES:
        raise ValueError(f"unknown quantity suffix in {text!r}")
    return float(number) * _SUFFIXES[suffix]


def memory_bytes(text):
    """Memory is whole bytes, rounded up as Quantity.Value() does."""
    value = quantity(text)
    return int(value) if value == int(value) else int(value) + 1


def milli_cpu(text):
    value = quantity(text) * 1000
    return int(value) if value == int(value) else int(value) + 1


def pod_limits(pod):
    """(memory bytes or None, milli-cpu or None): a limit counts for the pod only when every
    container declares it, as the kubelet's pod-level cgroup (ResourceConfigForPod) does; the
    pod's limit is then the containers' sum. Init containers are not run by the fake."""
    containers = pod["spec"]["containers"]
    limits = [(c.get("resources") or {}).get("limits") or {} for c in containers]
    memory = cpu = None
    if all("memory" in lim for lim in limits):
        memory = sum(memory_bytes(lim["memory"]) for lim in limits)
    if all("cpu" in lim for lim in limits):
        cpu = sum(milli_cpu(lim["cpu"]) for lim in limits)
    return memory, cpu


def is_v2():
    return os.path.exists(os.path.join(V2_ROOT, "cgroup.controllers"))


def _v1_mounts():
    """{controller: (mount point, root of the mount)} from /proc/self/mountinfo."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if not rfields or rfields[0] != "cgroup":
                continue
            for c in rfields[-1].split(","):
                if c in V1_CONTROLLERS:
                    out.setdefault(c, (fields[4], fields[3]))
    return out


def _own_v1_paths():
    """{controller: the fake's own cgroup path} from /proc/self/cgroup."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(","):
                out[c] = path
    return out


def instance_dirs(instance):
    """{controller (or "unified"): the directory holding this fake server's pod cgroups}."""
    if is_v2():
        return {"unified": os.path.join(V2_ROOT, "fake-kubelet", instance)}
    mounts, own = _v1_mounts(), _own_v1_paths()
    missing = [c for c in V1_CONTROLLERS if c not in mounts]
    if missing:
        raise OSError(f"no cgroup v1 mount for {', '.join(missing)} (and no cgroup v2)")
    out = {}
    for c in V1_CONTROLLERS:
        mount_point, root = mounts[c]
        path = own.get(c, "/")
        if root != "/" and path.startswith(root):
            path = path[len(root):]
        out[c] = os.path.normpath(f"{mount_point}/{path}/fake-kubelet/{instance}")
    return out


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _mkdir(path):
    """os.makedirs that survives another fake removing the shared fake-kubelet parent at the
    same moment (each server removes it when it finds it empty)."""
    for _ in range(5):
        try:
            os.makedirs(path, exist_ok=True)
            return
        except FileNotFoundError:
            continue
    os.makedirs(path, exist_ok=True)


def _enable_v2_controllers(path):
    """Enable memory, pids and cpu for path's children, from the root down to path (one write
    per controller: a write naming a controller the kernel lacks fails as a whole)."""
    current = V2_ROOT
    for part in [None] + os.path.relpath(path, V2_ROOT).split(os.sep):
        current = os.path.join(current, part) if part else current
        for controller in ("memory", "pids", "cpu"):
            _write(os.path.join(current, "cgroup.subtree_control"), "+" + controller)


class PodCgroup:
    """One pod's cgroup: created with its limits before any container starts, joined by the
    container's command and every exec (join_files), removed once the pod is gone."""

    def __init__(self, dirs_by_controller, uid, memory, milli_cpu_limit, pids):
        self.v2 = "unified" in dirs_by_controller
        self.dirs = {c: os.path.join(d, uid) for c, d in dirs_by_controller.items()}
        self.memory, self.cpu, self.pids = memory, milli_cpu_limit, pids

    def create(self):
        if self.v2:
            parent = os.path.dirname(self.dirs["unified"])
            _mkdir(parent)
            _enable_v2_controllers(parent)
        for d in self.unique_dirs():
            _mkdir(d)
        self._apply_limits()
        self.oom_kills_at_start = self.oom_kills()

    def _apply_limits(self):
        pids = "max" if self.pids is None or self.pids < 0 else str(self.pids)
        quota = None
        if self.cpu is not None:
            quota = max(self.cpu * CFS_PERIOD_US // 1000, MIN_CFS_QUOTA_US)
        if self.v2:
            d = self.dirs["unified"]
            if self.memory is not None:
                _write(os.path.join(d, "memory.max"), self.memory)
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    _write(os.path.join(d, "memory.swap.max"), 0)  # swap is no way out
            _write(os.path.join(d, "pids.max"), pids)
            if quota is not None:
                _write(os.path.join(d, "cpu.max"), f"{quota} {CFS_PERIOD_US}")
            return
        mem = self.dirs["memory"]
        if self.memory is not None:
            _write(os.path.join(mem, "memory.limit_in_bytes"), self.memory)
            memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):  # swap accounting on: cap memory+swap at the same value
                _write(memsw, self.memory)
        _write(os.path.join(self.dirs["pids"], "pids.max"), pids)
        if quota is not None:
            _write(os.path.join(self.dirs["cpu"], "cpu.cfs_period_us"), CFS_PERIOD_US)
            _write(os.path.join(self.dirs["cpu"], "cpu.cfs_quota_us"), quota)

    def unique_dirs(self):
        return sorted(set(self.dirs.values()))

    def join_files(self):
        """The cgroup.procs files a process writes its pid to, to join the pod's cgroup."""
        return [os.path.join(d, "cgroup.procs") for d in self.unique_dirs()]

    def container_view(self):
        """[(directory on the host, path inside the container)] for /sys/fs/cgroup in the
        container: v2 shows the pod's cgroup as the whole tree (as a private cgroup namespace
        does); v1 shows the pod's directory of each controller (as runc's per-controller
        bind mounts do)."""
        if self.v2:
            return [(self.dirs["unified"], "/sys/fs/cgroup")]
        return [(self.dirs[c], f"/sys/fs/cgroup/{c}") for c in V1_CONTROLLERS]

    def oom_kills(self):
        """How many processes the OOM killer has killed in the pod."""
        if self.v2:
            text = _read(os.path.join(self.dirs["unified"], "memory.events"))
        else:
            text = _read(os.path.join(self.dirs["memory"], "memory.oom_control"))
        m = re.search(r"^oom_kill (\d+)$", text, re.M)
        return int(m.group(1)) if m else 0

    def pids_in(self):
        pids = set()
        for d in self.unique_dirs():
            pids |= {int(p) for p in _read(os.path.join(d, "cgroup.procs")).split()}
        return pids

    def remove(self, timeout=10.0):
        """Kill whatever is still inside (an exec's nsenter outlives the pod's pid namespace by
        a moment), then remove the directories. Returns the ones that could not be removed."""
        deadline = time.monotonic() + timeout
        left = self.unique_dirs()
        while left:
            for pid in self.pids_in():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            still = []
            for d in left:
                try:
                    os.rmdir(d)
                except FileNotFoundError:
                    pass
                except OSError:
                    still.append(d)
            left = still
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        return left


def remove_instance(dirs_by_controller, timeout=10.0):
    """Remove this server's instance directories and any pod cgroup left in them (a pod whose
    worker did not finish), then the shared fake-kubelet parent if it is empty. Returns the
    directories that remain."""
    left = []
    for d in sorted(set(dirs_by_controller.values())):
        try:
            children = [e for e in os.listdir(d) if os.path.isdir(os.path.join(d, e))]
        except FileNotFoundError:
            continue
        for uid in children:
            stale = PodCgroup({"x": d}, uid, None, None, None)
            left += stale.remove(timeout)
        for path in (d, os.path.dirname(d)):
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                if path == d:
                    left.append(d)
    return left
