"""The E2B front (docs/e2b.md) through E2B's official JS SDK, pinned in tests/e2b (installed by
`npm ci` there, which scripts/install-deps.sh runs) and run as tests/e2b/e2b_client.mjs with
E2B_API_URL and E2B_SANDBOX_URL pointing at the daemon: the control plane's create, info, list
by metadata and by page, set timeout, connect, kill, a sandbox's own end at its timeout, the
options refused by name, and another key seeing none of it. What the SDK cannot send (bad JSON,
wrong types, unknown paths, no key) is checked with raw HTTP.

Without Node.js or the SDK the SDK's cases skip, and fail under CI_E2E_NO_SKIP=1."""

import json
import os
import subprocess
import uuid

from harness import Client, E2ETestCase
from test_auth import ALICE, BOB, KEYS_FILE  # the same keys, so the same daemon as test_auth

E2B_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2b")
SDK_CLIENT = os.path.join(E2B_TESTS, "e2b_client.mjs")
SDK_PACKAGE = os.path.join(E2B_TESTS, "node_modules", "e2b", "package.json")
SDK_TIMEOUT_S = 180


class E2bCase(E2ETestCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE}

    def base_url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def sdk(self, scenario, *args, key=ALICE):
        """The steps e2b_client.mjs printed for `scenario`, by name ("end" once it finished)."""
        self.require_node_client("the E2B SDK", SDK_PACKAGE)
        env = dict(os.environ, E2B_API_URL=self.base_url(), E2B_SANDBOX_URL=self.base_url(),
                   E2B_API_KEY=key)
        proc = subprocess.run(["node", SDK_CLIENT, scenario, *args], capture_output=True,
                              text=True, timeout=SDK_TIMEOUT_S, stdin=subprocess.DEVNULL, env=env)
        self._exchanges.append(f"e2b_client.mjs {scenario} {' '.join(args)}\n  -> exit "
                               f"{proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
        steps = {}
        for line in proc.stdout.splitlines():
            o = json.loads(line)
            steps["end" if o.get("end") else o["step"]] = o
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("end", steps, proc.stdout + proc.stderr)
        return steps

    def api(self, key=ALICE):
        return Client(self.host, self.port, headers={"X-API-KEY": key} if key else {})


class E2bControlPlaneTest(E2bCase):
    def test_a_sandbox_lives_is_found_extended_and_killed(self):
        tag = uuid.uuid4().hex
        s = self.sdk("lifecycle", tag)
        sid = s["create"]["sandboxId"]
        info = s["info"]
        self.assertEqual((info["sandboxId"], info["templateId"], info["state"]),
                         (sid, "base", "running"))
        self.assertEqual(info["metadata"], {"tag": tag, "a b": "c&d"})
        self.assertEqual(info["envdVersion"], "0.5.7")
        self.assertGreaterEqual(info["memoryMB"], 1)
        self.assertEqual(s["list"]["ids"], [sid])
        self.assertEqual(s["list_escaped"]["ids"], [sid])
        self.assertEqual(s["list_other_tag"]["ids"], [])
        # setTimeout(30 s) moved the end sooner; connect(60 s) only ever extends it.
        self.assertLess(s["set_timeout"]["endAt"], info["endAt"])
        self.assertEqual(s["connect"]["sandboxId"], sid)
        self.assertGreater(s["connect"]["endAt"], s["set_timeout"]["endAt"])
        self.assertEqual(s["kill"], {"step": "kill", "killed": True})
        self.assertEqual(s["kill_again"], {"step": "kill_again", "killed": False})
        self.assertEqual(s["info_after"]["error"], "SandboxNotFoundError")
        self.assertEqual(s["connect_after"]["error"], "SandboxNotFoundError")
        # The sandbox was a session of the key: gone there too.
        sessions = Client(self.host, self.port,
                          headers={"Authorization": f"Bearer {ALICE}"}).get("/v1/sessions")
        self.assertNotIn(sid, json.dumps(sessions.json))

    def test_a_sandbox_ends_at_its_timeout_with_nobody_calling(self):
        s = self.sdk("expires")
        self.assertIn("gone", s, s)
        self.assertEqual(s["gone"]["error"], "SandboxNotFoundError")
        self.assertGreaterEqual(s["gone"]["after_ms"], 2000)

    def test_what_cannot_be_honoured_is_refused_by_name(self):
        s = self.sdk("refused")
        for step, says in (("internet", "allow_internet_access"), ("template", "no-such-template"),
                           ("auto_pause", "autoPause"), ("too_long", "timeout")):
            self.assertEqual(s[step].get("error"), "SandboxError", s[step])
            self.assertIn("400: ", s[step]["message"])
            self.assertIn(says, s[step]["message"])

    def test_listing_pages(self):
        s = self.sdk("paging", uuid.uuid4().hex)
        made = s["create"]["ids"]
        self.assertEqual(s["pages"]["pages"], [made[:2], made[2:]])

    def test_another_key_sees_none_of_it(self):
        sid = self.sdk("keep", uuid.uuid4().hex)["create"]["sandboxId"]
        try:
            s = self.sdk("foreign", sid, key=BOB)
            for step in ("info", "connect", "set_timeout"):
                self.assertEqual(s[step].get("error"), "SandboxNotFoundError", s[step])
            self.assertNotIn(sid, s["list"]["ids"])
            self.assertEqual(s["kill"]["killed"], False)
            # Still alice's, still running.
            self.assertEqual(self.api().get(f"/sandboxes/{sid}").status, 200)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


class E2bSandboxPlaneTest(E2bCase):
    def test_health_and_what_is_not_there_yet(self):
        s = self.sdk("sandbox_plane")
        self.assertEqual(s["running"].get("running"), True, s["running"])
        self.assertEqual(s["running_after_kill"].get("running"), False, s["running_after_kill"])
        for step in ("command", "read"):
            self.assertIn("error", s[step], s[step])
            self.assertIn("not implemented by this server yet", s[step]["message"], s[step])

    def test_the_token_is_the_key(self):
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 60})
        self.assertEqual(r.status, 201, r.body)
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        try:
            plane = Client(self.host, self.port)  # no API key: the token alone
            def call(method, path, token_header, body=None, ctype="application/json"):
                headers = {"E2b-Sandbox-Id": sid, "Content-Type": ctype, **token_header}
                return plane.request(method, path, body=body, headers=headers)
            self.assertEqual(call("GET", "/health", {"X-Access-Token": token}).status, 204)
            self.assertEqual(call("GET", "/health", {"E2B-Traffic-Access-Token": token}).status,
                             204)
            for wrong in ({}, {"X-Access-Token": token[:-1]}, {"X-Access-Token": token + "0"},
                          {"X-Access-Token": "0" * len(token)}):
                self.assertEqual(call("GET", "/health", wrong).status, 502, wrong)
                r = call("POST", "/process.Process/List", wrong, b"{}")
                self.assertEqual((r.status, r.json["code"]), (404, "not_found"), wrong)
            r = call("POST", "/process.Process/Start", {"X-Access-Token": token}, b"\0\0\0\0\2{}",
                     "application/connect+json")
            # A streaming RPC's error is its stream's end: [0x02][u32 length][JSON].
            self.assertEqual((r.status, r.body[:1]), (200, b"\2"), r.body)
            end = json.loads(r.body[5:5 + int.from_bytes(r.body[1:5], "big")])
            self.assertEqual(end["error"]["code"], "unimplemented", end)
            r = call("POST", "/process.Process/List", {"X-Access-Token": token}, b"{}")
            self.assertEqual((r.status, r.json["code"]), (501, "unimplemented"), r.body)
            r = call("GET", "/files?path=%2Fhome%2Fuser%2Fa", {"X-Access-Token": token})
            self.assertEqual((r.status, r.json["code"]), (501, 501), r.body)
            # Without the header, /health is the daemon's own.
            self.assertEqual(plane.get("/health").status, 200)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


