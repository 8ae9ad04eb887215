"""The MCP server at /mcp (streamable HTTP transport, MCP 2025-06-18) through a real client: the
official TypeScript SDK, run as tests/mcp/mcp_client.mjs (installed by `npm ci` in tests/mcp,
which scripts/install-deps.sh runs). The transport's refusals (405, 400, 404) are checked with
raw HTTP, and with API keys the daemon's authentication applies to /mcp as to every endpoint.

Without Node.js or the SDK the client's cases skip, and fail under CI_E2E_NO_SKIP=1."""

import base64
import json
import os
import subprocess

from harness import Client, E2ETestCase
from test_auth import ALICE, BOB, KEYS_FILE  # the same keys, so the same daemon as test_auth

MCP_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mcp")
SDK_CLIENT = os.path.join(MCP_TESTS, "mcp_client.mjs")
SDK_PACKAGE = os.path.join(MCP_TESTS, "node_modules", "@modelcontextprotocol", "sdk",
                           "package.json")
SDK_TIMEOUT_S = 120
PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
# What the SDK sends with every POST (the server must accept it).
SDK_ACCEPT = "application/json, text/event-stream"
INVALID_PARAMS = -32602


class SdkRun:
    """What one run of mcp_client.mjs printed: the connection, one line per action, the end."""

    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stderr = proc.stderr
        self.lines = []
        for line in proc.stdout.splitlines():
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"unparsed": line})
        first = self.lines[0] if self.lines else {}
        self.connected = first.get("connected")
        self.connect_error = first.get("connect_error")
        self.terminated = self.lines[-1].get("terminated") if self.connected else None
        self.answers = self.lines[1:-1] if self.connected else []

    def __repr__(self):
        out = "\n".join(json.dumps(line)[:1500] for line in self.lines)
        return f"exit {self.returncode}\n{out}\n--- stderr ---\n{self.stderr[-3000:]}"


class McpCase(E2ETestCase):
    def mcp_url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    def sdk(self, *actions, headers=None):
        """Runs the SDK client with `actions` (see mcp_client.mjs) and asserts it connected
        when it is given the headers it needs. Returns the SdkRun."""
        self.require_node_client("the MCP SDK client", SDK_PACKAGE)
        argv = ["node", SDK_CLIENT, self.mcp_url()]
        for name, value in (headers or {}).items():
            argv += ["--header", f"{name}: {value}"]
        argv += [json.dumps(a) for a in actions]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=SDK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        run = SdkRun(proc)
        self._exchanges.append(f"mcp_client.mjs {' '.join(argv[3:])}\n  -> {run!r}")
        return run

    def connected(self, *actions, headers=None):
        """sdk() that must connect, answer every action and end its session."""
        run = self.sdk(*actions, headers=headers)
        self.assertEqual(run.returncode, 0, run)
        self.assertIsNotNone(run.connected, run)
        self.assertEqual(len(run.answers), len(actions), run)
        self.assertIs(run.terminated, True, run)
        return run

    def result(self, answer):
        """The SDK's result of one action that must have succeeded."""
        self.assertIn("result", answer, f"the SDK reported an error: {answer}")
        return answer["result"]

    def call(self, name, arguments=None):
        """tools/call through the SDK: the one answer line."""
        action = {"call": name}
        if arguments is not None:
            action["arguments"] = arguments
        return self.connected(action).answers[0]

    def execute(self, code):
        """execute_code of `code` that must run: (the result's text, its structuredContent)."""
        result = self.result(self.call("execute_code", {"code": code}))
        self.assertIs(result.get("isError"), False, result)
        content = result.get("content")
        self.assertIsInstance(content, list, result)
        self.assertEqual([c.get("type") for c in content], ["text"], result)
        structured = result.get("structuredContent")
        self.assertIsInstance(structured, dict, result)
        for key in ("stdout", "stderr", "exit_code", "verdict"):
            self.assertIn(key, structured, result)
        return content[0]["text"], structured

    # -- raw HTTP ----------------------------------------------------------------------------

    def post_mcp(self, message, session=None, client=None):
        headers = {"Accept": SDK_ACCEPT}
        if session:
            headers["Mcp-Session-Id"] = session
        return (client or self.client).post_json("/mcp", message, headers=headers)

    def initialize(self, client=None):
        """A session opened with raw HTTP: its Mcp-Session-Id."""
        r = self.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "e2e", "version": "1"}}},
                          client=client)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["result"]["protocolVersion"], "2025-06-18", r)
        session = r.header("Mcp-Session-Id")
        self.assertTrue(session, f"no Mcp-Session-Id header: {r!r}")
        return session

    def ping(self, session, client=None):
        return self.post_mcp({"jsonrpc": "2.0", "id": 2, "method": "ping"}, session, client)

    def assertRpcError(self, r, status, code, contains):
        """An HTTP error status whose body is a JSON-RPC error saying what is wrong."""
        self.assertEqual(r.status, status, r)
        self.assertIsInstance(r.json, dict, f"not a JSON body: {r!r}")
        error = r.json.get("error")
        self.assertIsInstance(error, dict, r)
        self.assertEqual(error.get("code"), code, r)
        self.assertIn(contains, error.get("message", ""), r)


