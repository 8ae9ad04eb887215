"""The Docker backend as dockerd sees it (issue 4, "Done when"): the executor container carries
every hardening option, a daemon killed mid-execution leaves no container behind once a new
daemon's reaper has run, a missing executor image is pulled (at startup, and again by the
watchdog when it disappears) from tests/docker/fake_registry.py, and a daemon reaches dockerd over
TLS with a client certificate. Talks to the Engine API over its unix socket (no docker CLI).
Runs only with --backend docker."""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

from harness import (LEFTOVER_CHAIN_CODE, Client, Config, Daemon, E2ETestCase, api_keys_file,
                     wait_until)

SANDBOX_USER = "65532:65532"
REAP_TIMEOUT_S = 15.0
ZYGOTE_SOURCE_MARK = "def _ci_zygote()"  # in the Docker fork server's arguments


def sleeping_program(seconds):
    """(code, marker): a program that sleeps about `seconds` in a child whose arguments hold
    `marker`, unique on this host. A forked program (the agent's fork server) has the server's
    arguments, not its own: its child is what `ps` tells apart."""
    marker = f"{seconds}.{uuid.uuid4().int % 10**9:09d}"
    return f"import subprocess\nsubprocess.run(['sleep', '{marker}'])", f"sleep {marker}"
FAKE_REGISTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docker",
                             "fake_registry.py")
PULL_TIMEOUT_S = 60.0


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 to the Engine over its unix socket."""

    def __init__(self, path, timeout=30.0):
        super().__init__("docker", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def docker_socket_path():
    """The Engine's unix socket (DOCKER_HOST or the default); None for a remote Engine."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return "/var/run/docker.sock"
    if host.startswith("unix://"):
        return host[len("unix://"):]
    return None


class Engine:
    def __init__(self, path):
        self.path = path

    def request(self, method, path):
        conn = UnixHTTPConnection(self.path)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            body = r.read()
            return r.status, (json.loads(body) if body else None)
        finally:
            conn.close()

    def killed(self, since, until):
        """Ids of the containers the Engine killed between two Unix times: a `kill` event, which a
        forced removal of a running container starts with (its state stays "running", not
        "removing", until the kill is done)."""
        filters = urllib.parse.quote(json.dumps({"type": ["container"], "event": ["kill"]}))
        conn = UnixHTTPConnection(self.path)
        try:
            conn.request("GET", f"/events?since={since:.6f}&until={until:.6f}&filters={filters}")
            r = conn.getresponse()
            body = r.read().decode()
            if r.status != 200:
                raise AssertionError(f"GET /events: HTTP {r.status} {body}")
        finally:
            conn.close()
        return {json.loads(line)["id"] for line in body.splitlines() if line.strip()}

    def containers(self, *labels, removing=True):
        """Ids of the containers (running or not) carrying all the label filters; without
        `removing`, not those the Engine is removing already (a removal the daemon asked for
        before it died goes on without it)."""
        filters = urllib.parse.quote(json.dumps({"label": list(labels)}))
        status, body = self.request("GET", f"/containers/json?all=1&filters={filters}")
        if status != 200:
            raise AssertionError(f"GET /containers/json: HTTP {status} {body}")
        return [c["Id"] for c in body if removing or c.get("State") != "removing"]

    def inspect(self, cid):
        """The inspect document, or None when the container does not exist."""
        status, body = self.request("GET", f"/containers/{cid}/json")
        if status == 404:
            return None
        if status != 200:
            raise AssertionError(f"GET /containers/{cid[:12]}/json: HTTP {status} {body}")
        return body

    def processes(self, cid):
        """Each process of container `cid` as "PID PPID ARGS..." (host pids)."""
        status, body = self.request("GET", f"/containers/{cid}/top?ps_args=-eo%20pid,ppid,args")
        if status != 200:
            return []
        return [" ".join(p) for p in body.get("Processes") or []]

    def remove(self, cid):
        self.request("DELETE", f"/containers/{cid}?force=1&v=1")


def owner_label(pid):
    """<hostname>@<pid namespace inode>/<pid> (src/docker/reaper.h) of a daemon spawned here."""
    ns = os.stat("/proc/self/ns/pid").st_ino
    return f"code-interpreter.owner={socket.gethostname()}@{ns}/{pid}"