class E2bWireTest(E2bCase):
    """What the SDK never sends: each a clear E2B error ({"code", "message"}), the daemon up."""

    def assert_error(self, r, status, says):
        self.assertEqual(r.status, status, r.body)
        body = r.json
        self.assertEqual(body["code"], status)
        self.assertIn(says, body["message"])

    def test_refusals(self):
        api = self.api()
        cases = [
            (self.api(key=None).post_json("/v2/sandboxes", {"templateID": "base"}), 401,
             "X-API-KEY"),
            (self.api(key="wrong-" + ALICE).get("/v2/sandboxes"), 401, "Invalid API key"),
            (api.request("POST", "/v2/sandboxes", body=b"{",
                         headers={"Content-Type": "application/json"}),
             400, "not JSON"),
            (api.post_json("/v2/sandboxes", [1]), 400, "object"),
            (api.post_json("/v2/sandboxes", {}), 400, "templateID"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "timeout": "5"}), 400,
             "timeout"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "metadata": {"a": 1}}), 400,
             "metadata.a"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "envVars": {"1x": "y"}}), 400,
             "variable name"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "volumeMounts": [{}]}), 400,
             "volumeMounts"),
            (api.request("POST", "/v2/sandboxes", body=b"{}",
                         headers={"Content-Type": "text/plain"}), 415,
             "application/json"),
            (api.get("/sandboxes/code-session-nope"), 404, "not found"),
            (api.post_json("/sandboxes/code-session-nope/timeout", {"timeout": 5}), 404,
             "not found"),
            (api.get("/v2/sandboxes?limit=0"), 400, "limit"),
            (api.get("/v2/sandboxes?state=frozen"), 400, "state"),
            (api.get("/v2/sandboxes?nextToken=nope"), 400, "nextToken"),
            (api.get("/sandboxes/x/y/z"), 404, "not part of the API"),
            (api.request("PUT", "/v2/sandboxes"), 405, "GET or POST"),
        ]
        for r, status, says in cases:
            with self.subTest(status=status, says=says):
                self.assert_error(r, status, says)
        self.assertEqual(api.get("/v2/sandboxes").status, 200)

    def test_timeout_and_pause_of_a_live_sandbox(self):
        api = self.api()
        r = api.post_json("/v2/sandboxes", {"templateID": "code-interpreter-v1", "timeout": 60})
        self.assertEqual(r.status, 201, r.body)
        sid = r.json["sandboxID"]
        try:
            self.assert_error(api.post_json(f"/sandboxes/{sid}/timeout", {}), 400, "timeout")
            self.assert_error(api.post_json(f"/sandboxes/{sid}/timeout", {"timeout": 86400}),
                              400, "at most")
            self.assertEqual(api.post_json(f"/sandboxes/{sid}/timeout", {"timeout": 30}).status,
                             204)
            self.assert_error(api.post_json(f"/sandboxes/{sid}/pause", {}), 501, "pause")
            for method, what in (("GET", "metrics"), ("PUT", "network"), ("POST", "fork"),
                                 ("POST", "snapshots")):
                body = None if method == "GET" else b"{}"
                r = api.request(method, f"/sandboxes/{sid}/{what}", body=body,
                                headers={"Content-Type": "application/json"})
                self.assert_error(r, 501, what)
            self.assert_error(api.get("/sandboxes/code-session-nope/metrics"), 404, "not found")
            self.assert_error(api.post_json(f"/sandboxes/{sid}/resume", {}), 409, "running")
        finally:
            self.assertEqual(api.delete(f"/sandboxes/{sid}").status, 204)
