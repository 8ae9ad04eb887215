"""Sessions that pause, resume, survive a restart and fork (docs/sessions.md), through the REST
API on every backend: frozen in memory where the backend can (the cgroup freezer, the Engine's
pause; a pod cannot: it is snapshotted), and snapshotted to disk (the files by tar inside the
sandbox, the Python state by the interpreter) to come back in a new sandbox. One daemon for most
cases; the restart and idle cases start their own."""

import json
import os
import time

from harness import Client, Config, Daemon, E2ETestCase, wait_until
from test_auth import ALICE, BOB, KEYS_FILE

SETUP = r"""
import os, socket, subprocess, numpy as np
x = 41
big = np.arange(1_000_000, dtype=np.int64)
def bump(n=1):
    global x
    x += n
    return x
class Box:
    def __init__(self, v): self.v = v
box = Box('boxed')
sock = socket.socket()
os.makedirs('/workspace/d/empty', exist_ok=True)
with open('/workspace/d/run.sh', 'w') as f: f.write('#!/bin/sh\necho ran\n')
os.chmod('/workspace/d/run.sh', 0o750)
with open('/workspace/a.txt', 'w') as f: f.write('alpha')
os.symlink('a.txt', '/workspace/link')
os.link('/workspace/a.txt', '/workspace/hard')
with open('/tmp/sparse', 'wb') as f:
    f.seek(64 << 20)
    f.write(b'end')
with open('/tmp/t.txt', 'w') as f: f.write('in tmp')
"""

CHECK = r"""
import os, stat
s = os.stat('/tmp/sparse')
print(bump(), big.sum() == 499999500000, box.v, np.__name__,
      open('/workspace/link').read(), os.readlink('/workspace/link'),
      os.stat('/workspace/a.txt').st_ino == os.stat('/workspace/hard').st_ino,
      oct(stat.S_IMODE(os.stat('/workspace/d/run.sh').st_mode)),
      os.path.isdir('/workspace/d/empty'), s.st_size, s.st_blocks * 512 < (1 << 20),
      open('/tmp/t.txt').read())
"""
CHECKED = "42 True boxed numpy alpha a.txt True 0o750 True 67108867 True in tmp\n"


class PauseCase(E2ETestCase):
    def create(self, client=None, expect_status=201, **body):
        client = client or self.client
        r = client.post_json("/v1/sessions", body)
        self.assertEqual(r.status, expect_status, r)
        if expect_status != 201:
            return r
        sid = r.json["session_id"]
        self.addCleanup(lambda: client.delete(f"/v1/sessions/{sid}"))
        return sid

    def py(self, sid, code, client=None):
        # Generous: numpy's import under the VM suite's emulation takes seconds.
        r = (client or self.client).post_json(f"/v1/sessions/{sid}/execute",
                                              {"code": code, "timeout_ms": 30000})
        self.assertEqual(r.status, 200, r)
        return r.json

    def bash(self, sid, cmd, client=None):
        r = (client or self.client).post_json(f"/v1/sessions/{sid}/bash", {"cmd": cmd})
        self.assertEqual(r.status, 200, r)
        return r.json

    def pause(self, sid, memory, client=None, expect_status=200):
        r = (client or self.client).post_json(f"/v1/sessions/{sid}/pause", {"memory": memory})
        self.assertEqual(r.status, expect_status, r)
        return r.json if expect_status == 200 else r

    def state(self, sid, client=None):
        listed = (client or self.client).get("/v1/sessions").json["sessions"]
        return {s["session_id"]: s["state"] for s in listed}.get(sid)

    def can_freeze(self):
        # A pod cannot be frozen; a rootless daemon here has no cgroup of its own to freeze.
        return Config.expected_backend != "kubernetes" and not Config.as_user


