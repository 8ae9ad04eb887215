"""Several daemon replicas on one cluster (issue #11 item 4, kubernetes only): a session made
through one replica is served by any other, because its state lives in its pod (found by its
`code-interpreter.session` label) and its interpreter is reached through a relay of the serving
replica's own (python_session.cc). These replicas run the default
KUBERNETES_SESSIONS_OUTLIVE_DAEMON=true: a session outlives the replica that made it."""

import re
import time

from harness import (Client, Config, Daemon, E2ETestCase, host_processes_matching, unique_sleep_arg,
                     wait_until)
from test_auth import ALICE, BOB, KEYS_FILE

STATE_LOST = "This session's Python interpreter had stopped"
REPLICA = {"KUBERNETES_SESSIONS_OUTLIVE_DAEMON": "true", "WARM_POOL_SIZE": "0"}


def start_replica(test, env):
    """A daemon of `env` for `test` (stopped and removed after it), and a client of it."""
    d = Daemon(dict(env))
    test.addCleanup(d.cleanup)
    d.start()
    test.addCleanup(d.stop)
    return d, Client(d.host, d.port)


class MultiReplicaSessionTest(E2ETestCase):
    MODE = {}  # the sandbox API (AgentSandboxSessionTest's)

    def setUp(self):
        self.require_spawned("starts replicas of its own")

    def replica(self, **env):
        return start_replica(self, {**REPLICA, **self.MODE, **env})

    def py(self, client, sid, code):
        r = client.post_json(f"/v1/sessions/{sid}/execute", {"code": code})
        self.assertEqual(r.status, 200, r)
        self.assertNotIn(STATE_LOST, r.json["stderr"], "the interpreter's state is kept")
        return r.json

    def bash(self, client, sid, cmd):
        r = client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": cmd})
        self.assertEqual(r.status, 200, r)
        return r.json

    def create(self, client):
        r = client.post_json("/v1/sessions", {"ttl_seconds": 300})
        self.assertEqual(r.status, 201, r)
        return r.json

    def test_a_session_made_on_one_replica_is_served_by_another(self):
        (_, a), (_, b) = self.replica(), self.replica()
        made = self.create(a)
        sid = made["session_id"]
        self.addCleanup(lambda: b.delete(f"/v1/sessions/{sid}"))
        mark = unique_sleep_arg()
        self.py(a, sid, f"x = 41\nimport subprocess\np = subprocess.Popen(['sleep', '{mark}'])")
        self.bash(a, sid, "echo one > /workspace/a.txt")

        on_a = [s for s in a.get("/v1/sessions").json["sessions"] if s["session_id"] == sid]
        on_b = [s for s in b.get("/v1/sessions").json["sessions"] if s["session_id"] == sid]
        self.assertEqual(on_b, on_a, "B lists A's session, with the same times")
        self.assertEqual(on_b[0]["expires_at"], made["expires_at"])
        self.assertEqual(self.py(b, sid, "x + 1")["stdout"], "42\n")
        self.assertEqual(self.bash(b, sid, "cat /workspace/a.txt")["stdout"], "one\n")
        self.assertTrue(host_processes_matching(f"sleep {mark}"),
                        "B's bash call spared the interpreter's program")
        # Back and forth: each replica attaches to the one interpreter again.
        self.assertEqual(self.py(a, sid, "x += 1\nx")["stdout"], "42\n")
        self.assertEqual(self.py(b, sid, "x")["stdout"], "42\n")
        self.assertEqual(self.py(a, sid, "x")["stdout"], "42\n")
        r = b.get(f"/v1/sessions/{sid}/files")
        self.assertEqual(r.status, 200, r)
        self.assertEqual([f["path"] for f in r.json["files"]], ["a.txt"])

        r = b.delete(f"/v1/sessions/{sid}")
        self.assertEqual(r.status, 204, r)
        self.assertTrue(wait_until(lambda: not host_processes_matching(f"sleep {mark}"), 30),
                        "the session's pod is gone with its programs")
        self.assertTrue(wait_until(lambda: sid not in [
            s["session_id"] for s in a.get("/v1/sessions").json["sessions"]], 10),
            "A no longer lists it")
        r = a.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "true"})
        self.assertIn(r.status, (404, 410), r)

    def test_a_session_outlives_the_replica_that_made_it(self):
        old, a = self.replica()
        sid = self.create(a)["session_id"]
        self.py(a, sid, "x = 7")
        old.proc.kill()  # no shutdown at all: the pod is all that is left
        old.proc.wait(10)
        # A replica started afterwards has reaped at its start (the owner's pid is dead): the
        # session pod is spared, and served.
        third, c = self.replica()
        self.assertEqual(self.py(c, sid, "x * 6")["stdout"], "42\n")
        # A clean shutdown leaves the session to the replicas that remain.
        rc, _ = third.stop()
        self.assertEqual(rc, 0)
        _, d = self.replica()
        self.addCleanup(lambda: d.delete(f"/v1/sessions/{sid}"))
        self.assertEqual(self.py(d, sid, "x")["stdout"], "7\n")
        r = d.delete(f"/v1/sessions/{sid}")
        self.assertEqual(r.status, 204, r)

    def test_an_unknown_session_is_404_on_every_replica(self):
        (_, a), (_, b) = self.replica(), self.replica()
        for client in (a, b):
            for sid in ("code-session-" + "0" * 32, "Not_A-Label!", "x" * 100):
                r = client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "true"})
                self.assertEqual(r.status, 404, r)

    def test_another_keys_session_is_404_on_every_replica(self):
        (_, a), (_, b) = (self.replica(API_KEYS_FILE=KEYS_FILE),
                          self.replica(API_KEYS_FILE=KEYS_FILE))
        for c, key in ((a, ALICE), (b, ALICE)):
            c.headers["Authorization"] = f"Bearer {key}"
        sid = self.create(a)["session_id"]
        self.addCleanup(lambda: a.delete(f"/v1/sessions/{sid}"))
        bob = Client(b.host, b.port, headers={"Authorization": f"Bearer {BOB}"})
        # B knows the session only from its pod: the pod says whose it is.
        self.assertNotIn(sid, [s["session_id"] for s in bob.get("/v1/sessions").json["sessions"]])
        r = bob.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "true"})
        self.assertEqual(r.status, 404, r)
        self.assertEqual(self.bash(b, sid, "echo mine")["stdout"], "mine\n")
        self.assertIn(sid, [s["session_id"] for s in b.get("/v1/sessions").json["sessions"]])

    def test_a_session_paused_on_one_replica_resumes_on_another(self):
        # A pod cannot be frozen: pausing snapshots it into the file store the replicas share.
        store = self.shared_store()
        (_, a), (_, b) = self.replica(FILE_STORAGE_DIR=store), self.replica(FILE_STORAGE_DIR=store)
        sid = self.create(a)["session_id"]
        self.addCleanup(lambda: b.delete(f"/v1/sessions/{sid}"))
        self.py(a, sid, "x = 6")
        self.bash(a, sid, "echo paused > /workspace/p.txt")
        r = a.post_json(f"/v1/sessions/{sid}/pause", {"memory": True})
        self.assertEqual((r.status, r.json["state"]), (200, "paused"), r)
        states = {s["session_id"]: s["state"] for s in b.get("/v1/sessions").json["sessions"]}
        self.assertEqual(states.get(sid), "paused", "B lists it paused from the store")
        self.assertEqual(self.py(b, sid, "print(x * 7, open('p.txt').read().strip())")["stdout"],
                         "42 paused\n")
        self.assertEqual(self.py(a, sid, "x")["stdout"], "6\n", "A finds it running through B")


