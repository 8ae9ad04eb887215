"""API keys (docs/api.md "API keys", issue #12 item 6): with API_KEYS_FILE every endpoint but the
probes needs `Authorization: Bearer KEY`; a missing, malformed or wrong key is a 401 with a
`WWW-Authenticate: Bearer` challenge and a `detail`; files and sessions belong to the key that
made them (another key's are 404, as ids that do not exist); the file is re-read while the
daemon runs; keys never reach the log."""

import atexit
import json
import os
import shutil
import tempfile
import threading

from harness import Client, E2ETestCase, wait_until

ALICE = "alice-" + "a1" * 16
BOB = "bob-" + "b2" * 16
CAROL = "carol-" + "c3" * 16
KEYS_DIR = tempfile.mkdtemp(prefix="ci-e2e-keys-")
atexit.register(shutil.rmtree, KEYS_DIR, True)
KEYS_FILE = os.path.join(KEYS_DIR, "api-keys")
KEYS = f"# e2e\nalice {ALICE}\nbob\t{BOB}  # second client\n"


def write_keys(text):
    """Replaced whole (written aside, renamed), readable by a daemon running as another user."""
    tmp = KEYS_FILE + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, KEYS_FILE)


write_keys(KEYS)
os.chmod(KEYS_DIR, 0o755)
# Keys with limits of their own (issue #30 item 6): alice may run one execution at a time and
# keep 1 MB of files; bob has the defaults.
LIMITS_FILE = os.path.join(KEYS_DIR, "api-keys-limits")
with open(LIMITS_FILE, "w") as _f:
    _f.write(f"alice {ALICE} executions=1 files_mb=1\nbob {BOB}\n")
os.chmod(LIMITS_FILE, 0o644)

OPEN = {("GET", "/health"), ("GET", "/ready"), ("GET", "/openapi.json"), ("GET", "/metrics")}
SAMPLE_IDS = {"{file_id}": "0b0f2e0c-1d2c-4c3b-9a4d-5e6f7a8b9c0d",
              "{session_id}": "code-session-" + "0" * 32}


class ApiKeyCase(E2ETestCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE}

    def setUp(self):
        super().setUp()
        self.alice = Client(self.host, self.port, self._exchanges,
                            headers={"Authorization": f"Bearer {ALICE}"})
        self.bob = Client(self.host, self.port, self._exchanges,
                          headers={"Authorization": f"Bearer {BOB}"})

    def assertUnauthorized(self, r, wrong_key):
        self.assertDetail(r, 401)
        challenge = r.header("WWW-Authenticate") or ""
        self.assertTrue(challenge.startswith("Bearer realm="), r)
        self.assertEqual('error="invalid_token"' in challenge, wrong_key, r)

    def upload(self, client, name, data):
        ctype, body = client.multipart([("file", name, data, None)])
        r = client.request("POST", "/v1/files", body=body, headers={"Content-Type": ctype})
        self.assertEqual(r.status, 201, r)
        return r.json["file_id"]


