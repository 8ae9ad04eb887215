"""Health, routing, request validation, keep-alive and shutdown (docs/api.md)."""

import json
import os
import re
import sys
import threading
import time
import uuid

from harness import (Client, Config, E2ETestCase, host_processes_matching, pending_issue,
                     unique_sleep_arg, wait_until)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from json_schema import Checker  # noqa: E402

BACKENDS = ("local", "docker", "kubernetes")
OPENAPI_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                              "openapi.json")
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$")


class HealthTest(E2ETestCase):
    def check_health_body(self, body):
        self.assertIsInstance(body, dict)
        self.assertEqual(body.get("status"), "ok", body)
        self.assertIn("message", body)
        self.assertIsNone(body["message"], "message is null when status is ok")
        self.assertRegex(body.get("version", ""), SEMVER)
        want = Config.expected_backend
        if want:
            self.assertEqual(body.get("executor_backend"), want)
        else:
            self.assertIn(body.get("executor_backend"), BACKENDS)
        iso = body.get("network_isolation")
        self.assertIsInstance(iso, str)
        self.assertTrue(iso.strip(), "network_isolation must say how the network is isolated")
        hardening = body.get("hardening")
        self.assertIsInstance(hardening, dict, body)
        self.assertIsInstance(hardening.get("enforced"), list, body)
        self.assertTrue(hardening["enforced"], "the enforced measures are listed")
        for d in hardening.get("downgrades"):
            self.assertEqual(sorted(d), ["fix", "measure", "reason"], d)
            self.assertTrue(all(d.values()), d)

    def test_health(self):
        r = self.client.get("/health")
        self.assertEqual(r.status, 200, r)
        self.assertTrue((r.header("Content-Type") or "").startswith("application/json"))
        self.check_health_body(r.json)

    def test_health_is_fast(self):
        # Answered from a cached check: never blocks on the backend. Measured against a route that
        # touches nothing (/openapi.json) in the same loop, so a loaded or emulated machine (1.1 s
        # seen through the VM's tunnel) slows both alike.
        health, static = [], []
        for _ in range(5):
            health.append(self.client.get("/health").elapsed)
            static.append(self.client.get("/openapi.json").elapsed)
        self.assertLess(max(health), 0.5 + 2 * max(static),
                        "GET /health took %.3f s, GET /openapi.json %.3f s" % (max(health),
                                                                             max(static)))

    def test_ready(self):
        r = self.client.get("/ready")
        self.assertEqual(r.status, 200, r)
        self.check_health_body(r.json)

    def test_metrics(self):
        self.execute("print(1)")
        r = self.client.get("/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue((r.header("Content-Type") or "").startswith("text/plain"),
                        r.header("Content-Type"))
        text = r.body.decode()
        for name in ("code_interpreter_executions_active", "code_interpreter_executions_limit",
                     "code_interpreter_executions_rejected_total",
                     "code_interpreter_executions_completed_total",
                     "code_interpreter_admission_wait_seconds",
                     "code_interpreter_execution_duration_seconds"):
            self.assertIn(name, text)
        self.assertRegex(text, r'code_interpreter_executions_completed_total\{[^}]*'
                               r'outcome="ok"[^}]*\} [1-9]')
        self.assertRegex(text, r'code_interpreter_execution_duration_seconds_bucket\{[^}]*'
                               r'le="0.05"')


class RoutingTest(E2ETestCase):
    def test_unknown_route_404(self):
        for method, path in (("GET", "/nope"), ("POST", "/v1/nope"), ("GET", "/v1/execute/x"),
                             ("GET", "/v1/files/a/b")):
            with self.subTest(f"{method} {path}"):
                r = self.client.request(method, path)
                self.assertEqual(r.status, 404, r)
                self.assertEqual(r.json, {"detail": "Not Found"})

    def test_wrong_method_405(self):
        for method, path in (("GET", "/v1/execute"), ("GET", "/v1/execute/stream"),
                             ("PUT", "/v1/execute"), ("POST", "/health")):
            with self.subTest(f"{method} {path}"):
                r = self.client.request(method, path, body=b"{}" if method != "GET" else None)
                self.assertEqual(r.status, 405, r)
                self.assertEqual(r.json, {"detail": "Method Not Allowed"})

    def test_query_string_ignored(self):
        r = self.client.get("/health?verbose=1")
        self.assertEqual(r.status, 200, r)