class SessionPauseTest(PauseCase):
    def test_freeze_stops_everything_and_thaw_keeps_it(self):
        sid = self.create()
        # A clock of the sandbox's own: a line per 50 ms while it runs.
        self.py(sid, "import subprocess\nticker = subprocess.Popen(['sh', '-c', 'while :; do "
                     "date +%s.%N >> /tmp/ticks; sleep 0.05; done'], start_new_session=True)\n"
                     "y = 'kept'")
        time.sleep(0.5)
        paused = self.pause(sid, True)
        if not self.can_freeze():
            self.assertEqual(paused["state"], "paused", paused)
            self.assertTrue(paused.get("not_frozen_because"), paused)
            return
        self.assertEqual((paused["state"], paused["memory_kept"]), ("frozen", True), paused)
        self.assertEqual(self.state(sid), "frozen")
        self.assertDetail(self.pause(sid, True, expect_status=409), 409, contains="already paused")
        time.sleep(1.5)
        out = self.py(sid, "print(y, ticker.poll())\nimport time; time.sleep(0.3)\n"
                           "t = [float(l) for l in open('/tmp/ticks')]\n"
                           "print(max(b - a for a, b in zip(t, t[1:])) > 1.2)")
        self.assertEqual(out["stdout"], "kept None\nTrue\n",
                         "the same process lives on, and nothing ran while frozen")
        self.assertEqual(self.state(sid), "running")

    def test_pause_to_disk_keeps_files_and_python_state_and_says_what_not(self):
        sid = self.create()
        self.py(sid, SETUP + "subprocess.Popen(['sleep', '1000'], start_new_session=True)")
        paused = self.pause(sid, False)
        self.assertEqual((paused["state"], paused["memory_kept"]), ("paused", False), paused)
        lost = "\n".join(paused["not_kept"])
        self.assertIn("python global 'sock'", lost)
        self.assertIn("sleep 1000", lost)
        for kept in ("'x'", "'big'", "'bump'", "'box'", "'np'"):
            self.assertNotIn(kept, lost)
        self.assertEqual(self.state(sid), "paused")
        r = self.client.post_json(f"/v1/sessions/{sid}/resume", {})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["resumed_from"], "snapshot", r)
        self.assertIn("python global 'sock'", "\n".join(r.json["not_restored"]))
        self.assertEqual(self.py(sid, CHECK)["stdout"], CHECKED)
        self.assertEqual(self.bash(sid, "/workspace/d/run.sh; pgrep -xf 'sleep 1000' || echo none")
                         ["stdout"], "ran\nnone\n")

    def test_the_next_call_resumes_and_says_what_did_not_come_back(self):
        sid = self.create()
        self.py(sid, "import socket\ns = socket.socket()\nz = 5")
        self.pause(sid, False)
        out = self.py(sid, "print(z)")
        self.assertEqual(out["stdout"], "5\n")
        self.assertIn("resumed from a snapshot", out["stderr"])
        self.assertIn("python global 's'", out["stderr"])
        self.assertEqual(self.py(sid, "print(z)")["stderr"], "", "said once")

    def test_fifty_pause_resume_cycles_lose_nothing(self):
        # Fifty where a cycle is cheap (local, docker); four where each one is a new pod (on
        # kubernetes every pause is to disk: every cycle the same) or the daemon is a container
        # (the same code: CI's budget).
        cheap = Config.expected_backend in (None, "local", "docker") and not Config.image
        cycles = 50 if cheap else 4
        sid = self.create()
        self.py(sid, "n = 0")
        for i in range(cycles):
            self.pause(sid, i % 2 == 0)
            out = self.py(sid, f"n += 1\nopen('/workspace/log', 'a').write('{i}\\n')\nprint(n)")
            self.assertEqual(out["stdout"], f"{i + 1}\n", out)
        self.assertEqual(self.bash(sid, "wc -l < /workspace/log; tail -1 /workspace/log")
                         ["stdout"], f"{cycles}\n{cycles - 1}\n")

    def test_fork_into_three_independent_sessions(self):
        sid = self.create()
        self.py(sid, "x = 10")
        self.bash(sid, "echo base > /workspace/f.txt")
        r = self.client.post_json(f"/v1/sessions/{sid}/fork", {"count": 3})
        self.assertEqual(r.status, 201, r)
        forks = [f["session_id"] for f in r.json["forks"]]
        self.assertEqual(len(set(forks)), 3, r)
        for f in forks:
            self.addCleanup(lambda f=f: self.client.delete(f"/v1/sessions/{f}"))
        for i, f in enumerate(forks):
            self.assertEqual(self.py(f, f"x += {i}\nprint(x, open('f.txt').read().strip())")
                             ["stdout"], f"{10 + i} base\n")
            self.bash(f, f"echo {i} > /workspace/f.txt")
        self.assertEqual(self.py(sid, "print(x, open('f.txt').read().strip())")["stdout"],
                         "10 base\n", "the source is untouched by its forks")
        listed = {s["session_id"] for s in self.client.get("/v1/sessions").json["sessions"]}
        self.assertTrue(set(forks) <= listed)

    def test_a_named_snapshot_starts_sessions_twice(self):
        sid = self.create()
        self.py(sid, "greeting = 'hi'")
        self.bash(sid, "echo v1 > /workspace/v.txt")
        r = self.client.post_json(f"/v1/sessions/{sid}/snapshots", {"name": "pause-e2e-base"})
        self.assertEqual(r.status, 201, r)
        snap = r.json["snapshot_id"]
        self.addCleanup(lambda: self.client.delete(f"/v1/snapshots/{snap}"))
        self.bash(sid, "echo v2 > /workspace/v.txt")
        listed = self.client.get("/v1/snapshots").json["snapshots"]
        self.assertIn(snap, [s["snapshot_id"] for s in listed])
        for ref in (snap, "pause-e2e-base"):
            new = self.create(snapshot=ref)
            self.assertEqual(self.py(new, "print(greeting, open('v.txt').read().strip())")
                             ["stdout"], "hi v1\n")
        self.assertEqual(self.client.delete(f"/v1/snapshots/{snap}").status, 204)
        self.assertDetail(self.create(expect_status=404, snapshot=snap), 404, contains=snap)

    def test_bad_requests_are_named(self):
        sid = self.create()
        for body, field in (({"memory": "yes"}, "memory"),):
            r = self.client.post_json(f"/v1/sessions/{sid}/pause", body)
            self.assertDetail(r, 422, contains=field)
        for count in (0, 17, "3"):
            r = self.client.post_json(f"/v1/sessions/{sid}/fork", {"count": count})
            self.assertDetail(r, 422, contains="count")
        r = self.client.post_json("/v1/sessions/code-session-" + "0" * 32 + "/pause", {})
        self.assertEqual(r.status, 404, r)
        r = self.client.post_json(f"/v1/sessions/{sid}/resume", {})
        self.assertEqual((r.status, r.json["resumed_from"]), (200, "running"), r)

    def test_a_corrupt_snapshot_fails_the_resume_and_stays(self):
        self.require_host_daemon("rewrites the daemon's file store")
        sid = self.create()
        self.bash(sid, "head -c 300000 /dev/urandom > /workspace/r.bin")
        self.pause(sid, False)
        store = self.daemon.store_dir
        data = None
        for name in os.listdir(store):
            if name.endswith(".json"):
                with open(os.path.join(store, name)) as f:
                    if json.load(f).get("filename") == "snapshot-data:" + sid:
                        data = os.path.join(store, name[:-len(".json")])
        self.assertIsNotNone(data, "the snapshot's tar is a store file")
        with open(data, "rb") as f:
            original = f.read()
        with open(data, "r+b") as f:
            f.seek(len(original) // 2)
            f.write(b"\xff" * 16)
        r = self.client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "true"})
        self.assertDetail(r, 500, contains="corrupt")
        self.assertEqual(self.state(sid), "paused", "the snapshot is kept")
        with open(data, "wb") as f:
            f.write(original)
        self.assertEqual(self.bash(sid, "wc -c < /workspace/r.bin")["stdout"], "300000\n")