class ApiKeyTest(ApiKeyCase):
    def routes(self):
        """Every (method, path) of the API, from its own description."""
        r = self.client.get("/openapi.json")
        self.assertEqual(r.status, 200, "the description is open")
        out = []
        for path, ops in r.json["paths"].items():
            for method in ops:
                concrete = path
                for param, value in SAMPLE_IDS.items():
                    concrete = concrete.replace(param, value)
                out.append((method.upper(), concrete))
        self.assertGreater(len(out), 15)
        return out

    def test_every_endpoint_but_the_probes_needs_a_key(self):
        wrong = Client(self.host, self.port, self._exchanges,
                       headers={"Authorization": "Bearer nobody-0123456789abcdef"})
        basic = Client(self.host, self.port, self._exchanges,
                       headers={"Authorization": f"Basic {ALICE}"})
        for method, path in self.routes():
            if (method, path) in OPEN:
                continue
            body = b"{}" if method == "POST" else None
            for client, wrong_key in ((self.client, False), (wrong, True), (basic, False)):
                with self.subTest(method=method, path=path, key=wrong_key):
                    r = client.request(method, path, body=body,
                                       headers={"Content-Type": "application/json"})
                    self.assertUnauthorized(r, wrong_key)

    def test_the_probes_are_open(self):
        for path in ("/health", "/ready", "/openapi.json", "/metrics"):
            self.assertEqual(self.client.get(path).status, 200, path)

    def test_a_key_works_everywhere(self):
        self.assertEqual(self.alice.get("/v1/languages").status, 200)
        r = self.alice.post_json("/v1/execute", {"code": "print(6 * 7)"})
        self.assertEqual((r.status, r.json["stdout"]), (200, "42\n"), r)
        res = self.alice.sse("/v1/execute/stream", {"code": "print('streamed')"})
        self.assertEqual(res.status, 200)
        self.assertEqual(res.text("stdout"), "streamed\n")

    def test_files_belong_to_their_key(self):
        mine = self.upload(self.alice, "alice.txt", b"alice's data")
        self.assertIn(mine, [f["file_id"] for f in self.alice.get("/v1/files").json["files"]])
        self.assertNotIn(mine, [f["file_id"] for f in self.bob.get("/v1/files").json["files"]])
        self.assertDetail(self.bob.get(f"/v1/files/{mine}"), 404,
                          f"File with ID '{mine}' not found")
        self.assertDetail(self.bob.delete(f"/v1/files/{mine}"), 404)
        r = self.bob.post_json("/v1/execute", {"code": "print(open('a.txt').read())",
                                               "files": [{"path": "a.txt", "file_id": mine}]})
        self.assertDetail(r, 404, contains=mine)
        r = self.alice.post_json("/v1/execute", {"code": "print(open('a.txt').read())\n"
                                                         "_ = open('out.txt', 'w').write('made')",
                                                 "files": [{"path": "a.txt", "file_id": mine}]})
        self.assertEqual((r.status, r.json["stdout"]), (200, "alice's data\n"), r)
        made = {f["path"]: f["file_id"] for f in r.json["files"]}["out.txt"]
        self.assertEqual(self.bob.get(f"/v1/files/{made}").status, 404, "outputs are the key's")
        self.assertEqual(self.alice.get(f"/v1/files/{made}").body, b"made")
        self.assertEqual(self.alice.get(f"/v1/files/{mine}").body, b"alice's data")
        self.assertEqual(self.alice.delete(f"/v1/files/{mine}").status, 204)

    def test_sessions_belong_to_their_key(self):
        r = self.alice.post_json("/v1/sessions", {})
        self.assertEqual(r.status, 201, r)
        sid = r.json["session_id"]
        self.addCleanup(lambda: self.alice.delete(f"/v1/sessions/{sid}"))
        theirs = self.upload(self.bob, "bob.txt", b"bob's")
        ids = [s["session_id"] for s in self.alice.get("/v1/sessions").json["sessions"]]
        self.assertIn(sid, ids)
        ids = [s["session_id"] for s in self.bob.get("/v1/sessions").json["sessions"]]
        self.assertNotIn(sid, ids)
        missing = f"Session '{sid}' not found"
        for method, path, body in (
                ("POST", f"/v1/sessions/{sid}/bash", {"cmd": "echo hi"}),
                ("POST", f"/v1/sessions/{sid}/execute", {"code": "1"}),
                ("GET", f"/v1/sessions/{sid}/files", None),
                ("POST", f"/v1/sessions/{sid}/files",
                 {"files": [{"path": "b.txt", "file_id": theirs}]}),
                ("DELETE", f"/v1/sessions/{sid}", None)):
            with self.subTest(method=method, path=path):
                data = json.dumps(body).encode() if body is not None else None
                r = self.bob.request(method, path, body=data,
                                     headers={"Content-Type": "application/json"})
                self.assertDetail(r, 404, missing)
        # A stream is a 404 before it starts (api.md), in the same words.
        r = self.bob.post_json(f"/v1/sessions/{sid}/execute/stream", {"code": "1"})
        self.assertDetail(r, 404, missing)
        # Nor can Alice stage Bob's file into her session.
        r = self.alice.post_json(f"/v1/sessions/{sid}/files",
                                 {"files": [{"path": "b.txt", "file_id": theirs}]})
        self.assertDetail(r, 404, contains=theirs)
        r = self.alice.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "echo hi > x.txt; cat x.txt"})
        self.assertEqual((r.status, r.json["stdout"]), (200, "hi\n"), r)
        r = self.alice.get(f"/v1/sessions/{sid}/files")
        made = {f["path"]: f["file_id"] for f in r.json["files"]}["x.txt"]
        self.assertEqual(self.bob.get(f"/v1/files/{made}").status, 404)
        self.assertEqual(self.alice.delete(f"/v1/sessions/{sid}").status, 204)

    def test_keys_never_reach_the_log(self):
        self.alice.get("/v1/files")
        self.bob.get("/v1/sessions")
        Client(self.host, self.port, self._exchanges,
               headers={"Authorization": "Bearer wrong-" + ALICE}).get("/v1/files")
        log = self.daemon.log_with("GET /v1/files -> 401")
        for key in (ALICE, BOB, ALICE[6:]):
            self.assertNotIn(key, log)
        self.assertIn("GET /v1/files -> 200 by alice", log, "requests are logged by key name")

    def test_every_request_of_a_kept_alive_connection_is_checked(self):
        conn = self.client.connection()
        self.addCleanup(conn.close)
        r = self.alice.request("GET", "/v1/files", conn=conn)
        self.assertEqual(r.status, 200, r)
        self.assertUnauthorized(self.client.request("GET", "/v1/files", conn=conn), False)
        self.assertEqual(self.bob.request("GET", "/v1/sessions", conn=conn).status, 200)