def metric(client, name):
    """A series of /metrics without labels, as a number; None if absent."""
    for line in client.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class AgentSandboxSessionTest(MultiReplicaSessionTest):
    """The same with KUBERNETES_SANDBOX_API=agent-sandbox: a session is a claimed sandbox whose
    claim carries its id (what the other replicas list and find it by)."""

    MODE = {"KUBERNETES_SANDBOX_API": "agent-sandbox"}

    def setUp(self):
        super().setUp()
        # The warm pools (of the other languages' pods) are the deployment's: removed after it.
        self.addCleanup(remove_sandbox_pools, Config.cluster.server.client())


SANDBOX_EXTENSIONS = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/"


def sandbox_items(cluster, plural):
    return cluster.request("GET", SANDBOX_EXTENSIONS + plural).json()["items"]


def remove_sandbox_pools(cluster):
    for pool in sandbox_items(cluster, "sandboxwarmpools"):
        cluster.request("DELETE", SANDBOX_EXTENSIONS + "sandboxwarmpools/" +
                        pool["metadata"]["name"])


class SharedWarmPoolTest(E2ETestCase):
    """KUBERNETES_SHARED_WARM_POOL (issue 36 item 4): two replicas of WARM_POOL_SIZE=2 keep one
    pool of two pods in the namespace, not two each, and each claims pods of it."""

    POOL = {**REPLICA, "KUBERNETES_SHARED_WARM_POOL": "true", "WARM_POOL_SIZE": "2",
            "WARM_POOL_SIZE_BASH": "0", "WARM_POOL_SIZE_JAVASCRIPT": "0",
            "WARM_POOL_SIZE_GO": "0"}

    def setUp(self):
        self.require_spawned("starts replicas of its own")
        self.cluster = Config.cluster.server.client()

    def pool_pods(self):
        """(running, all) unclaimed pods of the shared pools."""
        r = self.cluster.request("GET", "/api/v1/pods?labelSelector=code-interpreter.pool%2C"
                                        "%21code-interpreter.claimed-by")
        items = r.json()["items"]
        return sum(p["status"].get("phase") == "Running" for p in items), len(items)

    def replica(self):
        return start_replica(self, self.POOL)

    def probed(self, daemon):
        """Once the startup self-test's executions (pool claims too) are over."""
        self.assertTrue(wait_until(lambda: re.search(r"language python |startup self-test failed",
                                                     daemon.log_since(0)), 120, 0.2))

    def test_two_replicas_keep_one_pool_and_claim_from_it(self):
        # Pool pods outlive the replicas (the deployment's): removed after them.
        self.addCleanup(self.cluster.request, "DELETE", "/api/v1/namespaces/default/pods"
                        "?labelSelector=code-interpreter.pool&gracePeriodSeconds=0")
        (da, a), (db, b) = self.replica(), self.replica()
        self.probed(da)
        self.probed(db)
        self.assertTrue(wait_until(lambda: self.pool_pods()[0] >= 2, 60, 0.2), self.pool_pods())
        self.assertLessEqual(self.pool_pods()[1], 3, "each replica filled a pool of its own")
        def claims(client):
            return metric(client, "code_interpreter_shared_pool_claims_total")
        before = {"a": claims(a), "b": claims(b)}
        for client in (a, b):
            r = client.post_json("/v1/execute", {"code": "print(6 * 7)"})
            self.assertEqual((r.status, r.json["stdout"]), (200, "42\n"), r)
        # The pool held two pods: each replica's execution claimed one.
        self.assertEqual(claims(a) - before["a"], 1)
        self.assertEqual(claims(b) - before["b"], 1)
        # Refilled to the deployment's size, not twice it.
        self.assertTrue(wait_until(lambda: self.pool_pods()[0] >= 2, 60, 0.2), self.pool_pods())
        time.sleep(1)  # a keeper's next looks add nothing
        self.assertLessEqual(self.pool_pods()[1], 3)