class SessionPauseBoundsTest(PauseCase):
    daemon_env = {"MAX_SESSIONS": "1"}

    def test_what_a_sandbox_holds_cannot_grow_a_record_or_the_paused_table(self):
        sid = self.create()
        self.py(sid, "gens = [(i for i in range(3)) for _ in range(500)]\n"
                     "for i in range(500): globals()['g%d' % i] = gens[i]\n"
                     "globals()['n' * 5000] = (i for i in range(1))")
        paused = self.pause(sid, False)
        lost = paused["not_kept"]
        self.assertEqual(len(lost), 101, lost[-3:])
        self.assertRegex(lost[-1], r"^\.\.\. and \d+ more$")
        self.assertTrue(all(len(x) <= 303 for x in lost))
        self.client.delete(f"/v1/sessions/{sid}")
        # Paused sessions hold no slot, but at most 8 times MAX_SESSIONS of them are kept.
        for i in range(8):
            self.pause(self.create(), False)
        last = self.create()
        r = self.pause(last, False, expect_status=503)
        self.assertDetail(r, 503, contains="paused sessions")
        self.assertEqual(self.state(last), "running")


class SessionPauseKeysTest(PauseCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE}

    def test_another_keys_session_and_snapshot_do_not_exist(self):
        alice, bob = (Client(self.host, self.port, self._exchanges,
                             headers={"Authorization": f"Bearer {key}"}) for key in (ALICE, BOB))
        sid = self.create(alice)
        self.py(sid, "secret = 1", client=alice)
        r = alice.post_json(f"/v1/sessions/{sid}/snapshots", {"name": "mine"})
        self.assertEqual(r.status, 201, r)
        snap = r.json["snapshot_id"]
        self.addCleanup(lambda: alice.delete(f"/v1/snapshots/{snap}"))
        for path in ("pause", "resume", "fork", "snapshots"):
            self.assertEqual(bob.post_json(f"/v1/sessions/{sid}/{path}", {}).status, 404, path)
        for ref in (snap, "mine"):
            self.assertEqual(bob.post_json("/v1/sessions", {"snapshot": ref}).status, 404)
        self.assertEqual(bob.get("/v1/snapshots").json["snapshots"], [])
        self.assertEqual(bob.delete(f"/v1/snapshots/{snap}").status, 404)
        self.pause(sid, False, client=alice)
        self.assertEqual(bob.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "true"}).status, 404)
        r = alice.post_json(f"/v1/sessions/{sid}/fork", {"count": 1})
        self.assertEqual(r.status, 201, r)
        fork = r.json["forks"][0]["session_id"]
        self.addCleanup(lambda: alice.delete(f"/v1/sessions/{fork}"))
        self.assertEqual(self.py(fork, "print(secret)", client=alice)["stdout"], "1\n")
        self.assertEqual(bob.post_json(f"/v1/sessions/{fork}/bash", {"cmd": "true"}).status, 404)