class ValidationTest(E2ETestCase):
    """Every 422 of POST /v1/execute; each detail is a string and names the field."""

    def post(self, body):
        return self.client.post_json("/v1/execute", body)

    def test_malformed_json(self):
        for raw in (b'{"code": "print(1)"', b"{code: 1}", b"", b'{"code": "a"} trailing'):
            with self.subTest(raw=raw):
                self.assertDetail(self.post(raw), 422, prefix="Invalid request body: ")

    def test_body_not_an_object(self):
        for raw in (b"[]", b'"print(1)"', b"null", b"42"):
            with self.subTest(raw=raw):
                self.assertDetail(self.post(raw), 422)

    def test_missing_code(self):
        self.assertDetail(self.post({}), 422, "Field 'code' is required.")
        self.assertDetail(self.post({"stdin": "x"}), 422, "Field 'code' is required.")

    def test_code_not_a_string(self):
        for code in (123, None, ["print(1)"], {"a": 1}, True):
            with self.subTest(code=code):
                self.assertDetail(self.post({"code": code}), 422, contains="code")

    def test_timeout_below_one(self):
        for t in (0, -5):
            with self.subTest(timeout_ms=t):
                self.assertDetail(self.post({"code": "print(1)", "timeout_ms": t}), 422,
                                  "timeout_ms must be greater than or equal to 1")

    def test_timeout_wrong_types(self):
        for t in (1.5, "100", True, [100]):
            with self.subTest(timeout_ms=t):
                self.assertDetail(self.post({"code": "print(1)", "timeout_ms": t}), 422,
                                  contains="timeout_ms")

    def test_timeout_above_max(self):
        if Config.spawned():
            self.assertDetail(self.post({"code": "print(1)", "timeout_ms": 60001}), 422,
                              "timeout_ms exceeds maximum of 60000 ms")
        else:
            d = self.assertDetail(self.post({"code": "print(1)", "timeout_ms": 10 ** 9}), 422)
            self.assertRegex(d, r"^timeout_ms exceeds maximum of \d+ ms$")

    def test_timeout_overflowing_int64(self):
        self.assertDetail(self.post({"code": "print(1)", "timeout_ms": 10 ** 20}), 422,
                          contains="timeout_ms")

    def test_timeout_at_max_accepted(self):
        if not Config.spawned():
            self.skipTest("--url mode: MAX_EXEC_TIMEOUT_MS unknown")
        res = self.execute("print(1)", timeout_ms=60000)
        self.assertEqual(res["stdout"], "1\n")

    def test_last_line_interactive_wrong_type(self):
        for v in ("yes", 1, "true"):
            with self.subTest(last_line_interactive=v):
                self.assertDetail(self.post({"code": "1", "last_line_interactive": v}), 422,
                                  contains="last_line_interactive")

    def test_files_not_an_array(self):
        for v in ({}, "a.txt", 1):
            with self.subTest(files=v):
                self.assertDetail(self.post({"code": "1", "files": v}), 422, contains="files")

    def test_file_entry_missing_field(self):
        msg = "Each file must include both 'path' and 'file_id'."
        for entry in ({"path": "a.txt"}, {"file_id": "6f1c2a8e-8d7e-4b8c-9a55-0a7e7d9b1c11"}, {}):
            with self.subTest(entry=entry):
                self.assertDetail(self.post({"code": "1", "files": [entry]}), 422, msg)

    def test_file_entry_wrong_types(self):
        for entry in ("a.txt", {"path": 1, "file_id": "x"}, {"path": "a", "file_id": 7}):
            with self.subTest(entry=entry):
                self.assertDetail(self.post({"code": "1", "files": [entry]}), 422)

    def test_stdin_wrong_type(self):
        for v in (5, ["a"], {"a": 1}, False):
            with self.subTest(stdin=v):
                self.assertDetail(self.post({"code": "print(1)", "stdin": v}), 422,
                                  contains="stdin")

    def test_null_optionals_accepted(self):
        res = self.execute("print('n')", stdin=None)
        self.assertEqual(res["stdout"], "n\n")

    def test_unknown_fields_ignored(self):
        res = self.execute("print(3)", whatever={"a": [1, 2]}, session_id="x", extra=None)
        self.assertEqual(res["stdout"], "3\n")
        self.assertEqual(res["exit_code"], 0)

    def test_empty_code(self):
        res = self.execute("")
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"]), ("", "", 0))


