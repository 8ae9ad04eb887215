"""Recycled local sandboxes (issue 35 item 2, src/runtime/README.md "Recycling"): an execution
sandbox is put back by its init and serves the same API key's next execution, never another
key's; nothing an execution leaves (files, processes, System V IPC, a changed mode) reaches the
next one, and each execution's verdict and usage are its own. Runs with the local backend."""

from harness import LEFTOVER_CHAIN_CODE, Config, E2ETestCase, api_keys_file

ALICE = "alice-" + "c7" * 16
BOB = "bob-" + "c8" * 16
CAROL = "carol-" + "c9" * 16
DAVE = "dave-" + "ca" * 16
KEYS_FILE = api_keys_file(f"alice {ALICE}\nbob {BOB}\ncarol {CAROL}\ndave {DAVE}\n")

# Which sandbox a program runs in: its pid namespace (two sandboxes alive at once never share
# one; init's start time, in ticks, was the same for sandboxes started together), its init's
# start time and its cgroup's path ("/" where the sandbox has a cgroup namespace). A sandbox is
# put back before the execution's answer.
SANDBOX_CODE = ("import os\n"
                "print(os.readlink('/proc/self/ns/pid'), open('/proc/1/stat').read().split()[21], "
                "open('/proc/self/cgroup').read().strip().replace('\\n', ' '))")

# Everything a program can leave behind for the next one in a sandbox of its own.
LEAVE_CODE = r"""
import ctypes, os, subprocess, threading, time
for place in ("/workspace", "/tmp", "/dev/shm", "/home/user"):
    if os.path.isdir(place):
        with open(os.path.join(place, "left-by-before"), "w") as f:
            f.write("secret")
rt = ctypes.CDLL("librt.so.1", use_errno=True)
assert rt.mq_open(b"/left-by-before", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
os.makedirs("/workspace/locked/deeper", exist_ok=True)
open("/workspace/locked/deeper/file", "w").write("x")
os.chmod("/workspace/locked/deeper", 0)
os.chmod("/workspace/locked", 0)
os.chmod("/workspace", 0o700)
os.symlink("/etc/passwd", "/tmp/link")
os.mkfifo("/dev/shm/fifo")
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0x5151, 4096, 0o1600) >= 0
assert libc.semget(0x5252, 1, 0o1600) >= 0
assert libc.msgget(0x5353, 0o1600) >= 0
subprocess.Popen(["sleep", "1000"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    while True:
        try:
            with open("/workspace/ast.py", "w") as f:
                f.write("print('LEAKED FROM THE PREVIOUS EXECUTION')\n")
        except OSError:
            pass
        time.sleep(0.005)
print("left")
"""

FIND_CODE = r"""
import os
found = []
for place in ("/workspace", "/tmp", "/dev/shm", "/dev/mqueue", "/home/user"):
    if os.path.isdir(place):
        found += [os.path.join(place, n) for n in os.listdir(place) if n != "__main__.py"]
for table in ("shm", "sem", "msg"):
    found += [table + ": " + l for l in open("/proc/sysvipc/" + table).read().splitlines()[1:]]
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
found += ["process " + open(f"/proc/{p}/cmdline").read() for p in others
          if os.path.exists(f"/proc/{p}/cmdline")]
print(oct(os.stat("/workspace").st_mode & 0o777), found)
"""