class McpToolsTest(McpCase):
    def test_the_sdk_connects_and_lists_execute_code(self):
        run = self.connected({"list": True}, {"ping": True})
        self.assertIn(run.connected["protocolVersion"], PROTOCOL_VERSIONS, run)
        self.assertEqual(run.connected["serverVersion"]["name"], "code-interpreter", run)
        self.assertEqual(run.connected["serverCapabilities"].get("tools"), {"listChanged": False})
        self.assertIn("execute_code", run.connected["instructions"] or "", run)
        tools = {t["name"]: t for t in self.result(run.answers[0])["tools"]}
        self.assertIn("execute_code", tools, run)
        execute = tools["execute_code"]
        self.assertTrue(execute.get("description"), execute)
        schema = execute["inputSchema"]
        self.assertEqual(schema.get("type"), "object", schema)
        self.assertEqual(schema.get("properties", {}).get("code", {}).get("type"), "string",
                         schema)
        self.assertIn("code", schema.get("required", []), schema)
        self.assertEqual(self.result(run.answers[1]), {}, "ping answers an empty result")

    def test_solve_task_is_neither_listed_nor_callable_without_a_model(self):
        if os.environ.get("LLM_PROVIDER"):
            self.skipTest("LLM_PROVIDER is set in this run's environment: the daemon has a model")
        run = self.connected({"list": True}, {"call": "solve_task",
                                              "arguments": {"detailedDescription": "add 1+1"}})
        self.assertNotIn("solve_task", [t["name"] for t in self.result(run.answers[0])["tools"]])
        answer = run.answers[1]
        self.assertIn("error", answer, answer)
        self.assertEqual(answer["error"]["code"], INVALID_PARAMS, answer)
        self.assertIn("solve_task", answer["error"]["message"], answer)

    def test_execute_code_runs_python(self):
        text, structured = self.execute("print(6 * 7)")
        self.assertEqual(structured["stdout"], "42\n", structured)
        self.assertEqual(structured["stderr"], "", structured)
        self.assertEqual(structured["exit_code"], 0, structured)
        self.assertEqual(structured["verdict"], "ok", structured)
        self.assertIn("42", text)

    def test_a_chart_comes_back_as_image_content(self):
        """What the program drew reaches the model: a matplotlib figure as MCP image content,
        after the text, through the SDK (which checks image content against its schema)."""
        code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nprint('drawn')"
        # matplotlib's import takes a second when idle: the default 2 s is short on a loaded CI.
        result = self.result(self.call("execute_code", {"code": code, "timeout_ms": 30000}))
        self.assertIs(result.get("isError"), False, result)
        [text, image] = result["content"]
        self.assertEqual((text["type"], text["text"]), ("text", "drawn\n"))
        self.assertEqual((image["type"], image["mimeType"]), ("image", "image/png"))
        self.assertEqual(base64.b64decode(image["data"])[:8], b"\x89PNG\r\n\x1a\n")

    def test_a_failing_program_is_a_result_not_a_protocol_error(self):
        text, structured = self.execute("print('before')\nraise ValueError('boom')")
        self.assertEqual(structured["stdout"], "before\n", structured)
        self.assertIn("ValueError: boom", structured["stderr"], structured)
        self.assertEqual(structured["exit_code"], 1, structured)
        self.assertEqual(structured["verdict"], "error", structured)
        self.assertIn("ValueError: boom", text, "the model reading the text sees the failure")
        _, structured = self.execute("import sys\nsys.exit(3)")
        self.assertEqual((structured["exit_code"], structured["verdict"]), (3, "error"))

    def test_bad_arguments_are_an_error_result(self):
        cases = ({"code": 42}, {}, None)
        run = self.connected(*({"call": "execute_code", "arguments": a} if a is not None
                               else {"call": "execute_code"} for a in cases))
        for arguments, answer in zip(cases, run.answers):
            with self.subTest(arguments=arguments):
                result = self.result(answer)
                self.assertIs(result.get("isError"), True, result)
                self.assertNotIn("structuredContent", result)
                self.assertIn("code", result["content"][0]["text"], "names the argument")

    def test_an_unknown_tool_is_an_error_naming_it(self):
        answer = self.call("no_such_tool", {})
        self.assertIn("error", answer, answer)
        self.assertEqual(answer["error"]["code"], INVALID_PARAMS, answer)
        self.assertIn("no_such_tool", answer["error"]["message"], answer)

    def test_the_sdk_ends_its_session(self):
        run = self.connected()
        session = run.connected["sessionId"]
        self.assertTrue(session, run)
        self.assertRpcError(self.ping(session), 404, -32001, "Session not found")


