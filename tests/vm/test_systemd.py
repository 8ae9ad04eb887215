#!/usr/bin/python3
"""The daemon under a real systemd on a real cgroup v2 kernel: the test VM (vm.py).

  test_systemd.py --source DIR --build DIR [-k PATTERN]

The worktree and build directory come in over 9p at their own paths; the daemon is installed as
docs/deployment.md "systemd service" says (`meson install -C build`, then systemctl), started as the
system unit (Type=notify: `systemctl start` returns only after READY=1), through its socket unit,
and as the test user's `systemctl --user` unit. Through the forwarded port: a named subset of the
e2e suite (tests/e2e/run.py --url), then memory and pids limits with the sandbox's cgroup read
inside the VM: it must be under the unit's delegated subtree with memory.max and pids.max set.
Output is unittest's; the last line is "N passed, N failed".
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from daemon_http import MEMORY_LIMIT_MB, PIDS_LIMIT, env_file, wait_until  # noqa: E402
from vm import TEST_USER, Vm, run_tests  # noqa: E402

OPTS = None
VM = None
GUEST_PORT = 8000
# The e2e subset under emulation (the whole suite takes ~10x its native time under TCG): the
# modules whose answers can depend on the host under the daemon (/health's hardening report and
# the documented shapes of answers carrying it and cgroup v2's usage counters, executions with
# their limits, verdicts and timeouts, sessions' interpreters under the unit's cgroup, pauses
# frozen on cgroup v2 in the unit's delegated subtree), less E2E_EXCLUDED_CLASSES. Files and
# streaming behave alike on every host; the e2e suite proves them on six backends natively, and
# RootlessDoodTest moves files through a VM.
E2E_MODULES = ["test_api", "test_execute", "test_sessions", "test_session_pause"]
# Classes of those modules whose answers are the daemon's and the Python wrapper's own whatever
# the host: nothing in them reads a cgroup, a limit or systemd's environment, and the native
# `e2e` test runs them on the same local backend (root, the fork server) as this unit does. The
# other e2e tests leave the first four out for the same reason.
E2E_EXCLUDED_CLASSES = {
    "test_api.ValidationTest",  # request parsing: 422s, optional and unknown fields
    "test_api.RoutingTest",  # 404, 405, query strings
    "test_execute.LastLineInteractiveTest",  # the wrapper's display of the last expression
    "test_execute.TracebackTest",  # the wrapper's traceback without its own frames
    "test_execute.StdinTest",  # stdin through the sandbox's pipe
    # Needs a daemon started with MAX_OUTPUT_BYTES=1000: skipped under --url anyway.
    "test_execute.TruncationTest",
}
# Left out of the subset, each with why.
E2E_EXCLUDED = {
    # Asserts that 4 parallel runs of a 1.5 s sleep overlap: under emulation each Python start
    # alone takes about a second, so the last may begin after the first has ended.
    "test_execute.ExecuteBasicsTest.test_concurrent_executions",
    # Fifty new sandboxes and interpreters take minutes under emulation; the other suites run it.
    "test_session_pause.SessionPauseTest.test_fifty_pause_resume_cycles_lose_nothing",
}


def setUpModule():
    global VM
    shares = {"source": OPTS.source}
    if not os.path.realpath(OPTS.build).startswith(os.path.realpath(OPTS.source) + os.sep):
        shares["build"] = OPTS.build
    VM = Vm(shares=shares).boot()
    print(f"# VM up in {VM.boot_seconds:.1f} s ({'restored' if VM.restored else 'cold'})",
          file=sys.stderr)
    VM.mount_shares()
    # The VM's network is reachable only through ports forwarded on the host's loopback, so the
    # daemon listens on the guest's NIC (the documented override file).
    VM.ssh("mkdir -p /etc/code-interpreter && printf %s "
           f"{shlex.quote(env_file(HOST='0.0.0.0'))} >/etc/code-interpreter/env")
    # The documented command past the build: install the binary and the units (no compiler in the
    # VM: the build directory is the host's, shared at its own path).
    VM.ssh(f"meson install -C {OPTS.build} --no-rebuild --quiet && systemctl daemon-reload")


def tearDownModule():
    if VM:
        VM.shutdown()


def http_json(port, path, body=None, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_health(port, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return http_json(port, "/health", timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def in_background(port, body):
    """POST /v1/execute from a thread: for a test that looks at the sandbox while it runs."""
    def run():
        try:
            http_json(port, "/v1/execute", body)
        except OSError:
            pass  # the test stops the daemon under it, or kills the program
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class GuestTest(unittest.TestCase):
    def test_pure_cgroup_v2(self):
        self.assertEqual(VM.ssh("stat -fc %T /sys/fs/cgroup").stdout.strip(), "cgroup2fs")
        mounts = VM.ssh("awk '$3 == \"cgroup\"' /proc/mounts").stdout
        self.assertEqual(mounts, "", "a cgroup v1 hierarchy is mounted")
        self.assertIn("cgroup_no_v1=all", VM.ssh("cat /proc/cmdline").stdout)

    def test_binary_finds_its_libraries(self):
        out = VM.ssh("ldd /usr/local/bin/code-interpreter").stdout
        self.assertNotIn("not found", out)

    def test_user_delegation(self):
        uid = VM.ssh(f"id -u {TEST_USER}").stdout.strip()
        path = f"/sys/fs/cgroup/user.slice/user-{uid}.slice/user@{uid}.service/cgroup.controllers"
        controllers = VM.ssh(f"cat {path}").stdout.split()
        for c in ("memory", "pids"):
            self.assertIn(c, controllers)


class LimitsMixin:
    """Memory and pids verdicts, and the running sandbox's cgroup, for the daemon on `port`."""
    port = None
    subtree = None  # the unit's cgroup, e.g. /system.slice/code-interpreter.service

    def test_memory_bomb_is_memory_limit(self):
        res = http_json(self.port, "/v1/execute",
                        {"code": "x = bytearray(1 << 30)\nprint(len(x))", "timeout_ms": 30000})
        self.assertEqual(res["verdict"], "memory_limit", res)
        self.assertEqual(res["stdout"], "")

    def test_fork_bomb_is_pids_limit(self):
        res = http_json(self.port, "/v1/execute",
                        {"code": "import os\nwhile True:\n    os.fork()", "timeout_ms": 30000})
        self.assertEqual(res["verdict"], "pids_limit", res)

    def test_health_reports_cgroup_v2_limits(self):
        enforced = " | ".join(wait_health(self.port)["hardening"]["enforced"])
        self.assertIn(f"memory limit {MEMORY_LIMIT_MB} MiB (cgroup v2)", enforced)
        self.assertIn(f"pids limit {PIDS_LIMIT} (cgroup v2)", enforced)

    def test_sandbox_cgroup_is_in_the_delegated_subtree(self):
        marker = "4242.5"  # a sleep no other process runs
        t = in_background(self.port, {"code": f"exec sleep {marker}", "language": "bash",
                                      "timeout_ms": 60000})
        try:
            pgrep = lambda: VM.ssh(f"pgrep -f -x 'sleep {marker}' || true").stdout.strip()
            self.assertTrue(wait_until(pgrep), "the sandbox's sleep never showed up in the VM")
            pid = pgrep()
            cgroup = VM.ssh(f"cat /proc/{pid}/cgroup").stdout.strip()
            self.assertTrue(cgroup.startswith("0::" + self.subtree + "/"), cgroup)
            # The limits sit on the sandbox's cgroup or one above it, still inside the subtree.
            path = "/sys/fs/cgroup" + cgroup[3:]
            script = (f"d={path}; while [ \"$d\" != /sys/fs/cgroup{self.subtree} ]; do "
                      "if [ -f $d/memory.max ] && [ \"$(cat $d/memory.max)\" != max ]; then "
                      "echo $d; cat $d/memory.max $d/pids.max $d/memory.swap.max; "
                      "cat $(dirname $d)/cgroup.controllers; exit 0; fi; d=$(dirname $d); done; "
                      "exit 1")
            out = VM.ssh(script, check=False)
            self.assertEqual(out.returncode, 0, f"no memory.max on the way up from {path}")
            limited, memory_max, pids_max, swap_max, controllers = out.stdout.splitlines()
            self.assertEqual(int(memory_max), MEMORY_LIMIT_MB << 20)
            self.assertEqual(int(pids_max), PIDS_LIMIT)
            self.assertEqual(swap_max, "0")
            self.assertIn("memory", controllers.split())
            self.assertIn("pids", controllers.split())
        finally:
            VM.ssh(f"pkill -f -x 'sleep {marker}' || true")
            t.join(timeout=120)


