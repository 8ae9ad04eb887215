"""What one sandbox can do to its init, the host and the other sandboxes (issue #9 items 2, 3, 12).

Each class of probe: the sandbox's own init (signals, prlimit, ptrace, /proc), the kernel quotas
counted per user (inotify instances, queued signals, pipe buffers: one sandbox holds its maximum
while a second sandbox and the host still get theirs), and host facts (/proc masks, socket
protocols). Where a backend or host cannot give a measure, /health must list it as a downgrade,
and the test asserts the report instead of the measure."""

import ctypes
import errno
import os
import re
import socket
import subprocess
import sys
import threading

from harness import (Config, E2ETestCase, host_processes_matching, unique_sleep_arg,
                     wait_until)

F_GETPIPE_SZ = 1032

# Holds what the program could take until the stream is closed: the neighbour's turn.
HOLD = "\nprint('ready', flush=True)\nimport time\ntime.sleep(60)\n"

INOTIFY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < LIMIT and libc.inotify_init() >= 0:
    fds.append(1)
print("inotify", len(fds), flush=True)
"""

SIGQUEUE = """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
class sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]
n = 0
while n < LIMIT and libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(0)) == 0:
    n += 1
print("queued", n, flush=True)
"""

PIPES = """
import fcntl, os, time
r, w = os.pipe()
for _ in range(3):
    if os.fork() == 0:
        held = [os.pipe() for _ in range(400)]
        os.write(w, b"x")
        time.sleep(60)
        os._exit(0)
for _ in range(3):
    os.read(r, 1)
a, b = os.pipe()
print("own", fcntl.fcntl(a, 1032), flush=True)
"""

NEW_PIPE = "import fcntl, os\na, b = os.pipe()\nprint('pipe', fcntl.fcntl(a, 1032))\n"

INIT_PROBE = """
import ctypes, errno, os, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGSTOP, signal.SIGKILL, 0):
    attempt(f"kill{int(sig)}", lambda: os.kill(1, sig))