class AgentSandboxTest(E2ETestCase):
    """KUBERNETES_SANDBOX_API=agent-sandbox (issue 36 item 5), on the fake's agent-sandbox
    controller: two replicas of WARM_POOL_SIZE=1 make one SandboxTemplate and one SandboxWarmPool
    of one sandbox (the deployment's size), and every execution claims a sandbox, its claim gone
    when it ends."""

    POOL = {**REPLICA, "KUBERNETES_SANDBOX_API": "agent-sandbox", "WARM_POOL_SIZE": "1",
            "WARM_POOL_SIZE_BASH": "0", "WARM_POOL_SIZE_JAVASCRIPT": "0",
            "WARM_POOL_SIZE_GO": "0"}

    def setUp(self):
        self.require_spawned("starts replicas of its own")
        self.cluster = Config.cluster.server.client()
        # The warm pools are the deployment's, left by its replicas: removed after them.
        self.addCleanup(remove_sandbox_pools, self.cluster)

    def replica(self):
        return start_replica(self, self.POOL)

    def test_two_replicas_claim_sandboxes_of_one_warm_pool(self):
        (da, a), (db, b) = self.replica(), self.replica()
        kept = re.compile(r"SandboxTemplate and SandboxWarmPool (\S+) of 1 sandbox")
        for d in (da, db):
            self.assertTrue(wait_until(lambda: kept.search(d.log_since(0)), 60, 0.2),
                            d.log_since(0))
        names = {kept.search(d.log_since(0)).group(1) for d in (da, db)}
        self.assertEqual(len(names), 1, "each replica made a pool of its own")
        name = names.pop()

        def pool():
            found = [p for p in sandbox_items(self.cluster, "sandboxwarmpools")
                     if p["metadata"]["name"] == name]
            return found[0] if found else {}
        self.assertTrue(wait_until(lambda: pool().get("status", {}).get("readyReplicas") == 1,
                                   60, 0.2), pool())
        self.assertEqual(pool()["spec"]["replicas"], 1, "the size is the deployment's")
        for client in (a, b):
            r = client.post_json("/v1/execute", {"code": "print(6 * 7)"})
            self.assertEqual((r.status, r.json["stdout"]), (200, "42\n"), r)
            r = client.post_json("/v1/execute", {"code": "echo $((6 * 7))", "language": "bash"})
            self.assertEqual((r.status, r.json["stdout"]), (200, "42\n"), r)
        # Each execution's claim went with it; the pool is full again.
        self.assertTrue(wait_until(lambda: not sandbox_items(self.cluster, "sandboxclaims"), 30,
                                   0.2), sandbox_items(self.cluster, "sandboxclaims"))
        self.assertTrue(wait_until(lambda: pool().get("status", {}).get("readyReplicas") == 1,
                                   60, 0.2), pool())