class RecycledSandboxTest(E2ETestCase):
    # No warm pool: each execution takes from the recycle bin when it can.
    daemon_env = {"API_KEYS_FILE": KEYS_FILE, "WARM_POOL_SIZE": "0", "MEMORY_LIMIT_MB": "128",
                  "PIDS_LIMIT": "64"}

    def setUp(self):
        if (Config.expected_backend or "local") != "local":
            self.skipTest("the local backend's recycling (docker: test_docker.py)")
        super().setUp()

    def execute(self, key, code, **fields):
        r = self.client.post_json("/v1/execute", dict(code=code, **fields),
                                  headers={"Authorization": f"Bearer {key}"})
        self.assertEqual(r.status, 200, r)
        return r.json

    def sandbox_of(self, key):
        res = self.execute(key, SANDBOX_CODE)
        self.assertEqual(res["verdict"], "ok", res)
        return res["stdout"].strip()

    def recycles(self):
        """Whether this daemon recycles: its log says so at startup, or why not (no cgroup of
        the sandbox's own, a memory peak that cannot be reset, init the program's user)."""
        said = self.daemon.log_with("execution sandboxes: ")
        self.assertIn("execution sandboxes: ", said)
        return "execution sandboxes: recycled" in said

    def test_a_recycled_sandbox_serves_only_the_client_it_served(self):
        alices = {self.sandbox_of(ALICE)}
        bobs = []
        for _ in range(10):
            bobs.append(self.sandbox_of(BOB))
            if bobs[-1] in bobs[:-1]:
                break
        self.assertFalse(alices & set(bobs), f"bob ran in alice's sandbox: {bobs}")
        again = self.sandbox_of(ALICE)
        if not self.recycles():
            self.assertNotIn(again, alices, "a sandbox was reused without a cgroup of its own")
            return
        self.assertIn(bobs[-1], bobs[:-1], f"bob's sandboxes were never reused: {bobs}")
        self.assertIn(again, alices, "alice's sandbox was not recycled")

    def test_nothing_an_execution_leaves_reaches_the_next(self):
        res = self.execute(CAROL, SANDBOX_CODE + "\n" + LEAVE_CODE)
        self.assertEqual((res["verdict"], res["stdout"].split("\n")[1:]), ("ok", ["left", ""]), res)
        ran_in = {res["stdout"].split("\n")[0]}
        for _ in range(5):
            res = self.execute(CAROL, SANDBOX_CODE + "\n" + FIND_CODE)
            self.assertEqual(res["verdict"], "ok", res)
            self.assertNotIn("LEAKED", res["stdout"] + res["stderr"], res)
            self.assertEqual(res["stdout"].split("\n")[1:], ["0o755 []", ""], res)
            ran_in.add(res["stdout"].split("\n")[0])
        if self.recycles():  # so the checks above looked at a sandbox that had been used
            self.assertEqual(len(ran_in), 1, ran_in)

    def test_the_red_teams_leftover_cannot_reach_the_next_execution(self):
        res = self.execute(DAVE, SANDBOX_CODE + "\n" + LEFTOVER_CHAIN_CODE)
        self.assertEqual((res["verdict"], res["stdout"].split("\n")[1:]),
                         ("ok", ["planted", ""]), res)
        ran_in = {res["stdout"].split("\n")[0]}
        for _ in range(5):
            res = self.execute(DAVE, SANDBOX_CODE + "\n" + FIND_CODE)
            self.assertNotIn("LEAKED", res["stdout"] + res["stderr"], res)
            self.assertEqual((res["verdict"], res["stdout"].split("\n")[1:]),
                             ("ok", ["0o755 []", ""]), res)
            ran_in.add(res["stdout"].split("\n")[0])
        if self.recycles():
            self.assertEqual(len(ran_in), 1, ran_in)

    def test_each_execution_has_its_own_verdict_and_usage(self):
        limited = not self.cgroup_downgraded()
        ran_in = []

        def execute(code, **fields):
            res = self.execute(ALICE, SANDBOX_CODE[:-1] + ", flush=True)\n" + code, **fields)
            ran_in.append(res["stdout"].split("\n")[0])
            return res

        res = execute("x = bytearray(400 << 20)\nx[::4096] = b'1' * len(x[::4096])",
                      timeout_ms=30000)
        self.assertEqual(res["verdict"], "memory_limit" if limited else "error", res)
        res = execute("import os\nfor _ in range(100):\n"
                      "    os.waitpid(os.fork() or os._exit(0), 0)\nprint('forked')",
                      timeout_ms=20000)
        self.assertEqual((res["verdict"], res["stdout"].split("\n")[1]), ("ok", "forked"), res)
        res = execute("import os, time\npids = []\n"
                      "while True:\n    p = os.fork()\n    if p == 0:\n"
                      "        time.sleep(30)\n        os._exit(0)\n    pids.append(p)",
                      timeout_ms=20000)
        self.assertIn(res["verdict"], ("pids_limit", "error"), res)
        for _ in range(3):
            res = execute("print(sum(range(10)))")
            self.assertEqual((res["verdict"], res["stdout"].split("\n")[1]), ("ok", "45"), res)
            self.assertLess(res["usage"]["cpu_ms"], 2000, res)
            self.assertLess(res["usage"]["max_rss_kb"], 200 << 10, res)
        if self.recycles():  # the verdicts above were told apart in one sandbox
            self.assertEqual(len(set(ran_in)), 1, ran_in)


class RecycledBeforeThePoolTest(E2ETestCase):
    """With a warm pool, a client with an API key still gets its own sandbox back: the pool's
    sandboxes are for any client, so its put-back one is taken first (Executor::TakeRecycled)."""
    daemon_env = {"API_KEYS_FILE": KEYS_FILE, "WARM_POOL_SIZE": "2"}

    def setUp(self):
        if (Config.expected_backend or "local") != "local":
            self.skipTest("the local backend's recycling")
        super().setUp()

    def test_a_key_gets_its_own_sandbox_before_a_pooled_one(self):
        said = self.daemon.log_with("execution sandboxes: ")
        ran_in = []
        for key in (ALICE, ALICE, BOB, ALICE):
            r = self.client.post_json("/v1/execute", {"code": SANDBOX_CODE},
                                      headers={"Authorization": f"Bearer {key}"})
            self.assertEqual((r.status, r.json["verdict"]), (200, "ok"), r)
            ran_in.append(r.json["stdout"])
        self.assertNotIn(ran_in[2], (ran_in[0], ran_in[3]), f"bob ran in alice's: {ran_in}")
        if "execution sandboxes: recycled" in said:
            self.assertEqual(len({ran_in[0], ran_in[1], ran_in[3]}), 1, ran_in)