class SessionPauseLimitsTest(PauseCase):
    daemon_env = {"SNAPSHOT_MAX_MB": "1"}

    def test_a_snapshot_over_its_bound_is_refused_and_the_session_runs_on(self):
        sid = self.create()
        self.py(sid, "k = 3")
        self.bash(sid, "head -c 3000000 /dev/urandom > /workspace/big.bin")
        r = self.pause(sid, False, expect_status=413)
        self.assertDetail(r, 413, contains="SNAPSHOT_MAX_MB")
        self.assertEqual(self.state(sid), "running")
        self.assertEqual(self.py(sid, "print(k)")["stdout"], "3\n")


class SessionIdleTest(PauseCase):
    daemon_env = {"SESSION_IDLE_PAUSE_SEC": "1", "SESSION_IDLE_SNAPSHOT_SEC": "4"}

    def test_an_idle_session_is_frozen_then_snapshotted_and_the_next_call_resumes_it(self):
        sid = self.create()
        self.py(sid, "w = 'idle'")
        if self.can_freeze():
            self.assertTrue(wait_until(lambda: self.state(sid) == "frozen", 10), self.state(sid))
        self.assertTrue(wait_until(lambda: self.state(sid) == "paused", 20), self.state(sid))
        self.assertEqual(self.py(sid, "print(w)")["stdout"], "idle\n")
        self.assertEqual(self.state(sid), "running")


class SessionRestartTest(PauseCase):
    def test_a_restart_in_the_middle_of_a_session_loses_nothing(self):
        self.require_host_daemon("starts daemons of its own on one file store")
        store = self.shared_store()
        env = {"FILE_STORAGE_DIR": store, "WARM_POOL_SIZE": "0"}
        first = Daemon(env)
        self.addCleanup(first.cleanup)
        first.start()
        a = Client(first.host, first.port, self._exchanges)
        sid = a.post_json("/v1/sessions", {}).json["session_id"]
        self.py(sid, "kept = [1, 2, 3]", client=a)
        self.bash(sid, "echo before > /workspace/r.txt", client=a)
        first.stop()
        second = Daemon(env)
        self.addCleanup(second.cleanup)
        second.start()
        self.addCleanup(second.stop)
        b = Client(second.host, second.port, self._exchanges)
        self.assertEqual(self.state(sid, b), "paused")
        out = self.py(sid, "print(kept, open('r.txt').read().strip())", client=b)
        self.assertEqual(out["stdout"], "[1, 2, 3] before\n")
        self.assertEqual(b.delete(f"/v1/sessions/{sid}").status, 204)