class McpTransportTest(McpCase):
    """The streamable HTTP transport's refusals, as any client sees them."""

    def test_get_is_405(self):
        r = self.client.get("/mcp", headers={"Accept": "text/event-stream"})
        self.assertRpcError(r, 405, -32000, "GET")
        allow = {m.strip() for m in (r.header("Allow") or "").split(",")}
        self.assertEqual(allow, {"POST", "DELETE"}, r)

    def test_a_request_without_a_session_is_400(self):
        r = self.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertRpcError(r, 400, -32000, "Mcp-Session-Id")

    def test_a_deleted_session_is_404(self):
        session = self.initialize()
        self.assertEqual(self.ping(session).status, 200)
        r = self.client.delete("/mcp", headers={"Mcp-Session-Id": session})
        self.assertEqual(r.status, 200, r)
        self.assertRpcError(self.ping(session), 404, -32001, "initialize")
        r = self.client.delete("/mcp", headers={"Mcp-Session-Id": session})
        self.assertRpcError(r, 404, -32001, "Session not found")

    def test_json_that_does_not_parse_is_400(self):
        session = self.initialize()
        r = self.post_mcp(b'{"jsonrpc": "2.0", "id": 1, "method":', session)
        self.assertRpcError(r, 400, -32700, "Parse error")
        self.assertIsNone(r.json.get("id", "missing"), "the id of an unparsable message is null")

    def test_a_batch_is_refused(self):
        session = self.initialize()
        r = self.post_mcp([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], session)
        self.assertRpcError(r, 400, -32600, "batches are not supported")


class McpWithApiKeysTest(McpCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE}

    def setUp(self):
        super().setUp()
        self.alice = Client(self.host, self.port, self._exchanges,
                            headers={"Authorization": f"Bearer {ALICE}"})
        self.bob = Client(self.host, self.port, self._exchanges,
                          headers={"Authorization": f"Bearer {BOB}"})

    def test_the_sdk_with_a_bearer_key_works(self):
        run = self.connected({"list": True},
                             {"call": "execute_code", "arguments": {"code": "print('keyed')"}},
                             headers={"Authorization": f"Bearer {ALICE}"})
        self.assertIn("execute_code", [t["name"] for t in self.result(run.answers[0])["tools"]])
        result = self.result(run.answers[1])
        self.assertEqual(result["structuredContent"]["stdout"], "keyed\n", result)

    def test_without_a_key_the_sdk_gets_401(self):
        for headers in (None, {"Authorization": "Bearer nobody-0123456789abcdef"}):
            with self.subTest(headers=headers):
                run = self.sdk({"list": True}, headers=headers)
                self.assertEqual(run.returncode, 1, run)
                self.assertIsNotNone(run.connect_error, run)
                self.assertEqual(run.connect_error["code"], 401, run)

    def test_raw_requests_without_a_key_are_401(self):
        for method in ("POST", "GET", "DELETE"):
            with self.subTest(method=method):
                r = self.client.request(method, "/mcp", body=b"{}",
                                        headers={"Content-Type": "application/json"})
                self.assertDetail(r, 401)
                self.assertTrue((r.header("WWW-Authenticate") or "").startswith("Bearer"), r)

    def test_a_session_belongs_to_its_key(self):
        session = self.initialize(self.alice)
        self.assertEqual(self.ping(session, self.alice).status, 200)
        self.assertRpcError(self.ping(session, self.bob), 404, -32001, "Session not found")
        r = self.bob.delete("/mcp", headers={"Mcp-Session-Id": session})
        self.assertEqual(r.status, 404, "Bob cannot end Alice's session")
        self.assertEqual(self.ping(session, self.alice).status, 200, "still Alice's")