class DockerHardeningReportTest(E2ETestCase):
    """/health on docker lists what the containers really get, each measure once (issue 9: it
    claimed a CPU cap the containers did not have, cpu.cfs_quota_us -1, and two seccomp lines)."""
    daemon_env = {"CPU_QUOTA_PERCENT": "50"}

    def setUp(self):
        if Config.expected_backend != "docker":
            self.skipTest("runs with --backend docker only (the daemon's EXECUTOR_BACKEND)")
        super().setUp()

    def test_reported_cpu_cap_and_seccomp_hold_inside_the_container(self):
        enforced = self.client.get("/health").json["hardening"]["enforced"]
        self.assertEqual(len(enforced), len(set(enforced)), enforced)
        self.assertIn("CPU cap 50% (docker CpuQuota)", enforced)
        self.assertEqual([e for e in enforced if e.startswith("seccomp")],
                         ["seccomp (default profile)"])
        res = self.execute(
            "import os\n"
            "cg = '/sys/fs/cgroup'\n"
            "if os.path.exists(cg + '/cpu.max'): print(open(cg + '/cpu.max').read().strip())\n"
            "else: print(open(cg + '/cpu/cpu.cfs_quota_us').read().strip(),"
            " open(cg + '/cpu/cpu.cfs_period_us').read().strip())\n"
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')][0])\n")
        self.assertEqual(res.get("stdout"), "50000 100000\n2\n", res)


ALICE = "alice-" + "d4" * 16
BOB = "bob-" + "e5" * 16
CAROL = "carol-" + "f6" * 16  # the red team's chain: containers of her own, apart from alice's
RECYCLE_KEYS_FILE = api_keys_file(f"alice {ALICE}\nbob {BOB}\ncarol {CAROL}\n")
# The executor container's id as its own cgroup names it (cgroup v1: the host's cgroup namespace).
CONTAINER_ID_CODE = ("import re\n"
                     "m = re.search(r'[0-9a-f]{64}', open('/proc/self/cgroup').read())\n"
                     "print(m.group(0) if m else 'unknown')")


class RecycledPerClientTest(E2ETestCase):
    """Issue #30 item 1: a container recycled after one client's execution runs only that
    client's programs again (src/container/recycle_bin.h), never another API key's. No warm pool:
    each execution takes from the recycle bin when it can."""

    daemon_env = {"API_KEYS_FILE": RECYCLE_KEYS_FILE, "WARM_POOL_SIZE": "0"}

    def setUp(self):
        if Config.expected_backend != "docker" or docker_socket_path() is None:
            self.skipTest("the host's dockerd on its unix socket only (where containers are "
                          "recycled: their cgroups are readable here)")
        super().setUp()
        self.require_host_daemon("a daemon in a container does not read its sandboxes' cgroups, "
                                 "so it recycles none")

    def container_of(self, key):
        r = self.client.post_json("/v1/execute", {"code": CONTAINER_ID_CODE},
                                  headers={"Authorization": f"Bearer {key}"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["verdict"], "ok", r.json)
        cid = r.json["stdout"].strip()
        self.assertNotEqual(cid, "unknown", "no container id in /proc/self/cgroup")
        return cid

    def test_a_recycled_container_serves_only_the_client_it_served(self):
        alices = {self.container_of(ALICE)}
        # Bob until he gets one of his own containers back (the bin hands out its oldest first:
        # alice's, were it shared).
        bobs = []
        for _ in range(20):
            time.sleep(0.5)
            bobs.append(self.container_of(BOB))
            if bobs[-1] in bobs[:-1]:
                break
        self.assertFalse(alices & set(bobs), f"bob ran in alice's container: {bobs}")
        self.assertIn(bobs[-1], bobs[:-1], f"bob's containers were never reused: {bobs}")
        # And alice gets hers back: recycling is on, so the first assertion means something.
        self.assertIn(self.container_of(ALICE), alices, "alice's container was not recycled")

    def test_a_leftover_cannot_reach_the_next_execution(self):
        carol = {"Authorization": f"Bearer {CAROL}"}
        r = self.client.post_json("/v1/execute", {"code": LEFTOVER_CHAIN_CODE}, headers=carol)
        self.assertEqual((r.status, r.json.get("stdout")), (200, "planted\n"), r)
        for _ in range(10):  # her next executions, in her recycled containers
            time.sleep(0.3)
            r = self.client.post_json("/v1/execute", {
                "code": "import os\nprint(os.path.exists('/workspace/ast.py'), "
                        "[p for p in os.listdir('/proc') if p.isdigit()])"}, headers=carol)
            self.assertEqual(r.status, 200, r)
            self.assertNotIn("LEAKED", r.json["stdout"] + r.json["stderr"], r.json)
            self.assertTrue(r.json["stdout"].startswith("False "), r.json)


class DockerBackendTest(E2ETestCase):
    def setUp(self):
        if Config.expected_backend != "docker":
            self.skipTest("runs with --backend docker only (the daemon's EXECUTOR_BACKEND)")
        path = docker_socket_path()
        if path is None:
            self.skipTest(f"DOCKER_HOST={os.environ.get('DOCKER_HOST')}: not a local unix socket")
        self.engine = Engine(path)
        super().setUp()

    def run_in_thread(self, client, code, timeout_ms):
        """POSTs /v1/execute in a thread; returns (thread, box) with box['res'] or box['error']."""
        box = {}

        def go():
            try:
                box["res"] = client.post_json("/v1/execute", {"code": code,
                                                              "timeout_ms": timeout_ms},
                                              timeout=timeout_ms / 1000 + 30)
            except Exception as e:  # noqa: BLE001 - the killed-daemon tests expect this
                box["error"] = e

        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t, box

    def running_program_container(self, pid, marker):
        """The id of the executor container of daemon `pid` whose processes show `marker`
        (sleeping_program's)."""
        for cid in self.engine.containers("app=code-interpreter", owner_label(pid)):
            if any(marker in p for p in self.engine.processes(cid)):
                return cid
        return None

    def setting(self, daemon, name, default):
        return int(daemon.env().get(name) or default)

    # -- hardening ------------------------------------------------------------------------------

    def test_executor_container_is_hardened(self):
        self.require_host_daemon("needs the daemon's pid (the containers' owner label)")
        code, marker = sleeping_program(4)
        t, box = self.run_in_thread(self.client, code, 10000)
        cid = wait_until(lambda: self.running_program_container(self.daemon.pid, marker)
                         or (not t.is_alive() and "done"), 10, interval=0.1)
        self.assertTrue(cid and cid != "done",
                        f"no container of owner {owner_label(self.daemon.pid)} runs the program "
                        f"(execution: {box})")
        info = self.engine.inspect(cid)
        self.assertIsNotNone(info, f"container {cid[:12]} vanished while the program ran")
        agent = (info["Config"].get("Labels") or {}).get("code-interpreter.agent") or "\0"
        procs = self.engine.processes(cid)
        # The agent's fork server (python_program.cc) outlives executions by design; a program
        # forked from it carries the same arguments: it is the parent of the marked child.
        program = {p.split()[1] for p in procs if marker in p}
        server = {p.split()[0] for p in procs if ZYGOTE_SOURCE_MARK in p} - program
        during = {p.split()[0] for p in procs if agent not in p} - server
        hc, cfg = info["HostConfig"], info["Config"]
        diag = json.dumps({"HostConfig": hc, "Config.User": cfg.get("User"),
                           "Config.Labels": cfg.get("Labels")}, indent=1)[:6000]

        self.assertIn("ALL", [c.upper() for c in hc.get("CapDrop") or []], diag)
        self.assertFalse(hc.get("CapAdd"), diag)
        self.assertFalse(hc.get("Privileged"), diag)
        sec = hc.get("SecurityOpt") or []
        self.assertTrue(any(o in ("no-new-privileges", "no-new-privileges:true",
                                  "no-new-privileges=true") for o in sec), diag)
        seccomp = [o for o in sec if o.startswith("seccomp=") or o.startswith("seccomp:")]
        self.assertEqual(len(seccomp), 1, diag)
        profile = seccomp[0][len("seccomp="):]
        self.assertNotIn(profile, ("unconfined", ""), diag)
        self.assertIn("defaultAction", profile, f"not an inline profile: {profile[:300]}")
        self.assertEqual(hc.get("NetworkMode"), "none", diag)
        self.assertIs(hc.get("ReadonlyRootfs"), True, diag)
        self.assertEqual(hc.get("PidsLimit"), self.setting(self.daemon, "PIDS_LIMIT", 64), diag)
        mem = self.setting(self.daemon, "MEMORY_LIMIT_MB", 256) << 20
        self.assertEqual(hc.get("Memory"), mem, diag)
        self.assertEqual(hc.get("MemorySwap"), mem, diag)
        ulimits = {u["Name"]: u for u in hc.get("Ulimits") or []}
        self.assertIn("cpu", ulimits, diag)
        self.assertEqual(ulimits["cpu"]["Soft"],
                         self.setting(self.daemon, "CPU_TIME_LIMIT_SEC", 5), diag)
        tmpfs = hc.get("Tmpfs") or {}
        for mount in ("/workspace", "/tmp"):
            self.assertIn(mount, tmpfs, diag)
            self.assertIn("size=", tmpfs[mount], diag)
        self.assertEqual(cfg.get("User"), SANDBOX_USER, diag)
        labels = cfg.get("Labels") or {}
        self.assertEqual(labels.get("app"), "code-interpreter", diag)
        self.assertEqual(labels.get("component"), "executor", diag)
        self.assertTrue(labels.get("code-interpreter.expires-at", "").isdigit(), diag)
        self.assertGreater(int(labels["code-interpreter.expires-at"]), time.time(), diag)

        t.join(30)
        self.assertFalse(t.is_alive(), "the execution did not answer")
        self.assertIn("res", box, box)
        self.assertEqual(box["res"].status, 200, box["res"])
        self.assertEqual(box["res"].json.get("verdict"), "ok", box["res"])
        # Removed, or recycled (src/agent/recycle.h): then none of the execution's processes is
        # left (the agent and the next execution's driver waiting for its go may be).
        def ended():
            if self.engine.inspect(cid) is None:
                return True
            left = {p.split()[0] for p in self.engine.processes(cid)}
            return not (left & during)
        self.assertTrue(wait_until(ended, 10, interval=0.1),
                        f"container {cid[:12]} still runs {self.engine.processes(cid)} after the "
                        "execution ended")

    # -- reaper ---------------------------------------------------------------------------------

    def start_daemon(self, overrides):
        self.require_host_daemon("starts and kills daemons of its own")
        d = Daemon(overrides)
        self.addCleanup(d.cleanup)
        self.addCleanup(lambda: d.alive() and d.stop())
        d.start()
        return d

    def kill_mid_execution_then_restart(self, overrides, expect_at_least):
        old_started = time.time()
        old = self.start_daemon(overrides)
        old_owner = owner_label(old.pid)
        # The startup language probes run in containers of their own, destroyed by the daemon:
        # start once they are done, so that every container left behind is one the kill strands.
        probed = wait_until(lambda: re.search(r"info +language python |startup self-test failed",
                                              old.log_since(0)), 30, interval=0.1)
        self.assertTrue(probed and "self-test failed" not in probed.group(0),
                        f"the language probes did not finish\n{old.log_since(0, tail=40)}")
        client = Client(old.host, old.port, self._exchanges)
        code, marker = sleeping_program(60)
        t, box = self.run_in_thread(client, code, 60000)
        ids = []

        def leftover_ids():
            ids[:] = self.engine.containers("app=code-interpreter", old_owner)
            return len(ids) >= expect_at_least and self.running_program_container(old.pid, marker)

        try:
            self.assertTrue(wait_until(leftover_ids, 20, interval=0.2),
                            f"{len(ids)} container(s) of {old_owner}, want {expect_at_least} "
                            f"with one running the program (execution: {box})\n"
                            f"--- daemon log ---\n{old.log_since(0, tail=40)}")
            old.proc.kill()  # SIGKILL: no cleanup
            old.proc.wait(10)
            t.join(10)
            self.assertNotIn("res", box, "the execution answered although the daemon was killed")
            left = self.engine.containers("app=code-interpreter", old_owner, removing=False)
            self.assertGreaterEqual(len(left), expect_at_least,
                                    "the killed daemon's containers are already gone: this test "
                                    "proves nothing")

            # A removal the killed daemon had asked for goes on without it: such a container is
            # not the reaper's to remove (a language probe's, whose removal may still be in
            # flight when the probes are logged).
            new_started = time.time()
            removing = self.engine.killed(old_started, new_started)
            new = self.start_daemon(overrides)
            self.assertNotEqual(new.pid, old.pid)
            reaped = wait_until(
                lambda: not self.engine.containers("app=code-interpreter", old_owner),
                REAP_TIMEOUT_S, interval=0.25)
            self.assertTrue(reaped, f"still there {REAP_TIMEOUT_S:.0f} s after the restart: "
                                    f"{self.engine.containers('app=code-interpreter', old_owner)}"
                                    f"\n--- new daemon log ---\n{new.log_since(0, tail=40)}")
            log = new.log_since(0)
            stranded = [cid for cid in left if cid not in removing]
            self.assertGreaterEqual(len(stranded), 1, "no container was left to the reaper")
            for cid in stranded:  # removed by the new daemon's reaper, not by anything else
                self.assertIn(f"reaper: removed container {cid[:12]} (left by a daemon that is "
                              f"gone)", log)
            self.assertTrue(Client(new.host, new.port).health_ok(), "the new daemon is unhealthy")
            rc, _ = new.stop()
            self.assertEqual(rc, 0, f"the new daemon's exit code after SIGTERM\n"
                                    f"--- log ---\n{new.log_since(0, tail=40)}")
        finally:
            # Whatever happened, leave nothing of the killed daemon on the dockerd.
            for cid in self.engine.containers("app=code-interpreter", old_owner):
                self.engine.remove(cid)

    def test_killed_daemon_leaves_no_container_after_restart(self):
        self.kill_mid_execution_then_restart({"WARM_POOL_SIZE": "0"}, expect_at_least=1)

    def test_killed_daemon_leaves_no_pooled_container_after_restart(self):
        # The warm pool wraps every backend: two ready containers plus the executing one.
        self.kill_mid_execution_then_restart({"WARM_POOL_SIZE": "2"}, expect_at_least=3)

    # -- executor image pull and watchdog -------------------------------------------------------

    def start_registry(self, *args):
        """tests/docker/fake_registry.py on a free port; returns "127.0.0.1:<port>"."""
        proc = subprocess.Popen([sys.executable, FAKE_REGISTRY, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)

        def stop():
            proc.terminate()
            proc.wait(10)
            proc.stdout.close()

        self.addCleanup(stop)
        line = proc.stdout.readline()
        m = re.match(r"listening on (\d+)", line)
        self.assertTrue(m, f"fake registry did not start: {line!r}")
        return f"127.0.0.1:{m.group(1)}"

    def image_present(self, ref):
        status, _ = self.engine.request("GET", f"/images/{ref}/json")
        return status == 200

    def remove_image(self, ref):
        self.engine.request("DELETE", f"/images/{ref}?force=1")

    def image_daemon(self, ref):
        """A daemon on `ref` whose image watchdog looks every 2 s (the default is 60)."""
        self.remove_image(ref)
        self.addCleanup(self.remove_image, ref)
        self.assertFalse(self.image_present(ref), f"{ref} could not be removed before the test")
        d = self.start_daemon({"PYTHON_EXECUTOR_DOCKER_IMAGE": ref,
                               "PYTHON_EXECUTOR_DOCKER_IMAGE_CHECK_INTERVAL_SEC": "2",
                               "HEALTH_CHECK_INTERVAL_SEC": "1", "WARM_POOL_SIZE": "0"})
        return d, Client(d.host, d.port, self._exchanges)

    @staticmethod
    def health(client):
        return client.get("/health").json

    def test_missing_image_is_pulled_at_startup_and_again_after_removal(self):
        # 4 MiB served in 64 KiB pieces 150 ms apart: a pull of ~10 s, long enough to see it and
        # to get a byte-count line (one per 5 s at most).
        ref = self.start_registry("--layer-kb", "4096", "--delay-ms", "150") + "/tiny:v1"
        d, client = self.image_daemon(ref)

        pulling = wait_until(lambda: "pulling it" in (self.health(client)["message"] or ""), 10,
                             interval=0.1)
        self.assertTrue(pulling, f"/health never said the image is being pulled: "
                                 f"{self.health(client)}\n{d.log_since(0, tail=30)}")
        self.assertIn(f"Executor image {ref} not available locally", self.health(client)["message"])
        # An execution meanwhile is refused at once (no hang) with api.md's capacity answer.
        t0 = time.monotonic()
        res = client.post_json("/v1/execute", {"code": "print(1)"}, timeout=30)
        self.assertLess(time.monotonic() - t0, 10, "the execution waited for the pull")
        self.assertEqual(res.status, 503, res)
        self.assertEqual(res.json["detail"], f"Executor capacity unavailable (image): Executor "
                                             f"image {ref} not available locally: pulling it "
                                             f"(progress in /health and the log)")
        self.assertEqual(res.header("Retry-After"), "10")

        ok = wait_until(lambda: self.health(client)["status"] == "ok", PULL_TIMEOUT_S,
                        interval=0.2)
        self.assertTrue(ok, f"/health after the pull: {self.health(client)}\n"
                            f"{d.log_since(0, tail=40)}")
        self.assertTrue(self.image_present(ref))
        log = d.log_since(0)
        self.assertIn(f"pulling executor image {ref}", log)
        self.assertRegex(log, rf"pulling {re.escape(ref)}: layer [0-9a-f]{{12}}: Pulling fs layer")
        self.assertRegex(log, rf"pulling {re.escape(ref)}: layer [0-9a-f]{{12}}: Pull complete")
        self.assertRegex(log, rf"pulling {re.escape(ref)}: [0-9.]+ [kM]?B of [0-9.]+ [kM]?B "
                              rf"downloaded")
        self.assertIn(f"pulled executor image {ref}", log)
        progress_lines = len(re.findall(rf"pulling {re.escape(ref)}: .* downloaded, \d+ of \d+ "
                                        rf"layers complete", log))
        self.assertLessEqual(progress_lines, 3, f"more byte count lines than one per 5 s:\n{log}")

        # Removed while the daemon runs: the watchdog (every 2 s here) pulls it again.
        mark = d.log_len()
        self.remove_image(ref)
        self.assertFalse(self.image_present(ref))
        again = wait_until(lambda: f"pulled executor image {ref}" in d.log_since(mark),
                           PULL_TIMEOUT_S, interval=0.2)
        self.assertTrue(again, f"not pulled again after its removal\n{d.log_since(mark)}")
        self.assertIn(f"executor image {ref} is not available locally: pulling it",
                      d.log_since(mark))
        self.assertTrue(self.image_present(ref))
        self.assertTrue(wait_until(lambda: self.health(client)["status"] == "ok", 5,
                                   interval=0.2), self.health(client))

    def test_pull_error_is_logged_and_named_by_health(self):
        ref = self.start_registry() + "/nosuch:v1"  # the registry answers 404 NAME_UNKNOWN
        d, client = self.image_daemon(ref)
        failed = wait_until(lambda: "the pull failed" in (self.health(client)["message"] or ""),
                            PULL_TIMEOUT_S, interval=0.2)
        health = self.health(client)
        self.assertTrue(failed, f"/health: {health}\n{d.log_since(0, tail=30)}")
        self.assertEqual(health["status"], "error")
        self.assertIn(f"Executor image {ref} not available locally: the pull failed:",
                      health["message"])
        self.assertIn("repository name not known to registry", health["message"])
        self.assertIn("packaging/executor-image/build.sh", health["message"])
        self.assertRegex(d.log_since(0), rf"pulling executor image {re.escape(ref)} failed after "
                                         rf"\d+ s: .*repository name not known to registry.*"
                                         rf"packaging/executor-image/build.sh")
        t0 = time.monotonic()
        res = client.post_json("/v1/execute", {"code": "print(1)"}, timeout=30)
        self.assertEqual(res.status, 503, res)
        self.assertIn("the pull failed", res.json["detail"])
        self.assertLess(time.monotonic() - t0, 10, "the execution hung on the missing image")
        # The watchdog tries again (every 2 s here) without repeating the error line each time.
        self.assertTrue(wait_until(lambda: f"pulling executor image {ref} failed again"
                                   in d.log_since(0), 15, interval=0.2), d.log_since(0, tail=30))
        self.assertEqual(d.log_since(0).count(f"pulling executor image {ref} failed after"), 1)
    # -- TLS ------------------------------------------------------------------------------------

    def test_daemon_over_tls_with_client_certificate(self):
        """A daemon whose Engine is dockerd's TLS listener (tests/docker/start-dockerd.sh):
        DOCKER_TLS_VERIFY with the test client certificate; stdin reaches EOF over TLS."""
        self.require_host_daemon("starts a daemon of its own")
        tls_dir = os.environ.get("DOCKER_TLS_DIR") or "/tmp/code-interpreter-tls"
        try:
            with open(os.path.join(tls_dir, "host")) as f:
                host = f.read().strip()
        except OSError:
            self.skip_or_fail(f"no dockerd TLS listener ({tls_dir}/host is missing; "
                              f"tests/docker/start-dockerd.sh makes it)")
        d = self.start_daemon({"DOCKER_HOST": host, "DOCKER_TLS_VERIFY": "1",
                               "DOCKER_CERT_PATH": os.path.join(tls_dir, "client"),
                               "WARM_POOL_SIZE": "0"})
        client = Client(d.host, d.port, self._exchanges)
        self.assertTrue(client.health_ok(), f"unhealthy over TLS\n{d.log_since(0, tail=40)}")
        r = client.post_json("/v1/execute", {"code": "import sys\nprint(len(sys.stdin.read()))",
                                             "stdin": "x" * 100000, "timeout_ms": 20000},
                             timeout=60)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json["stdout"], r.json["exit_code"]), ("100000\n", 0), r)
