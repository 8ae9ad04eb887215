#!/usr/bin/python3
"""`code-interpreter serve` as PID 1 of a fresh PID namespace (what it is as a container's
entrypoint), started with `unshare --pid --fork --mount-proc`: signals sent to PID 1 reach the
daemon, the exit code is the daemon's, and an orphan of the namespace is reaped. The orphan is
made as `docker exec ... sh -c 'sleep & '` (or a containerd-shim in Docker-in-Docker) makes one:
a process entered into the namespace from outside (nsenter) whose parent exits.

  pid1_init_test.py --bin build/code-interpreter       (root: unshare --pid; prints TAP)
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import resource
import threading
import unittest
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import LISTEN_RE, Client, TapResult, wait_until  # noqa: E402

BIN = None
STARTUP_S = 20.0
EXIT_S = 30.0


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def stat_of(pid):
    """(state, ppid) of a host process, or None once it is gone (reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def processes_of_namespace(init):
    """What is left in init's PID namespace (nested ones included) and where each waits: why a
    namespace did not end is then in the failure message, not lost with the processes."""
    try:
        ns = os.readlink(f"/proc/{init}/ns/pid")
    except OSError:
        return f"PID 1 ({init}) is gone"
    rows = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            inside = os.readlink(f"/proc/{name}/ns/pid") == ns
            with open(f"/proc/{name}/status") as f:
                status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
            nested = len(status.get("NSpid", "").split()) > 2  # a sandbox's PID namespace
            if not inside and not (nested and is_descendant(int(name), int(init))):
                continue
            with open(f"/proc/{name}/wchan") as f:
                wchan = f.read()
            try:
                with open(f"/proc/{name}/stack") as f:
                    stack = " < ".join(line.split()[-1] for line in f.read().splitlines()[:6])
            except OSError:
                stack = "?"
        except (OSError, ValueError):
            continue
        rows.append(f"  {name} {status.get('Name')} state={status.get('State')} "
                    f"ppid={status.get('PPid')} SigPnd={status.get('SigPnd')} "
                    f"ShdPnd={status.get('ShdPnd')} SigBlk={status.get('SigBlk')} "
                    f"SigIgn={status.get('SigIgn')} wchan={wchan} stack: {stack}")
    return "processes of the namespace:\n" + "\n".join(rows)


def is_descendant(pid, ancestor):
    while pid > 1:
        st = stat_of(pid)
        if st is None:
            return False
        pid = st[1]
        if pid == ancestor:
            return True
    return False


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)


def as_a_container_entrypoint():
    """Default dispositions, as a container's entrypoint has them: a signal ignored here (SIGHUP
    under `nohup`, SIGINT and SIGQUIT under a script's `cmd &`, both of which once started this
    suite and failed it after EXIT_S) stays ignored through exec, and the daemon rightly does not
    die of it. No core dumps (SIGQUIT's default action) into the test's directory."""
    for sig in FORWARDED:
        signal.signal(sig, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Pid1Daemon:
    """unshare --pid --fork --mount-proc BIN serve; `init` is PID 1's host pid."""

    def __init__(self, **env):
        self.dir = tempfile.mkdtemp(prefix="ci-pid1-")
        full = dict(os.environ, HOST="127.0.0.1", PORT="0", EXECUTOR_BACKEND="local",
                    FILE_STORAGE_DIR=os.path.join(self.dir, "files"))
        full.update(env)
        self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", BIN, "serve"],
                                     env=full, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, cwd=self.dir,
                                     preexec_fn=as_a_container_entrypoint)
        self.lines = []
        self.diagnosis = []
        self.port = None
        self.listening = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        self.init = wait_until(
            lambda: (children_of(self.proc.pid) or [None])[0] or self.proc.poll() is not None,
            STARTUP_S)
        if self.init is True:  # it exited already
            self.init = None

    def _drain(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = LISTEN_RE.search(line)
            if m and self.port is None:
                self.port = int(m.group(2))
                self.listening.set()
        self.listening.set()

    def log(self):
        return "\n".join(self.lines[-40:] + self.diagnosis)

    def wait_exit(self):
        try:
            return self.proc.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            self.diagnosis.append(f"still running after {EXIT_S} s; "
                                  + processes_of_namespace(self.init))
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir])


