"""A daemon in the test VM, reached from the host: the ssh tunnel to a port on the VM's loopback
and the JSON calls through it (for tests whose daemon listens on 127.0.0.1 inside the VM, as
docs/deployment.md's `--network host -e HOST=127.0.0.1` and `-p 127.0.0.1:8000:8000` commands
say)."""

import contextlib
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request

from vm import free_port

# The daemon's limits by default (docs/configuration.md "Configuration (environment)").
MEMORY_LIMIT_MB = 256
PIDS_LIMIT = 64

# What every daemon in the VM runs with on top of its deployment's documented settings. Under
# emulation a guest's CPU time is counted on the host's clock, also while the vCPU waits for a
# host core: on a loaded host a memory or fork bomb used up the default 5 s CPU limit before it
# reached the limit it tests. Above the tests' wall-clock limits, the CPU limit stays out of
# their way, so each limit test meets only its own limit.
VM_DAEMON_ENV = {"CPU_TIME_LIMIT_SEC": "120"}


def docker_env_flags():
    """VM_DAEMON_ENV as `docker run` flags."""
    return " ".join(f"-e {k}={v}" for k, v in VM_DAEMON_ENV.items())


def env_file(**extra):
    """An environment file's text (the systemd units' EnvironmentFile) with VM_DAEMON_ENV."""
    return "".join(f"{k}={v}\n" for k, v in {**extra, **VM_DAEMON_ENV}.items())


class Tunnel:
    """127.0.0.1:port on the host -> 127.0.0.1:guest_port in the VM, through the VM's sshd
    (qemu's forwards reach the guest's NIC only, not its loopback)."""

    def __init__(self, vm, guest_port=8000):
        self.port = free_port()
        base = vm._ssh_base("root")
        self.proc = subprocess.Popen(
            base[:-1] + ["-N", "-L", f"127.0.0.1:{self.port}:127.0.0.1:{guest_port}", base[-1]],
            stdin=subprocess.DEVNULL)

    def close(self):
        self.proc.kill()
        self.proc.wait()

    def json(self, path, body=None, timeout=180):
        """GET (or POST `body`) and the decoded answer; an HTTP error's body too (/health is a
        503 with its body while not ok)."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def wait_ready(self, timeout=300):
        """Until /health is ok (the warm pool's first sandbox came up) or `timeout` passes."""
        deadline = time.monotonic() + timeout
        health = None
        while time.monotonic() < deadline:
            try:
                health = self.json("/health", timeout=30)
                if health.get("status") == "ok":
                    return health
            except (OSError, ValueError):
                pass
            time.sleep(2)
        raise AssertionError(f"the daemon never got healthy: {health}")


def wait_until(predicate, timeout=120):
    """Polls `predicate` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def check_limits_enforced(test, health):
    """/health lists the default memory and pids limits as enforced and neither as downgraded:
    the Engine applies them (delegation works, or the nesting does)."""
    downgraded = " | ".join(d["measure"] for d in health["hardening"]["downgrades"])
    for limit in ("memory", "pids"):
        test.assertNotIn(limit, downgraded, health["hardening"])
    enforced = " | ".join(health["hardening"]["enforced"])
    test.assertIn(f"memory limit {MEMORY_LIMIT_MB} MiB", enforced)
    test.assertIn(f"pids limit {PIDS_LIMIT}", enforced)


@contextlib.contextmanager
def running_sandbox(vm, start):
    """While a sandbox runs a bash `sleep` (`start(code)` sends the execution), its cgroup as
    /proc/PID/cgroup names it in the VM ("0::/..."); the sleep is ended afterwards."""
    marker = "4444.5"  # a sleep no other process runs
    t = threading.Thread(target=lambda: start(f"exec sleep {marker}"), daemon=True)
    t.start()
    try:
        pgrep = lambda: vm.ssh(f"pgrep -f -x 'sleep {marker}' || true").stdout.strip()
        if not wait_until(pgrep):
            raise AssertionError("the sandbox's sleep never showed up in the VM")
        yield vm.ssh(f"cat /proc/{pgrep()}/cgroup").stdout.strip()
    finally:
        vm.ssh(f"pkill -f -x 'sleep {marker}' || true")
        t.join(timeout=120)


def check_cgroup_limits(test, vm, cgroup):
    """The cgroup ("0::/...") has the daemon's default memory.max and pids.max."""
    path = "/sys/fs/cgroup" + cgroup[3:]
    limits = vm.ssh(f"cat {path}/memory.max {path}/pids.max").stdout.split()
    test.assertEqual(limits, [str(MEMORY_LIMIT_MB << 20), str(PIDS_LIMIT)], path)