class ApiKeyFileChangesTest(ApiKeyCase):
    def tearDown(self):
        # The keys of the other cases back, and seen by the daemon before they run.
        write_keys(KEYS)
        wait_until(lambda: self.alice.get("/v1/languages").status == 200, 10, 0.2)
        super().tearDown()

    def test_keys_are_added_and_revoked_without_a_restart(self):
        carol = Client(self.host, self.port, self._exchanges,
                       headers={"Authorization": f"Bearer {CAROL}"})
        self.assertUnauthorized(carol.get("/v1/files"), wrong_key=True)
        write_keys(KEYS + f"carol {CAROL}\n")
        self.assertTrue(wait_until(lambda: carol.get("/v1/files").status == 200, 10, 0.2),
                        "Carol's key is accepted once the file has it")
        # An edit that does not parse keeps the keys read before; the log says why.
        write_keys(KEYS + f"carol {CAROL}\ndave short\n")
        self.assertTrue(wait_until(lambda: carol.get("/v1/files").status == 200 and
                                   "dave is shorter" in self.daemon.log_since(self._log_start),
                                   10, 0.2), "the broken edit is read, logged and not applied")
        write_keys(f"bob {BOB}\n")
        self.assertTrue(wait_until(lambda: carol.get("/v1/files").status == 401, 10, 0.2),
                        "Carol's key is refused once the file no longer has it")
        self.assertEqual(self.alice.get("/v1/files").status, 401)
        self.assertEqual(self.bob.get("/v1/files").status, 200)


class MetricsWithAKeyTest(ApiKeyCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE, "METRICS_REQUIRE_API_KEY": "true"}

    def test_metrics_need_a_key_when_asked(self):
        self.assertUnauthorized(self.client.get("/metrics"), wrong_key=False)
        self.assertEqual(self.alice.get("/metrics").status, 200)
        self.assertEqual(self.client.get("/health").status, 200)