class SystemServiceTest(LimitsMixin, unittest.TestCase):
    subtree = "/system.slice/code-interpreter.service"

    @classmethod
    def setUpClass(cls):
        start = time.monotonic()
        # Type=notify: this returns once the daemon sent READY=1 (after its self-test).
        VM.ssh("systemctl enable --now code-interpreter", timeout=300)
        print(f"# systemctl start took {time.monotonic() - start:.1f} s", file=sys.stderr)
        cls.port = VM.forward(GUEST_PORT)

    @classmethod
    def tearDownClass(cls):
        VM.ssh("systemctl disable --now code-interpreter")

    def test_ready_and_status_came_from_the_daemon(self):
        show = dict(line.split("=", 1) for line in VM.ssh(
            "systemctl show code-interpreter -p Type -p ActiveState -p SubState -p StatusText "
            "-p NRestarts").stdout.splitlines())
        self.assertEqual(show["Type"], "notify")
        self.assertEqual((show["ActiveState"], show["SubState"]), ("active", "running"))
        # STATUS= is only ever sent with READY=1 (SystemdReady).
        self.assertTrue(show["StatusText"].startswith("serving on port 8000, languages python"),
                        show)
        self.assertEqual(show["NRestarts"], "0")

    def test_python_runs_in_the_fork_server_under_the_units_hardening(self):
        log = VM.ssh("journalctl -u code-interpreter -o cat").stdout
        self.assertIn("fork server ready", log)
        # A forked program's command line is its shim's; an exec'd python's would be python3's.
        res = http_json(self.port, "/v1/execute", {
            "code": "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[:2])"})
        self.assertEqual(res["stdout"], "[b'code-interpreter', b'shim']\n", res)

    def test_e2e_subset(self):
        run_py = os.path.join(OPTS.source, "tests/e2e/run.py")
        ids = subprocess.run([sys.executable, run_py, "--list"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout.split()
        chosen = [i for i in ids if i.split(".")[0] in E2E_MODULES and i not in E2E_EXCLUDED
                  and ".".join(i.split(".")[:2]) not in E2E_EXCLUDED_CLASSES]
        # Each excluded class exists (a renamed one would silently come back into the subset).
        for name in E2E_EXCLUDED_CLASSES | E2E_EXCLUDED:
            self.assertTrue(any(i == name or i.startswith(name + ".") for i in ids), name)
        self.assertGreater(len(chosen), 75)
        args = [sys.executable, run_py, "--url", f"http://127.0.0.1:{self.port}"]
        for test_id in chosen:
            args += ["-k", test_id]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=1800)
        failures, keep = [], False
        for line in r.stdout.splitlines():
            if line.startswith(("ok ", "not ok ")):
                keep = line.startswith("not ok ")
            if keep:
                failures.append(line)
        print("\n".join(r.stdout.splitlines()[-2:]), file=sys.stderr)
        self.assertEqual(r.returncode, 0, "\n".join(failures)[-8000:] or r.stdout[-3000:])

    def test_stop_sends_stopping_and_leaves_no_sandbox(self):
        # An execution runs while the unit stops: the daemon says STOPPING=1 with its status
        # and drains; afterwards no sandbox cgroup is left. Then the unit is started again.
        marker = "4343.5"
        in_background(self.port, {"code": f"exec sleep {marker}", "language": "bash",
                                  "timeout_ms": 60000})
        try:
            self.assertTrue(wait_until(lambda: VM.ssh(f"pgrep -f -x 'sleep {marker}'",
                                                      check=False).returncode == 0))
            VM.ssh("systemctl stop --no-block code-interpreter")
            status = lambda: VM.ssh("systemctl show -p StatusText --value code-interpreter"
                                    ).stdout.strip()
            self.assertTrue(wait_until(lambda: status().startswith("shutting down")), status())
            self.assertTrue(wait_until(lambda: VM.ssh("systemctl is-active code-interpreter",
                                                      check=False).stdout.strip() == "inactive"))
            left = VM.ssh(f"find /sys/fs/cgroup{self.subtree} -mindepth 1 -type d 2>/dev/null "
                          "|| true").stdout
            self.assertEqual(left, "")
            self.assertIn("shutdown complete", VM.ssh("journalctl -u code-interpreter -o cat -n 30"
                                                      ).stdout)
        finally:
            VM.ssh("systemctl start code-interpreter", timeout=300)


class SocketActivationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        VM.ssh("systemctl stop code-interpreter; mkdir -p /etc/systemd/system/"
               "code-interpreter.socket.d && printf '[Socket]\\nListenStream=\\n"
               "ListenStream=0.0.0.0:8000\\n' >/etc/systemd/system/code-interpreter.socket.d/"
               "any.conf && systemctl daemon-reload && systemctl start code-interpreter.socket")
        cls.port = VM.forward(GUEST_PORT)

    @classmethod
    def tearDownClass(cls):
        VM.ssh("systemctl stop code-interpreter.socket code-interpreter; rm -r "
               "/etc/systemd/system/code-interpreter.socket.d; systemctl daemon-reload")

    def test_first_connection_starts_the_daemon_on_the_passed_socket(self):
        self.assertEqual(VM.ssh("systemctl is-active code-interpreter", check=False)
                         .stdout.strip(), "inactive")
        res = http_json(self.port, "/v1/execute", {"code": "print(6*7)"}, timeout=300)
        self.assertEqual(res["stdout"], "42\n", res)
        self.assertEqual(VM.ssh("systemctl is-active code-interpreter").stdout.strip(), "active")
        # It served on systemd's socket, not one of its own: the daemon never bound the port.
        log = VM.ssh("journalctl -u code-interpreter -o cat").stdout
        self.assertNotIn("cannot listen", log)
        pid = VM.ssh("systemctl show -p MainPID --value code-interpreter").stdout.strip()
        listening = VM.ssh(f"readlink /proc/{pid}/fd/3").stdout.strip()
        self.assertTrue(listening.startswith("socket:["), listening)
        # Nothing the daemon starts sees the activation: no LISTEN_* variables, not the socket.
        res = http_json(self.port, "/v1/execute", {
            "language": "bash", "code": "env | grep -c ^LISTEN_; ls -l /proc/$$/fd/"})
        self.assertTrue(res["stdout"].startswith("0\n"), res)
        self.assertNotIn(listening, res["stdout"])


class UserServiceTest(LimitsMixin, unittest.TestCase):
    """The rootless unit as the test user, with memory and pids delegated to user@.service."""

    @classmethod
    def setUpClass(cls):
        uid = VM.ssh(f"id -u {TEST_USER}").stdout.strip()
        cls.subtree = (f"/user.slice/user-{uid}.slice/user@{uid}.service/app.slice/"
                       "code-interpreter.service")
        VM.ssh("mkdir -p ~/.config/code-interpreter && "
               f"printf %s {shlex.quote(env_file(HOST='0.0.0.0'))} "
               ">~/.config/code-interpreter/env && "
               "systemctl --user daemon-reload && systemctl --user enable --now code-interpreter",
               user=TEST_USER, timeout=300)
        cls.port = VM.forward(GUEST_PORT)

    @classmethod
    def tearDownClass(cls):
        VM.ssh("systemctl --user stop code-interpreter", user=TEST_USER)

    def test_runs_as_the_user_with_subordinate_ids(self):
        health = wait_health(self.port)
        downgrades = " | ".join(d["measure"] if isinstance(d, dict) else str(d)
                                for d in health["hardening"]["downgrades"])
        self.assertNotIn("memory", downgrades, health["hardening"])
        self.assertNotIn("pids", downgrades, health["hardening"])
        res = http_json(self.port, "/v1/execute", {"code": "id -u", "language": "bash"})
        self.assertNotEqual(res["stdout"].strip(), "0", res)


def main():
    global OPTS
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("-k", action="append", default=[], help="only tests matching")
    OPTS = ap.parse_args()
    OPTS.source, OPTS.build = os.path.abspath(OPTS.source), os.path.abspath(OPTS.build)
    missing = [f"{t} (scripts/install-deps.sh)" for t in
               ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "mke2fs", "ssh")
               if not shutil.which(t)]
    return run_tests(missing, OPTS.k)


if __name__ == "__main__":
    sys.exit(main())