class KeepAliveTest(E2ETestCase):
    def test_50_requests_on_one_connection(self):
        conn = self.client.connection()
        try:
            ports = set()
            for i in range(50):
                kind = i % 5
                if kind == 0:
                    r = self.client.post_json("/v1/execute", {"code": f"print({i})"}, conn=conn)
                    self.assertEqual(r.status, 200, r)
                    self.assertEqual(r.json["stdout"], f"{i}\n")
                elif kind == 1:
                    r = self.client.get("/nope", conn=conn)
                    self.assertEqual(r.status, 404, r)
                elif kind == 2:
                    r = self.client.post_json("/v1/execute", {"timeout_ms": 0, "code": ""},
                                              conn=conn)
                    self.assertEqual(r.status, 422, r)
                elif kind == 3:
                    r = self.client.get("/v1/files", conn=conn)
                    self.assertEqual(r.status, 200, r)
                else:
                    r = self.client.get("/health", conn=conn)
                    self.assertEqual(r.status, 200, r)
                self.assertIsNotNone(conn.sock, f"the daemon closed the connection after "
                                                f"request {i + 1} ({r.status})")
                ports.add(conn.sock.getsockname()[1])
            self.assertEqual(len(ports), 1, "http.client had to reconnect: no keep-alive")
        finally:
            conn.close()


class ShutdownTest(E2ETestCase):
    """SIGTERM while a program runs: exit 0 within 15 s and nothing of the sandbox left."""

    def test_sigterm_during_execution(self):
        self.require_spawned("needs to signal the daemon process")
        # A short grace: the program outlives it either way, and is killed (CI's budget).
        d = Config.new_daemon({"SHUTDOWN_GRACE_SEC": "2"}).start()
        try:
            marker = unique_sleep_arg()
            code = ("import subprocess, time\n"
                    f"subprocess.Popen(['sleep', '{marker}'])\n"
                    "print('started', flush=True)\n"
                    "time.sleep(60)\n")
            client = Client(d.host, d.port, self._exchanges)
            outcome = {}

            def run():
                try:
                    outcome["resp"] = client.post_json("/v1/execute",
                                                       {"code": code, "timeout_ms": 60000})
                except Exception as e:  # noqa: BLE001 - a closed connection is acceptable
                    outcome["error"] = e

            t = threading.Thread(target=run, daemon=True)
            t.start()
            seen = wait_until(lambda: host_processes_matching(f"sleep {marker}"), 10)
            self.assertTrue(seen, "the program's child never appeared in ps")
            rc, took = d.stop()
            self.assertEqual(rc, 0, f"exit code {rc} after {took:.1f} s of SIGTERM\n"
                                    f"{d.log_since(0, tail=40)}")
            left = wait_until(lambda: not host_processes_matching(f"sleep {marker}"), 2)
            self.assertTrue(left, "the sandbox's process survived the daemon: "
                            f"{host_processes_matching(f'sleep {marker}')}")
            t.join(5)
        finally:
            if d.alive():
                d.stop()
            d.cleanup()