class Pid1InitTest(unittest.TestCase):
    def start(self, **env):
        d = Pid1Daemon(**env)
        self.addCleanup(d.close)
        self.assertIsNotNone(d.init, "unshare started no PID 1")
        d.listening.wait(STARTUP_S)
        self.assertIsNotNone(d.port, f"no 'listening on' line:\n{d.log()}")
        self.client = Client("127.0.0.1", d.port)
        return d

    def execute_ok(self, d):
        r = self.client.post_json("/v1/execute", {"code": "print(6 * 7)"})
        self.assertEqual((r.status, (r.json or {}).get("stdout")), (200, "42\n"),
                         f"{r!r}\n{d.log()}")

    @staticmethod
    def child_running(parent, cmdline):
        for pid in children_of(parent):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() == cmdline.encode():
                        return pid
            except OSError:
                pass
        return None

    def test_daemon_is_the_init_s_only_child(self):
        d = self.start()
        self.execute_ok(d)
        kids = children_of(d.init)
        self.assertEqual(len(kids), 1, f"PID 1 ({d.init}) has children {kids}")
        with open(f"/proc/{kids[0]}/cmdline", "rb") as f:
            self.assertEqual(f.read().split(b"\0")[1:2], [b"serve"])

    def test_sigterm_and_sigint_shut_down_cleanly_with_exit_0(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                d = self.start()
                self.execute_ok(d)
                os.kill(d.init, sig)
                rc = d.wait_exit()
                self.assertEqual(rc, 0, f"exit code after {sig.name}\n{d.log()}")
                self.assertTrue(any(f"received signal {int(sig)}" in line for line in d.lines),
                                f"the daemon did not get {sig.name}:\n{d.log()}")
                self.assertTrue(any("shutdown complete" in line for line in d.lines), d.log())

    def test_other_signals_reach_the_daemon_and_its_status_is_the_exit_code(self):
        # The daemon does not handle these: their default action kills it, and the init exits
        # 128 + N as a shell would. Were they not forwarded, PID 1 would ignore them and live on.
        # SIGQUIT's default action dumps core (RLIMIT_CORE 0 here: none written).
        for sig in (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            with self.subTest(signal=sig.name):
                d = self.start()
                os.kill(d.init, sig)
                self.assertEqual(d.wait_exit(), 128 + int(sig), d.log())

    def test_a_failing_daemon_s_exit_code_is_the_init_s(self):
        plain = subprocess.run([BIN, "serve"], env=dict(os.environ, PORT="not-a-port"),
                               capture_output=True, timeout=60)
        self.assertNotEqual(plain.returncode, 0, "PORT=not-a-port must fail")
        d = Pid1Daemon(PORT="not-a-port")
        self.addCleanup(d.close)
        self.assertEqual(d.wait_exit(), plain.returncode, d.log())

    def test_an_orphan_is_reaped_and_the_daemon_keeps_working(self):
        d = self.start()
        mark = str(800000000 + uuid.uuid4().int % 99999999)
        # sh enters the namespace, starts sleep and exits: sleep's parent is gone, so the
        # kernel makes PID 1 its parent.
        subprocess.run(["nsenter", "-t", str(d.init), "-p", "--", "sh", "-c",
                        f"sleep {mark} >/dev/null 2>&1 &"], check=True, timeout=30)
        # sh may exit before its child has exec'd sleep: look until the orphan is sleep.
        sleeper = wait_until(lambda: self.child_running(d.init, f"sleep\0{mark}\0"), 10)
        self.assertTrue(sleeper, f"the orphan is not a child of PID 1 ({d.init}): "
                                      f"{children_of(d.init)}")
        os.kill(sleeper, signal.SIGKILL)
        # Reaped at once by a working init; a zombie ('Z') for as long as PID 1 lives otherwise.
        gone = wait_until(lambda: stat_of(sleeper) is None, 10)
        self.assertTrue(gone, f"the orphan {sleeper} is left as {stat_of(sleeper)}")
        self.execute_ok(d)
        os.kill(d.init, signal.SIGTERM)
        self.assertEqual(d.wait_exit(), 0, d.log())


def main():
    global BIN
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    BIN = os.path.abspath(args.bin)
    tap = sys.stdout
    sys.stdout = sys.stderr
    why = None
    if os.geteuid() != 0:
        why = "needs root (unshare --pid)"
    elif subprocess.run(["unshare", "--pid", "--fork", "true"]).returncode != 0:
        why = "unshare --pid does not work here"
    if why:
        if os.environ.get("CI") == "true":
            tap.write(f"Bail out! {why} (CI=true: no skipping)\n")
            return 1
        tap.write(f"1..0 # SKIP {why}\n")
        return 0
    tap.write("TAP version 13\n")
    result = TapResult(tap)
    unittest.TestLoader().loadTestsFromTestCase(Pid1InitTest).run(result)
    tap.write(f"1..{result.count}\n# {result.count - result.failed} passed, "
              f"{result.failed} failed\n")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