class PerKeyLimitsTest(ApiKeyCase):
    """Issue #30 item 6: one key cannot take every session of the replica (it took MAX_SESSIONS
    in 0.6 s); its share is half by default."""

    daemon_env = {"API_KEYS_FILE": KEYS_FILE, "MAX_SESSIONS": "4"}

    def test_one_key_holds_its_share_of_the_sessions(self):
        made = []
        for _ in range(2):
            r = self.alice.post_json("/v1/sessions", {})
            self.assertEqual(r.status, 201, r)
            made.append((self.alice, r.json["session_id"]))
        r = self.alice.post_json("/v1/sessions", {})
        self.assertDetail(r, 429, "API key 'alice' holds 2 sessions, its share of this replica "
                                  "(2: sessions= on its line in API_KEYS_FILE, else "
                                  "MAX_SESSIONS_PER_KEY); delete one or wait for one to expire.")
        r = self.bob.post_json("/v1/sessions", {})
        self.assertEqual(r.status, 201, "bob is served while alice holds her share")
        made.append((self.bob, r.json["session_id"]))
        self.assertEqual(self.alice.delete(f"/v1/sessions/{made[0][1]}").status, 204)
        r = self.alice.post_json("/v1/sessions", {})
        self.assertEqual(r.status, 201, "a deleted session frees the key's share")
        made[0] = (self.alice, r.json["session_id"])
        for client, sid in made:
            self.assertEqual(client.delete(f"/v1/sessions/{sid}").status, 204)


class KeyLimitsFromTheFileTest(ApiKeyCase):
    """Issue #30 item 6: the limits on a key's line hold for that key only: its executions at
    once, and its file storage, output files included (they were not counted)."""

    daemon_env = {"API_KEYS_FILE": LIMITS_FILE, "EXECUTION_QUEUE_TIMEOUT_SEC": "0"}

    def active_executions(self):
        text = self.client.get("/metrics").body.decode()
        return sum(float(line.split()[1]) for line in text.splitlines()
                   if line.startswith("code_interpreter_executions_active{"))

    def test_a_key_runs_at_most_its_executions(self):
        first = {}
        slow = threading.Thread(target=lambda: first.update(r=self.alice.post_json(
            "/v1/execute", {"code": "import time\ntime.sleep(3)\nprint('done')",
                            "timeout_ms": 20000}, timeout=60)))
        slow.start()
        try:
            self.assertTrue(wait_until(lambda: self.active_executions() == 1, 30, 0.05),
                            "alice's first execution never ran")
            r = self.alice.post_json("/v1/execute", {"code": "print(2)"})
            self.assertDetail(r, 429, prefix="API key 'alice' runs 1 executions, its share of this "
                                             "replica (executions= on its line in API_KEYS_FILE")
            r = self.bob.post_json("/v1/execute", {"code": "print(3)"})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json["stdout"], "3\n", r)
        finally:
            slow.join()
        self.assertEqual(first["r"].status, 200, first["r"])
        self.assertEqual(first["r"].json["stdout"], "done\n")
        r = self.alice.post_json("/v1/execute", {"code": "print(4)"})
        self.assertEqual(r.status, 200, "her share is free again")

    def test_uploads_and_output_files_count_against_the_keys_share(self):
        big = os.urandom(1536 * 1024)  # random: no holes to store it in less
        ctype, body = self.alice.multipart([("file", "big.bin", big, None)])
        r = self.alice.request("POST", "/v1/files", body=body, headers={"Content-Type": ctype})
        self.assertDetail(r, 507, prefix="API key 'alice' has used its share of the file storage")
        bobs = self.upload(self.bob, "big.bin", big)
        write = ("import os\nopen('small.txt', 'w').write('s')\n"
                 "open('big.bin', 'wb').write(os.urandom(1536 * 1024))\nprint('ok')")
        r = self.alice.post_json("/v1/execute", {"code": write})
        self.assertEqual(r.status, 200, r)
        self.assertEqual([f["path"] for f in r.json["files"]], ["small.txt"], r)
        self.assertTrue(r.json["files_truncated"], "the output over her share was not reported")
        kept = r.json["files"][0]["file_id"]
        r = self.bob.post_json("/v1/execute", {"code": write})
        self.assertEqual(sorted(f["path"] for f in r.json["files"]), ["big.bin", "small.txt"], r)
        self.assertFalse(r.json["files_truncated"], r)
        for f in r.json["files"]:
            self.assertEqual(self.bob.delete(f"/v1/files/{f['file_id']}").status, 204)
        self.assertEqual(self.bob.delete(f"/v1/files/{bobs}").status, 204)
        self.assertEqual(self.alice.delete(f"/v1/files/{kept}").status, 204)