class OpenApiTest(E2ETestCase):
    """GET /openapi.json, and real answers against the schemas it documents."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(OPENAPI_SOURCE) as f:
            cls.document = json.load(f)
        cls.checker = Checker(cls.document)

    def assertDocumented(self, method, template, status, content_type, body):
        """The operation lists `status` with `content_type`, and `body` fits its schema."""
        op = self.document["paths"][template][method]
        self.assertIn(str(status), op["responses"], f"{method} {template} does not list {status}")
        response = self.checker.resolve(op["responses"][str(status)])
        media = content_type.split(";")[0].strip()
        schemas = {k.split(";")[0]: v["schema"] for k, v in response.get("content", {}).items()}
        self.assertIn(media, schemas, f"{method} {template} {status} documents no {media}")
        errors = self.checker.errors(body, schemas[media])
        self.assertEqual(errors, [], f"{method} {template} {status}: {body!r}")

    def assertAnswerDocumented(self, method, template, r):
        self.assertDocumented(method, template, r.status, r.header("Content-Type") or "", r.json)

    def test_document_served(self):
        r = self.client.get("/openapi.json")
        self.assertEqual(r.status, 200, r)
        self.assertTrue((r.header("Content-Type") or "").startswith("application/json"))
        self.assertEqual(r.json, self.document, "the daemon serves docs/openapi.json as built")
        self.assertTrue(r.json["openapi"].startswith("3.1."))

    def test_execute_answers_match_the_document(self):
        code = "open('out.txt', 'w').write('x')\nprint('hi')"
        r = self.client.post_json("/v1/execute", {"code": code})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.json["files"]), 1, r.json)
        self.assertAnswerDocumented("post", "/v1/execute", r)
        r = self.client.post_json("/v1/execute", {"code": "x", "timeout_ms": 0})
        self.assertEqual(r.status, 422, r)
        self.assertAnswerDocumented("post", "/v1/execute", r)
        missing = {"code": "", "files": [{"path": "a", "file_id": str(uuid.uuid4())}]}
        r = self.client.post_json("/v1/execute", missing)
        self.assertEqual(r.status, 404, r)
        self.assertAnswerDocumented("post", "/v1/execute", r)

    def test_stream_events_match_the_document(self):
        res = self.client.sse("/v1/execute/stream", {"code": "print('hi')"})
        self.assertEqual(res.status, 200, res.body)
        op = self.document["paths"]["/v1/execute/stream"]["post"]
        sse = self.checker.resolve(op["responses"]["200"])["content"]["text/event-stream"]
        names = [e for e, _, _ in res.events]
        self.assertEqual(names[-1:], ["result"], names)
        self.assertTrue(names[:-1] and set(names[:-1]) == {"output"}, names)
        for event, data, _ in res.events:
            self.assertEqual(self.checker.errors(data, sse["x-sse-events"][event]), [], event)

    def test_file_and_health_answers_match_the_document(self):
        r = self.client.get(f"/v1/files/{uuid.uuid4()}")
        self.assertEqual(r.status, 404, r)
        self.assertAnswerDocumented("get", "/v1/files/{file_id}", r)
        r = self.client.upload("a.txt", b"abc")
        self.assertEqual(r.status, 201, r)
        self.assertAnswerDocumented("post", "/v1/files", r)
        self.assertAnswerDocumented("get", "/v1/files", self.client.get("/v1/files"))
        self.assertAnswerDocumented("get", "/health", self.client.get("/health"))
        self.assertAnswerDocumented("get", "/v1/languages", self.client.get("/v1/languages"))

    def test_session_answers_match_the_document(self):
        r = self.client.post_json("/v1/sessions", {"ttl_seconds": 60})
        self.assertEqual(r.status, 201, r)
        self.assertAnswerDocumented("post", "/v1/sessions", r)
        sid = r.json["session_id"]
        try:
            r = self.client.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "echo hi > a.txt"})
            self.assertEqual(r.status, 200, r)
            self.assertAnswerDocumented("post", "/v1/sessions/{session_id}/bash", r)
            r = self.client.get(f"/v1/sessions/{sid}/files")
            self.assertEqual(r.status, 200, r)
            self.assertAnswerDocumented("get", "/v1/sessions/{session_id}/files", r)
            self.assertAnswerDocumented("get", "/v1/sessions", self.client.get("/v1/sessions"))
        finally:
            self.assertEqual(self.client.delete(f"/v1/sessions/{sid}").status, 204)
        r = self.client.delete(f"/v1/sessions/{sid}")
        self.assertEqual(r.status, 404, r)
        self.assertAnswerDocumented("delete", "/v1/sessions/{session_id}", r)

    def test_method_not_allowed_matches_the_document(self):
        r = self.client.delete("/v1/execute")
        self.assertEqual(r.status, 405, r)
        response = self.checker.resolve({"$ref": "#/components/responses/MethodNotAllowed"})
        self.assertIn("Allow", response["headers"])
        self.assertEqual(r.header("Allow"), "POST")
        self.assertEqual(self.checker.errors(r.json, response["content"]["application/json"]
                                             ["schema"]), [])


class LanguagesTest(E2ETestCase):
    """[ext] GET /v1/languages and the `language` field."""

    def languages(self):
        r = self.client.get("/v1/languages")
        self.assertEqual(r.status, 200, r)
        self.assertIsInstance(r.json, dict, r)
        langs = r.json.get("languages")
        self.assertIsInstance(langs, list, r.json)
        for entry in langs:
            self.assertIsInstance(entry, dict, langs)
            self.assertIsInstance(entry.get("name"), str, entry)
        return {e["name"]: e for e in langs}

    def test_list_has_python_with_version(self):
        langs = self.languages()
        self.assertIn("python", langs)
        self.assertTrue(any(re.search(r"\d+\.\d+", str(v)) for v in langs["python"].values()),
                        f"no version in {langs['python']} (api.md: 'lists them with versions')")

    def test_unknown_language_422(self):
        r = self.client.post_json("/v1/execute", {"code": "x", "language": "cobol"})
        d = self.assertDetail(r, 422, contains="python")
        self.assertIn("cobol", d)

    def test_explicit_python(self):
        res = self.execute("print('py')", language="python")
        self.assertEqual(res["stdout"], "py\n")

    def test_bash(self):
        if "bash" not in self.languages():
            self.skip_or_fail("bash is not an available language here")
        res = self.execute("echo hi; echo err >&2; exit 3", language="bash")
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"]), ("hi\n", "err\n", 3))