attempt("prlimit", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (4, 4)))
attempt("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt("environ", lambda: open("/proc/1/environ").read())
attempt("fd", lambda: os.listdir("/proc/1/fd"))
attempt("mem", lambda: open("/proc/1/mem", "rb").read(1))
r = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH
print("ptrace", "ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
print("done")
"""


class ContainmentTest(E2ETestCase):
    def health(self):
        r = self.client.get("/health", timeout=10)
        return (r.json or {}).get("hardening") or {}

    def local(self):
        return Config.expected_backend in (None, "local")

    def while_holding(self, code, neighbour):
        """Runs `code` + HOLD as a streamed execution; once it printed 'ready', runs
        `neighbour()` (the sandbox still holds everything it took), then hangs up, which ends
        it. Returns (the held program's stdout, what neighbour returned)."""
        out, result = [], {}

        def on_event(ev, sock):
            name, data, _ = ev
            if name == "output" and data.get("stream") == "stdout":
                out.append(data["data"])
                if "ready" in "".join(out) and "value" not in result:
                    result["value"] = neighbour()
                    sock.shutdown(socket.SHUT_RDWR)

        try:
            self.client.sse("/v1/execute/stream", {"code": code + HOLD, "timeout_ms": 30000},
                            timeout=60, on_event=on_event)
        except OSError:
            pass  # our own hang-up
        self.assertIn("value", result, f"the held program never got ready: {''.join(out)!r}")
        return "".join(out), result["value"]

    @staticmethod
    def number(text, key):
        for line in text.splitlines():
            if line.startswith(key + " "):
                return int(line.split()[1])
        raise AssertionError(f"no '{key} N' line in {text!r}")

    # -- the sandbox's init ------------------------------------------------------------------

    def init_shares_the_programs_uid(self):
        """Rootless without subordinate ids: reported as a downgrade that names the fix."""
        for d in self.health().get("downgrades") or []:
            if d.get("measure") == "init unreachable by the program":
                self.assertIn("subordinate ids", d["fix"], d)
                return True
        return False

    def test_program_cannot_signal_prlimit_or_ptrace_init(self):
        if self.init_shares_the_programs_uid():
            return
        res = self.execute(INIT_PROBE, timeout_ms=10000)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertTrue(res["stdout"].endswith("done\n"), res)
        if self.local():
            for probe in ("kill14", "kill15", "kill19", "kill9", "kill0", "prlimit",
                          "setpriority", "ptrace"):
                self.assertIn(f"{probe} EPERM\n", res["stdout"], res)
            for probe in ("environ", "fd", "mem"):
                self.assertIn(f"{probe} EACCES\n", res["stdout"], res)
        elif Config.expected_backend == "docker":
            # The agent (PID 1 with PYTHON_EXECUTOR_DOCKER_AGENT) runs as the program's user and
            # outlives it: the seccomp profile lets a program set its own limits only.
            self.assertIn("prlimit EPERM\n", res["stdout"], res)
        self.assertHealthy()

    def test_session_survives_a_program_signalling_init(self):
        if self.init_shares_the_programs_uid():
            return
        r = self.client.post_json("/v1/sessions", {"ttl_seconds": 120})
        self.assertEqual(r.status, 201, r)
        sid = r.json["session_id"]
        self.addCleanup(lambda: self.client.delete(f"/v1/sessions/{sid}"))
        r = self.client.post_json(f"/v1/sessions/{sid}/bash", {
            "cmd": "for s in ALRM TERM HUP USR1 STOP; do kill -$s 1 2>/dev/null; done; echo sent"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["stdout"], "sent\n", r.json)
        for _ in range(2):
            r = self.client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "echo alive"})
            self.assertEqual((r.status, r.json["stdout"]), (200, "alive\n"), r)
        res = self.execute("print(6 * 7)", path=f"/v1/sessions/{sid}/execute")
        self.assertEqual(res["stdout"], "42\n", res)

    def kill_sandbox_of(self, sleep_arg):
        """Kills, from the host, the sandbox running `sleep <sleep_arg>`: local, its shim (init
        dies with it); docker, its container (found from the process's cgroup; with
        Docker-in-Docker through the nested dockerd); kubernetes, its pod (deleted through the
        API)."""
        if Config.expected_backend == "kubernetes":
            pid = wait_until(lambda: Config.cluster.pod_process_matching(f"sleep {sleep_arg}"), 30)
            self.assertTrue(pid, "the session's sleep never ran in a pod")
            Config.cluster.delete_pod_of(pid)
            return
        line = wait_until(lambda: host_processes_matching(f"sleep {sleep_arg}"), 30)
        self.assertTrue(line, "the session's sleep never ran")
        pid = int(line[0].split()[0])
        if not self.local():
            with open(f"/proc/{pid}/cgroup") as f:
                ids = re.findall(r"[0-9a-f]{64}", f.read())
            self.assertTrue(ids, "no container id in the sleep's cgroup")
            kill = ["docker", "kill", ids[0]]
            if Config.one_daemon_at_a_time:  # Docker-in-Docker: a container of the nested dockerd
                kill = ["docker", "exec", self.daemon.cid, "docker", "-H",
                        "unix:///run/code-interpreter/dockerd/docker.sock", "kill", ids[0]]
            subprocess.run(kill, check=True, capture_output=True)
            return
        while pid > 1:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == b"code-interpreter\0shim\0":
                    os.kill(pid, 9)
                    return
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        self.fail("no shim above the session's sleep")

    def test_session_whose_sandbox_died_is_reported_and_reaped(self):
        r = self.client.post_json("/v1/sessions", {"ttl_seconds": 300})
        self.assertEqual(r.status, 201, r)
        sid = r.json["session_id"]
        sleep = unique_sleep_arg()
        answers = {}

        def call():
            answers["first"] = self.client.post_json(
                f"/v1/sessions/{sid}/bash", {"cmd": f"sleep {sleep}", "timeout_ms": 60000},
                timeout=90)

        t = threading.Thread(target=call)
        t.start()
        self.kill_sandbox_of(sleep)
        t.join(90)
        first = answers["first"]
        # The call in flight: 410 when the backend saw its sandbox die under it; docker may
        # instead see its exec end with the kill's signal.
        self.assertIn(first.status, (200, 410), first)
        r = self.client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "echo hi"})
        if first.status == 200:
            self.assertEqual(r.status, 410, r)
            self.assertIn("its sandbox stopped", r.json["detail"], r)
        else:
            self.assertIn("its sandbox stopped", first.json["detail"], first)
            self.assertEqual(r.status, 404, r)
        # Reaped, not half-alive: gone from the list and the next call is a plain 404.
        self.assertEqual(self.client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "true"}).status,
                         404)
        listed = self.client.get("/v1/sessions").json["sessions"]
        self.assertNotIn(sid, [x["session_id"] for x in listed])
        self.assertHealthy()

    # -- kernel quotas counted per user ------------------------------------------------------

    def per_sandbox_ids(self):
        """False when /health says sandboxes share one host uid (rootless without subordinate
        ids, docker): per-uid counters are then shared, as reported."""
        return not self.downgraded("own host uid/gid per sandbox")

    def test_inotify_instances_are_the_sandboxs_own(self):
        libc = ctypes.CDLL(None, use_errno=True)

        def neighbour():
            host_fd = libc.inotify_init()  # the host's user (the test's) is not charged
            if host_fd >= 0:
                os.close(host_fd)
            res = self.execute(INOTIFY.replace("LIMIT", "16"), timeout_ms=10000)
            return host_fd, res

        held, (host_fd, other) = self.while_holding(INOTIFY.replace("LIMIT", "1000"), neighbour)
        taken = self.number(held, "inotify")
        self.assertGreater(taken, 0, held)
        if self.local():
            self.assertLessEqual(taken, 32, "the sandbox's user namespace allows 32")
        self.assertGreaterEqual(host_fd, 0, f"the host lost its inotify instances to a sandbox "
                                            f"holding {taken}")
        if self.per_sandbox_ids():
            self.assertIn("inotify 16\n", other["stdout"], other)

    def test_queued_signals_are_the_sandboxs_own(self):
        def neighbour():
            res = self.execute(SIGQUEUE.replace("LIMIT", "100"), timeout_ms=10000)
            # A host process of this test's user can still queue signals to itself.
            host = subprocess.run([sys.executable, "-c", SIGQUEUE.replace("LIMIT", "50")],
                                  capture_output=True, text=True, timeout=30)
            return host.stdout, res

        held, (host_out, other) = self.while_holding(SIGQUEUE.replace("LIMIT", "200000"),
                                                     neighbour)
        taken = self.number(held, "queued")
        self.assertLessEqual(taken, 1024, "RLIMIT_SIGPENDING of a sandbox is 1024")
        self.assertGreater(taken, 100, held)
        self.assertEqual(host_out, "queued 50\n",
                         f"the host could not queue signals while a sandbox held {taken}")
        if self.per_sandbox_ids():
            self.assertIn("queued 100\n", other["stdout"], other)

    def test_pipe_buffers_are_the_sandboxs_own(self):
        held, other = self.while_holding(PIPES, lambda: self.execute(NEW_PIPE, timeout_ms=10000))
        # 1200 pipes are over pipe-user-pages-soft (16384 pages = 1024 pipes): the holder's own
        # new pipes shrink to two pages, which shows it really took its user's whole share.
        with open("/proc/sys/fs/pipe-user-pages-soft") as f:
            soft = int(f.read())
        if soft == 16384:
            self.assertLess(self.number(held, "own"), 65536, held)
        if self.per_sandbox_ids():
            self.assertIn("pipe 65536\n", other["stdout"], other)
        else:
            self.assertTrue(self.downgraded("own host uid/gid per sandbox"))

    def test_rlimits_are_the_sandboxs_own(self):
        res = self.execute("import resource as r\nfor n in ('NOFILE','SIGPENDING','MSGQUEUE',"
                           "'MEMLOCK'):\n    print(n, *r.getrlimit(getattr(r, 'RLIMIT_' + n)))")
        self.assertEqual(res["stdout"], "NOFILE 1024 1024\nSIGPENDING 1024 1024\n"
                                        "MSGQUEUE 819200 819200\nMEMLOCK 8388608 8388608\n", res)

    def test_no_nested_namespaces_or_fanotify_quota(self):
        res = self.execute("import ctypes, errno, os\n"
                           "libc = ctypes.CDLL(None, use_errno=True)\n"
                           "r = libc.unshare(0x10000000)\n"  # CLONE_NEWUSER
                           "print('unshare', errno.errorcode[ctypes.get_errno()] if r else 'ok')\n"
                           "for n in ('max_user_namespaces','max_inotify_instances',"
                           "'max_fanotify_groups','max_net_namespaces'):\n"
                           "    p = '/proc/sys/user/' + n\n"
                           "    print(n, open(p).read().strip() if os.path.exists(p) else '-')")
        self.assertIn("unshare EPERM\n", res["stdout"], res)
        if not self.local():
            return  # the user namespace's own quotas are the local runtime's (docker: host's)
        for line in ("max_user_namespaces 0", "max_inotify_instances 32",
                     "max_net_namespaces 0"):
            self.assertIn(line + "\n", res["stdout"], res)
        self.assertRegex(res["stdout"], r"max_fanotify_groups (0|-)\n")

    # -- host facts --------------------------------------------------------------------------

    def test_host_facts_are_masked(self):
        if self.downgraded("host facts masked in /proc"):
            # kubernetes: a pod's /proc hides only the runtime's list (named in /health, with
            # the fix): what it does hide must still be hidden.
            res = self.execute("for p in ('/proc/kcore', '/proc/keys', '/proc/timer_list',\n"
                               "          '/proc/sched_debug'):\n"
                               "    try:\n        print(p, len(open(p, 'rb').read(64)))\n"
                               "    except OSError as e:\n        print(p, 'error')\n")
            for line in res["stdout"].splitlines():
                self.assertRegex(line, r" (0|error)$", res)
            self.assertEqual(len(res["stdout"].splitlines()), 4, res)
            return
        res = self.execute(
            "import os\n"
            "for p in ('/proc/sys/kernel/random/boot_id', '/proc/config.gz', '/proc/kallsyms',\n"
            "          '/proc/modules', '/proc/keys', '/proc/timer_list', '/proc/sched_debug'):\n"
            "    try:\n"
            "        print(p, len(open(p, 'rb').read()))\n"
            "    except OSError as e:\n"
            "        print(p, 'error', e.errno)\n"
            "for d in ('/proc/acpi', '/proc/scsi', '/proc/asound'):\n"
            "    print(d, os.listdir(d) if os.path.isdir(d) else 'absent')\n")
        for line in res["stdout"].splitlines():
            path, _, rest = line.partition(" ")
            self.assertIn(rest, ("0", "[]", "absent") + tuple(f"error {e}" for e in
                                                               (errno.ENOENT, errno.EACCES,
                                                                errno.EPERM)), line)
        with open("/proc/sys/kernel/random/boot_id") as f:
            self.assertNotIn(f.read().strip(), res["stdout"])

    def test_only_tcp_and_udp_sockets(self):
        res = self.execute(
            "import errno, socket\n"
            "for name, fam, typ, proto in [('tcp', 2, 1, 0), ('tcp6', 10, 1, 6), ('udp', 2, 2, 0),\n"
            "        ('udp6', 10, 2, 17), ('mptcp', 2, 1, 262), ('mptcp6', 10, 1, 262),\n"
            "        ('udplite', 2, 2, 136), ('sctp', 2, 1, 132), ('icmp', 2, 2, 1),\n"
            "        ('raw', 2, 3, 1)]:\n"
            "    try:\n"
            "        socket.socket(fam, typ, proto).close(); print(name, 'ok')\n"
            "    except OSError as e:\n"
            "        print(name, errno.errorcode[e.errno])\n")
        out = res["stdout"]
        for name in ("tcp", "tcp6", "udp", "udp6"):
            self.assertIn(f"{name} ok\n", out, res)
        for name in ("mptcp", "mptcp6", "udplite", "sctp", "icmp", "raw"):
            self.assertIn(f"{name} EPERM\n", out, res)

    def test_terminal_ioctls_are_refused(self):
        res = self.execute(
            "import ctypes, errno, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "try:\n"
            "    os.open('/dev/tty', os.O_RDWR); print('tty opened')\n"
            "except OSError as e:\n"
            "    print('tty', errno.errorcode[e.errno])\n"
            "for req in (0x5412, 0x541C, 0x100005412, 0xffffffff0000541c):\n"
            "    r = libc.syscall(16, 0, ctypes.c_ulong(req), ctypes.c_char_p(b'x'))\n"
            "    print(hex(req), errno.errorcode[ctypes.get_errno()])\n"
            "r = libc.syscall(16, 0, ctypes.c_ulong(0x5401), ctypes.c_char_p(b'x' * 64))\n"
            "print('tcgets', errno.errorcode[ctypes.get_errno()])\n")
        out = res["stdout"]
        # No /dev/tty (local), or one that leads nowhere: no controlling terminal (docker).
        self.assertRegex(out, r"^tty (ENOENT|ENXIO)\n", res)
        for req in ("0x5412", "0x541c", "0x100005412", "0xffffffff0000541c"):
            self.assertIn(f"{req} EPERM\n", out, res)
        self.assertIn("tcgets ENOTTY\n", out, res)  # other requests reach the kernel
