"""The agent loop end to end: POST /v1/agent/solve (and its /stream), GET /v1/tools and
`code-interpreter ask`, against tests/model/scripted_model.py, a server that speaks the real
OpenAI and Gemini wire formats and answers from a script. Every case runs for both providers
where the provider changes what goes over the wire (a mixin of tests, a class per provider), so
a bug in one provider's request or answer handling cannot hide behind the other.

What is checked is the contract, from both sides: what the daemon answers its client, and what
it sent the model (the scripted server records every request): the system and user messages,
the model's earlier answer and the failure fed back to it, the model name and the key header.
The key is the other half: it must never reach an answer, the daemon's log or a sandbox, read
from LLM_API_KEY or from LLM_API_KEY_FILE.

One scripted server per configuration is started when the module is imported (its URL goes
into a class's daemon_env, which the harness reads when it starts the daemon) and stopped at
exit. Daemons that only answer errors run without a warm pool: they start faster on a loaded
machine and their idle sandboxes would serve nothing.
"""

import atexit
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import Client, Config, Daemon, E2ETestCase, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
import scripted_model  # noqa: E402 - tests/model, needs the path above
from scripted_model import ScriptedModel  # noqa: E402

MODEL_NAME = "scripted-1"
SOLVE = "/v1/agent/solve"
SOLVE_STREAM = "/v1/agent/solve/stream"
ATTEMPT_KEYS = {"attempt", "code", "stdout", "stderr", "exit_code", "verdict", "duration_ms",
                "accepted", "failure", "model_ms", "prompt_tokens", "completion_tokens"}
ANSWER_KEYS = {"status", "output", "language", "model", "attempts", "usage"}
PROGRAM_EVENT_KEYS = {"attempt", "code", "model_ms", "prompt_tokens", "completion_tokens"}
PROVIDER_FAILED = "The model provider failed: "
# Two Go builds (a failing and a good one) on a loaded two-core machine.
GO_HTTP_TIMEOUT_S = 180
DIVISORS = "divisors: [1, 3, 31, 93, 12917, 38751, 400427, 1201281]"
# What each provider's 401 says around the key it echoes: the message must survive redaction.
ECHO_PHRASE = {"openai": "Incorrect API key provided", "gemini": "API key not valid"}
# Daemons that only answer model failures: no idle sandboxes to start.
NO_WARM_POOL = {"WARM_POOL_SIZE": "0", "WARM_POOL_SIZE_BASH": "0",
                "WARM_POOL_SIZE_JAVASCRIPT": "0", "WARM_POOL_SIZE_GO": "0"}


# --------------------------------------------------------------------------------------------
# The scripted model servers and the keys


def _start_model(**kwargs):
    model = ScriptedModel(**kwargs).start()
    atexit.register(model.stop)
    return model


def _new_key(provider):
    """A fresh key per configuration: a leak names which one, and its random tail is what a
    partial redaction would still show."""
    return f"e2e-{provider}-key-" + secrets.token_hex(16)


KEY_DIR = tempfile.mkdtemp(prefix="ci-e2e-llm-key-")
atexit.register(shutil.rmtree, KEY_DIR, True)
# World-readable: what keeps the key from a sandbox must be the sandbox's view, not permissions
# (and a daemon started --as-user reads it).
os.chmod(KEY_DIR, 0o755)


def _key_file(name, key):
    path = os.path.join(KEY_DIR, name)
    with open(path, "w", encoding="ascii") as f:
        f.write(key + "\n")  # as an administrator writes it: the line break is not the key's
    os.chmod(path, 0o644)
    return path


def local_backend_only(cls):
    """A configuration of the agent loop (provider, key source, timeouts, TLS, no model): the loop
    and its model client are the same code whatever runs the sandboxes, so these run against the
    local backend only (e2e, e2e-rootless). OpenAIAgentTest runs against every backend: the
    loop's programs in that backend's sandboxes, the image's binary reaching a model."""
    inherited = cls.setUpClass.__func__

    def set_up_class(klass):
        if Config.expected_backend not in (None, "local"):
            # No daemon; each test says it skips (E2ETestCase.setUp), so every case is counted.
            klass.daemon, klass._start_error = None, None
            klass._skip_reason = (f"{Config.expected_backend} backend: an agent configuration, "
                                  "tested against the local backend (see local_backend_only)")
            return
        inherited(klass)

    cls.setUpClass = classmethod(set_up_class)
    return cls


class Setup:
    """One configuration: a scripted server, its key and how the daemon gets it."""

    def __init__(self, provider, key_from_file, tls=False):
        self.provider = provider
        self.key = _new_key(provider)
        self.key_file = _key_file(f"{provider}-{secrets.token_hex(4)}", self.key) \
            if key_from_file else None
        self.model = _start_model(api_key=self.key, tls=tls)
        if tls:
            # The CA's folder is private to us; a daemon started --as-user must read the CA.
            os.chmod(os.path.dirname(self.model.ca_file), 0o755)
            os.chmod(self.model.ca_file, 0o644)

    def base_url(self):
        return self.model.openai_base if self.provider == "openai" else self.model.gemini_base

    def env(self, **extra):
        """The daemon's (or ask's) LLM_* settings."""
        env = {"LLM_PROVIDER": self.provider, "LLM_MODEL": MODEL_NAME,
               "LLM_BASE_URL": self.base_url()}
        if self.key_file:
            env["LLM_API_KEY_FILE"] = self.key_file
        else:
            env["LLM_API_KEY"] = self.key
        env.update(extra)
        return env


OPENAI = Setup("openai", key_from_file=False)
GEMINI = Setup("gemini", key_from_file=True)
OPENAI_FILE = Setup("openai", key_from_file=True)
GEMINI_INLINE = Setup("gemini", key_from_file=False)
# Their own servers: a delayed reply answers (and counts) after its test gave up on it.
OPENAI_SLOW = Setup("openai", key_from_file=False)
GEMINI_SLOW = Setup("gemini", key_from_file=True)
OPENAI_LIMITS = Setup("openai", key_from_file=False)
try:
    OPENAI_TLS = Setup("openai", key_from_file=False, tls=True)
    GEMINI_TLS = Setup("gemini", key_from_file=False, tls=True)
    TLS_UNAVAILABLE = None
except RuntimeError as e:  # no openssl tool to make the certificates
    OPENAI_TLS = GEMINI_TLS = None
    TLS_UNAVAILABLE = str(e)


def _closed_port():
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------
# What the model answers, and what the daemon sent it


def fenced(code, language="python", prose="Here is a program that does it."):
    """A model-like answer: prose around the program's fenced block."""
    return {"text": f"{prose}\n\n```{language}\n{code}\n```\n\nIt prints the answer."}


def text_of_parts(content):
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(p.get("text", "") for p in parts or [] if isinstance(p, dict)
                   and isinstance(p.get("text"), str))


def conversation(request):
    """[(role, text)] of a recorded model request in neutral terms: system, user, assistant,
    tool (Gemini's "model" is assistant; its system instruction comes first)."""
    body = request["body"]
    out = []
    if "messages" in body:
        for m in body["messages"]:
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            out.append((m.get("role"), content or ""))
        return out
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        out.append(("system", text_of_parts(system)))
    for c in body.get("contents", []):
        role = c.get("role", "user")
        out.append(("assistant" if role == "model" else role, text_of_parts(c)))
    return out


def prompt_tokens(request, provider):
    """The usage the scripted server reported for this request (its rule, its own code)."""
    fmt = scripted_model.OPENAI if provider == "openai" else scripted_model.GEMINI
    return scripted_model.tokens(fmt.turn(request["body"], MODEL_NAME, None).prompt_chars)


def completion_tokens(reply):
    return scripted_model.tokens(scripted_model.answer_chars(reply))


def without_timing(obj):
    """An answer without its wall-clock fields, which two runs of one script do not share."""
    if isinstance(obj, dict):
        return {k: without_timing(v) for k, v in obj.items()
                if k not in ("duration_ms", "model_ms")}
    if isinstance(obj, list):
        return [without_timing(v) for v in obj]
    return obj


def available_languages(test):
    r = test.client.get("/v1/languages")
    test.assertEqual(r.status, 200, r)
    return {e["name"] for e in r.json["languages"]}


# --------------------------------------------------------------------------------------------
# The base class


class AgentCase(E2ETestCase):
    """A daemon configured with one scripted model (`setup`). The model's queue and record are
    emptied before every test: each test scripts exactly what the model answers."""

    setup = None  # Setup

    @property
    def provider(self):
        return self.setup.provider

    @property
    def model(self):
        return self.setup.model

    def setUp(self):
        super().setUp()
        self.model.clear()

    def requests(self):
        """The model requests the daemon made during this test."""
        return list(self.model.requests)

    def show_requests(self):
        return "\nmodel requests:\n" + "\n".join(
            f"  {r['path']} {json.dumps(r['body'])[:1500]}" for r in self.requests())

    def solve(self, task, expect_status=200, timeout=60, **fields):
        body = {"task": task}
        body.update(fields)
        r = self.client.post_json(SOLVE, body, timeout=timeout)
        self.assertEqual(r.status, expect_status, f"POST {SOLVE} answered {r!r}"
                                                  f"{self.show_requests()}")
        self.assertIsInstance(r.json, dict, f"not a JSON object: {r!r}")
        return r.json

    def assertAnswer(self, answer, status, attempts):
        """The batch answer's shape; returns its attempts."""
        self.assertEqual(set(answer), ANSWER_KEYS, answer)
        self.assertEqual(answer["status"], status, answer)
        self.assertEqual(answer["model"], MODEL_NAME, answer)
        self.assertEqual(len(answer["attempts"]), attempts, answer)
        for n, a in enumerate(answer["attempts"], 1):
            self.assertEqual(set(a), ATTEMPT_KEYS, a)
            self.assertEqual(a["attempt"], n, a)
            self.assertIsInstance(a["accepted"], bool, a)
            self.assertEqual(a["accepted"], a["failure"] is None, a)
            for k in ("model_ms", "duration_ms", "prompt_tokens", "completion_tokens"):
                self.assertIsInstance(a[k], int, (k, a))
                self.assertGreaterEqual(a[k], 0, (k, a))
        usage = answer["usage"]
        self.assertEqual(usage, {k: sum(a[k] for a in answer["attempts"])
                                 for k in ("prompt_tokens", "completion_tokens", "model_ms")},
                         "usage is the sum of the attempts'")
        return answer["attempts"]

    def assertProviderFailure(self, answer, attempts=0):
        """A 502/504 body: the detail and the attempts made before the failure."""
        self.assertEqual(set(answer), {"detail", "attempts"}, answer)
        self.assertTrue(answer["detail"].startswith(PROVIDER_FAILED), answer)
        self.assertEqual(len(answer["attempts"]), attempts, answer)
        for n, a in enumerate(answer["attempts"], 1):
            self.assertEqual(set(a), ATTEMPT_KEYS, a)
            self.assertEqual(a["attempt"], n, a)
        return answer["detail"]

    def assertKeyHeader(self, request):
        if self.provider == "openai":
            self.assertEqual(request["headers"].get("authorization"), f"Bearer {self.setup.key}")
            self.assertEqual(request["path"], "/v1/chat/completions")
            self.assertEqual(request["body"].get("model"), MODEL_NAME)
        else:
            self.assertEqual(request["headers"].get("x-goog-api-key"), self.setup.key)
            self.assertEqual(request["path"], f"/v1beta/models/{MODEL_NAME}:generateContent")

    def assertNoKey(self, text, where):
        """Neither the key nor its random tail (a partly redacted key) is in `text`."""
        for secret in (self.setup.key, self.setup.key[-16:]):
            at = text.find(secret)
            if at >= 0:  # the text around it, not all of a long log
                self.fail(f"the API key is in {where}: ...{text[max(0, at - 300):at + 300]}...")

    def go_or_skip(self):
        if "go" not in available_languages(self):
            self.skip_or_fail("go is not an available language here")


# --------------------------------------------------------------------------------------------
# The loop, for both providers


class SolveTests:
    """The agent loop's cases (issue: success, a compile error and a crash fixed, giving up,
    stderr, an empty answer, provider failures, the stream, the tools)."""

    def test_success_at_the_first_attempt(self):
        """The program is taken out of prose and fence, run, accepted; the model got the system
        and user messages, the model name and the key, and nothing else."""
        reply = fenced("print('hello from the model')",
                       prose="Sure! This program prints the greeting.")
        self.model.push(reply)
        task = "Print the text hello from the model."
        answer = self.solve(task)
        (a,) = self.assertAnswer(answer, "solved", 1)
        self.assertEqual((answer["output"], answer["language"]), ("hello from the model\n",
                                                                  "python"), answer)
        self.assertEqual((a["code"], a["stdout"], a["stderr"], a["exit_code"], a["verdict"],
                          a["accepted"], a["failure"]),
                         ("print('hello from the model')", "hello from the model\n", "", 0, "ok",
                          True, None), a)
        requests = self.requests()
        self.assertEqual(len(requests), 1, self.show_requests())
        req = requests[0]
        self.assertKeyHeader(req)
        roles = conversation(req)
        self.assertEqual([r for r, _ in roles], ["system", "user"], roles)
        self.assertTrue(roles[0][1].strip(), "the system message is empty")
        self.assertEqual(roles[1][1], task)
        self.assertFalse(req["body"].get("tools"), "the loop offers the model no tools")
        self.assertGreater(a["prompt_tokens"], 0, a)
        self.assertGreater(a["completion_tokens"], 0, a)
        self.assertEqual((a["prompt_tokens"], a["completion_tokens"]),
                         (prompt_tokens(req, self.provider), completion_tokens(reply)),
                         "the usage is the one the model reported")
        self.assertEqual(self.model.pending(), 0)

    def test_the_block_naming_the_language_wins(self):
        """An answer with a Python block first and a bash block second, for a bash task: the
        bash block is the program."""
        text = ("A Python version:\n\n```python\nprint('python ran')\n```\n\nAnd in bash, as "
                "asked:\n\n```bash\necho \"bash ran\"\n```\n")
        self.model.push({"text": text})
        answer = self.solve("Print bash ran, in bash.", language="bash")
        (a,) = self.assertAnswer(answer, "solved", 1)
        self.assertEqual((answer["language"], a["code"], answer["output"]),
                         ("bash", 'echo "bash ran"', "bash ran\n"), answer)

    def test_a_go_compile_error_is_fixed_at_the_second_attempt(self):
        """The compiler's error goes back to the model with the program it answered, and the
        corrected program is accepted. Go's own default timeout (20 s) covers the builds."""
        self.go_or_skip()
        broken = ('package main\n\nimport "fmt"\n\nfunc main() {\n'
                  '\tfmt.Println("total:", totl)\n}')
        fixed = ('package main\n\nimport "fmt"\n\nfunc main() {\n\ttotal := 6 * 7\n'
                 '\tfmt.Println("total:", total)\n}')
        first = fenced(broken, "go")
        self.model.push(first, fenced(fixed, "go", prose="Fixed the variable's name."))
        task = "Write a Go program that prints total: followed by 6 times 7."
        answer = self.solve(task, language="go", timeout=GO_HTTP_TIMEOUT_S)
        a1, a2 = self.assertAnswer(answer, "solved", 2)
        self.assertEqual((a1["code"], a1["accepted"]), (broken, False), a1)
        self.assertIn("undefined: totl", a1["stderr"], a1)
        self.assertIsInstance(a1["exit_code"], int, a1)
        self.assertNotEqual(a1["exit_code"], 0, a1)
        self.assertIn("exit", a1["failure"], a1)
        self.assertIn(str(a1["exit_code"]), a1["failure"], "the failure names the exit code")
        self.assertEqual((a2["code"], a2["stdout"], a2["accepted"]), (fixed, "total: 42\n", True),
                         a2)
        self.assertEqual(answer["output"], "total: 42\n")

        requests = self.requests()
        self.assertEqual(len(requests), 2, self.show_requests())
        second = conversation(requests[1])
        self.assertEqual([r for r, _ in second], ["system", "user", "assistant", "user"], second)
        self.assertEqual(second[:2], conversation(requests[0]), "the same conversation goes on")
        self.assertEqual(second[1][1], task)
        self.assertEqual(second[2][1], first["text"], "the model's own answer, as it gave it")
        feedback = second[3][1]
        for what in ("undefined: totl", a1["failure"], str(a1["exit_code"]), a1["verdict"]):
            self.assertIn(what, feedback, f"the failure sent back misses {what!r}")
        self.assertKeyHeader(requests[1])

    def test_a_crash_is_fixed(self):
        """A Python traceback is what the model reads at its second attempt."""
        crash = "numbers = [3, 0]\nprint(numbers[0] / numbers[1])"
        self.model.push(fenced(crash), fenced("numbers = [3, 0]\nprint(sum(numbers))"))
        answer = self.solve("Print the sum of 3 and 0.")
        a1, a2 = self.assertAnswer(answer, "solved", 2)
        self.assertIn("ZeroDivisionError", a1["stderr"], a1)
        self.assertEqual((a1["exit_code"], a1["accepted"]), (1, False), a1)
        self.assertEqual((a2["stdout"], answer["output"]), ("3\n", "3\n"), answer)
        requests = self.requests()
        self.assertEqual(len(requests), 2, self.show_requests())
        feedback = conversation(requests[1])[-1]
        self.assertEqual(feedback[0], "user", feedback)
        for what in ("Traceback (most recent call last)", "ZeroDivisionError: division by zero",
                     a1["failure"]):
            self.assertIn(what, feedback[1], f"the failure sent back misses {what!r}")

    def test_it_gives_up_after_max_attempts(self):
        """Two failing programs with max_attempts 2: failed, each attempt with its stderr, two
        model requests and no third (the reply queued for one stays queued)."""
        self.model.push(fenced("import sys\nsys.exit('first failure')"),
                        fenced("print('partial')\nraise ValueError('second failure')"),
                        fenced("print('never asked for')"))
        answer = self.solve("Print something.", max_attempts=2)
        a1, a2 = self.assertAnswer(answer, "failed", 2)
        self.assertIn("first failure", a1["stderr"], a1)
        self.assertIn("ValueError: second failure", a2["stderr"], a2)
        for a in (a1, a2):
            self.assertEqual((a["exit_code"], a["accepted"]), (1, False), a)
            self.assertIsInstance(a["failure"], str, a)
        self.assertEqual(answer["output"], "partial\n", "the stdout of the last attempt")
        self.assertEqual(len(self.requests()), 2, self.show_requests())
        self.assertEqual(self.model.pending(), 1, "a third model request was made")

    def test_stderr_with_exit_0_is_not_accepted(self):
        """Exit 0 with an error on stderr is a failure the model is told about."""
        noisy = "import sys\nprint('42')\nprint('warning: guessed', file=sys.stderr)"
        self.model.push(fenced(noisy), fenced("print('42')"))
        answer = self.solve("Print 42.", max_attempts=2)
        a1, a2 = self.assertAnswer(answer, "solved", 2)
        self.assertEqual((a1["exit_code"], a1["verdict"], a1["accepted"]), (0, "ok", False), a1)
        self.assertIn("stderr", a1["failure"], a1)
        self.assertTrue(a2["accepted"], a2)
        feedback = conversation(self.requests()[1])[-1][1]
        self.assertIn("warning: guessed", feedback)

    def test_a_python_warning_alone_is_accepted(self):
        """A warnings line (and its source line) is noise, not an error."""
        self.model.push(fenced('import warnings\nwarnings.warn("x")\nprint(1)'))
        answer = self.solve("Print 1.", max_attempts=1)
        (a,) = self.assertAnswer(answer, "solved", 1)
        self.assertIn("UserWarning: x", a["stderr"], a)
        self.assertEqual((a["stdout"], a["accepted"]), ("1\n", True), a)
        self.assertEqual(len(self.requests()), 1, self.show_requests())

    def test_an_answer_without_a_program_then_a_good_one(self):
        """A blank answer is an attempt that ran nothing; the model is asked again."""
        self.model.push({"text": "  \n\n  "}, fenced("print('now with a program')"))
        answer = self.solve("Print now with a program.")
        a1, a2 = self.assertAnswer(answer, "solved", 2)
        self.assertEqual((a1["code"], a1["verdict"], a1["exit_code"], a1["accepted"],
                          a1["failure"]),
                         ("", None, None, False, "the answer held no program"), a1)
        self.assertEqual((a2["stdout"], answer["output"]), ("now with a program\n",) * 2, answer)
        requests = self.requests()
        self.assertEqual(len(requests), 2, self.show_requests())
        second = conversation(requests[1])
        self.assertEqual([r for r, _ in second], ["system", "user", "assistant", "user"], second)
        self.assertIn("no program", second[3][1])

    # -- the provider fails

    def test_an_http_500_is_a_502(self):
        self.model.push({"status": 500})
        detail = self.assertProviderFailure(self.solve("Print 1.", expect_status=502))
        self.assertIn("HTTP 500", detail)
        self.assertIn("scripted failure", detail, "the provider's own message")

    def test_malformed_answers_are_502(self):
        for raw in ("not json", '{"id": "an answer without choices or candidates"}'):
            with self.subTest(raw=raw):
                self.model.clear()
                self.model.push({"raw": raw})
                self.assertProviderFailure(self.solve("Print 1.", expect_status=502))

    def test_an_answer_nested_too_deep_is_a_502(self):
        # Issue 30 item 3: tool-call arguments nested 200,000 deep overflowed the daemon's stack.
        for depth in (200000, 129):
            with self.subTest(depth=depth):
                self.model.clear()
                self.model.push({"raw": deep_tool_call(self.provider, depth)})
                detail = self.assertProviderFailure(self.solve("Print 1.", expect_status=502))
                self.assertIn("nested deeper than 128 levels", detail)
        self.assertHealthy()

    def test_a_failure_at_the_second_request_keeps_the_first_attempt(self):
        self.model.push(fenced("print(1 / 0)"), {"status": 500})
        answer = self.solve("Print 1.", expect_status=502)
        detail = self.assertProviderFailure(answer, attempts=1)
        self.assertIn("HTTP 500", detail)
        a = answer["attempts"][0]
        self.assertEqual((a["code"], a["accepted"]), ("print(1 / 0)", False), a)
        self.assertIn("ZeroDivisionError", a["stderr"], a)
        self.assertEqual(len(self.requests()), 2, self.show_requests())

    # -- the stream

    def stream(self, body, timeout=60):
        res = self.client.sse(SOLVE_STREAM, body, timeout=timeout)
        self.assertEqual(res.status, 200, f"{res.status} {res.body!r}{self.show_requests()}")
        self.assertTrue(res.headers.get("Content-Type", "").startswith("text/event-stream"))
        self.assertEqual(res.unknown_lines, [], "lines that are neither event: nor data:")
        self.assertIsNone(res.unterminated, "the last frame was not terminated by a blank line")
        return res

    def test_the_stream_of_a_two_attempt_solve(self):
        """program, output*, attempt per attempt, then one result: the batch answer's object."""
        first = "import sys\nprint('first try')\nprint('oops', file=sys.stderr)\nsys.exit(3)"
        second = "print('second try')"
        script = (fenced(first), fenced(second))
        body = {"task": "Print second try.", "max_attempts": 3}
        self.model.push(*script)
        res = self.stream(body)
        shape = " ".join(e for e, _, _ in res.events)
        self.assertRegex(shape, r"^program (output )*attempt program (output )*attempt result$")
        attempt, texts, attempt_events, programs = 0, {}, [], []
        for name, data, _ in res.events:
            if name == "program":
                attempt += 1
                self.assertEqual(set(data), PROGRAM_EVENT_KEYS, data)
                self.assertEqual(data["attempt"], attempt, data)
                programs.append(data)
            elif name == "output":
                self.assertEqual(set(data), {"attempt", "stream", "data"}, data)
                self.assertEqual(data["attempt"], attempt, "an output event names its attempt")
                key = (data["attempt"], data["stream"])
                texts[key] = texts.get(key, "") + data["data"]
            elif name == "attempt":
                attempt_events.append(data)
        self.assertEqual(texts, {(1, "stdout"): "first try\n", (1, "stderr"): "oops\n",
                                 (2, "stdout"): "second try\n"})
        self.assertEqual([p["code"] for p in programs], [first, second])
        result = res.events[-1][1]
        attempts = self.assertAnswer(result, "solved", 2)
        self.assertEqual(attempt_events, attempts, "the attempt events are the result's")
        self.assertEqual(attempts[0]["exit_code"], 3)
        self.assertEqual(result["output"], "second try\n")
        for p, a in zip(programs, attempts):
            self.assertEqual(p, {k: a[k] for k in PROGRAM_EVENT_KEYS})

        self.model.clear()
        self.model.push(*script)
        batch = self.solve(body["task"], max_attempts=3)
        self.assertEqual(without_timing(result), without_timing(batch),
                         "the result event is the batch answer")

    def test_the_stream_ends_with_an_error_event(self):
        """A provider failure mid-stream: the attempt made, then one error event."""
        self.model.push(fenced("print(1 / 0)"), {"status": 500})
        res = self.stream({"task": "Print 1."})
        shape = " ".join(e for e, _, _ in res.events)
        self.assertRegex(shape, r"^program (output )*attempt error$")
        error = res.events[-1][1]
        self.assertEqual(error.get("status"), 502, error)
        self.assertEqual(set(error), {"status", "detail", "attempts"}, error)
        self.assertTrue(error["detail"].startswith(PROVIDER_FAILED), error)
        self.assertIn("HTTP 500", error["detail"])
        self.assertEqual(len(error["attempts"]), 1, error)
        self.assertEqual(error["attempts"][0], res.events[-2][1])

    def test_the_stream_refuses_a_bad_body_before_streaming(self):
        res = self.client.sse(SOLVE_STREAM, {"task": ""})
        self.assertEqual(res.status, 422, res.body)
        self.assertIn("task", (res.json or {}).get("detail", ""), res.body)
        self.assertEqual(self.requests(), [])

    # -- the tools

    def test_the_tools_with_a_model(self):
        languages = available_languages(self)
        tools = tools_of(self, "openai")
        self.assertEqual(sorted(tools), ["execute_code", "solve_task"])
        check_execute_code(self, tools["execute_code"], languages, "object", "string",
                           "integer")
        solve = tools["solve_task"]["parameters"]
        self.assertEqual(solve["type"], "object")
        self.assertEqual(solve["required"], ["detailedDescription"])
        self.assertEqual(solve["properties"]["detailedDescription"]["type"], "string")
        gemini = tools_of(self, "gemini")
        self.assertEqual(sorted(gemini), ["execute_code", "solve_task"])
        check_execute_code(self, gemini["execute_code"], languages, "OBJECT", "STRING",
                           "INTEGER")
        self.assertEqual(gemini["solve_task"]["parameters"]["type"], "OBJECT")
        self.assertEqual(gemini["solve_task"]["parameters"]["required"],
                         ["detailedDescription"])
        default = self.client.get("/v1/tools")
        self.assertEqual(default.status, 200, default)
        self.assertEqual(default.json["format"], "openai", "openai is the default format")
        self.assertEqual(sorted(t["function"]["name"] for t in default.json["tools"]),
                         ["execute_code", "solve_task"])
        self.assertDetail(self.client.get("/v1/tools?format=anthropic"), 422)


def deep_tool_call(provider, depth):
    """A provider's answer calling execute_code with arguments nested `depth` arrays deep."""
    deep = "[" * depth + "]" * depth
    if provider == "openai":
        return ('{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": '
                '"assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": '
                '{"name": "execute_code", "arguments": ' + deep + '}}]}}]}')
    return ('{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
            '{"name": "execute_code", "args": ' + deep + '}}]}}]}')


def tools_of(test, fmt):
    """name -> {"name", "description", "parameters"} of GET /v1/tools?format=fmt, after
    checking the format's envelope."""
    r = test.client.get(f"/v1/tools?format={fmt}")
    test.assertEqual(r.status, 200, r)
    test.assertEqual(set(r.json), {"format", "tools"}, r.json)
    test.assertEqual(r.json["format"], fmt)
    tools = r.json["tools"]
    if fmt == "openai":
        for t in tools:
            test.assertEqual(set(t), {"type", "function"}, t)
            test.assertEqual(t["type"], "function", t)
        declarations = [t["function"] for t in tools]
    else:
        test.assertEqual(len(tools), 1, tools)
        test.assertEqual(set(tools[0]), {"functionDeclarations"}, tools)
        declarations = tools[0]["functionDeclarations"]
    for d in declarations:
        test.assertEqual(set(d), {"name", "description", "parameters"}, d)
        test.assertTrue(d["description"].strip(), d)
    return {d["name"]: d for d in declarations}


def check_execute_code(test, tool, languages, obj, string, integer):
    """execute_code's declaration, in a format's spelling of the types."""
    test.assertIn("no network", tool["description"].lower(), tool["description"])
    p = tool["parameters"]
    test.assertEqual(p["type"], obj, p)
    test.assertEqual(p["required"], ["code"], p)
    props = p["properties"]
    test.assertEqual(sorted(props), ["code", "language", "stdin", "timeout_ms"], props)
    test.assertEqual(props["code"]["type"], string, props)
    test.assertEqual(props["stdin"]["type"], string, props)
    test.assertEqual(props["timeout_ms"]["type"], integer, props)
    test.assertEqual(props["language"]["type"], string, props)
    test.assertEqual(set(props["language"]["enum"]), languages,
                     "the enum lists the languages that run")


class KeyTests:
    """The key reaches the model and nothing else: not an answer (a provider that echoes it is
    redacted), not the log, not a sandbox's environment, processes or files."""

    def test_an_echoed_key_is_redacted(self):
        for endpoint in ("batch", "stream"):
            with self.subTest(endpoint=endpoint):
                self.model.clear()
                self.model.push({"echo_key": True})
                if endpoint == "batch":
                    r = self.client.post_json(SOLVE, {"task": "Print 1."})
                    self.assertEqual(r.status, 502, r)
                    text = r.body.decode("utf-8", "replace")
                    detail = self.assertProviderFailure(r.json)
                else:
                    res = self.client.sse(SOLVE_STREAM, {"task": "Print 1."})
                    self.assertEqual(res.status, 200, res.body)
                    text = "".join(res.raw_lines)
                    self.assertEqual([e for e, _, _ in res.events], ["error"], text)
                    error = res.events[0][1]
                    self.assertEqual(error["status"], 502, error)
                    detail = error["detail"]
                # The server did get the key, and did echo it: the daemon took it out.
                self.assertEqual(len(self.requests()), 1, self.show_requests())
                self.assertKeyHeader(self.requests()[0])
                self.assertIn("HTTP 401", detail)
                self.assertIn(ECHO_PHRASE[self.provider], detail,
                              "the provider's message is kept, without the key")
                self.assertNoKey(text, f"the {endpoint} answer")
        self.assertNoKey(self.daemon.log_since(0), "the daemon's log")

    def test_the_log_never_holds_the_key(self):
        """After a solve, a failure and an echo: no line of the whole log (debug level, from
        the start) holds the key."""
        self.model.push(fenced("print(1)"), {"status": 500}, {"echo_key": True})
        self.solve("Print 1.")
        self.solve("Print 1.", expect_status=502)
        self.solve("Print 1.", expect_status=502)
        self.assertEqual(len(self.requests()), 3, self.show_requests())
        log = self.daemon.log_since(0)
        self.assertTrue(log, "no log at all")
        self.assertNoKey(log, "the daemon's log")

    def test_a_sandbox_cannot_find_the_key(self):
        """A program searches its environment, every /proc/*/environ and /proc/*/cmdline it can
        read and the key file's path. It holds the key hex-encoded, so that finding the program
        itself (its source, its command line) is not finding the key."""
        paths = [self.setup.key_file] if self.setup.key_file else []
        code = KEY_SEARCH.format(hex=self.setup.key.encode().hex(), paths=paths)
        self.assertNotIn(self.setup.key, code)
        res = self.execute(code, timeout_ms=20000)
        self.assertEqual((res.get("exit_code"), res.get("stderr")), (0, ""), res)
        out = res["stdout"]
        m = re.search(r"^proc files read: (\d+)$", out, re.M)
        self.assertTrue(m, out)
        self.assertGreaterEqual(int(m.group(1)), 2, f"the search read nothing: {out}")
        self.assertIn("\nfound: []\n", "\n" + out, f"the sandbox found the key: {out}")
        self.assertNoKey(json.dumps(res), "the execute answer")


KEY_SEARCH = r'''
import glob
import os

key = bytes.fromhex({hex!r})
found, read = [], 0
for name, value in os.environ.items():
    if key in name.encode() or key in value.encode():
        found.append("os.environ[" + name + "]")
for path in sorted(glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        continue
    read += 1
    if key in data:
        found.append(path)
for path in {paths!r}:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        print("key file not readable:", path, type(e).__name__)
        continue
    print("key file readable:", path)
    if key in data:
        found.append(path)
print("proc files read:", read)
print("found:", found)
'''


class BodyValidationTests:
    """Every 422 of the body names its field, and none reaches the model."""

    def test_bad_bodies_are_422(self):
        cases = [
            ({}, "Field 'task' is required.", None),
            ({"task": 5}, None, "task"),
            ({"task": ""}, None, "task"),
            ({"task": " \n\t "}, None, "task"),
            ({"task": "x", "language": 3}, None, "language"),
            ({"task": "x", "timeout_ms": "fast"}, None, "timeout_ms"),
            ({"task": "x", "timeout_ms": 0}, None, "timeout_ms"),
            ({"task": "x", "timeout_ms": 1.5}, None, "timeout_ms"),
        ]
        for v in (0, 11, -1, "3", 2.5, True):
            cases.append(({"task": "x", "max_attempts": v},
                          "max_attempts must be an integer between 1 and 10.", None))
        for body, detail, contains in cases:
            with self.subTest(body=body):
                r = self.client.post_json(SOLVE, body)
                self.assertDetail(r, 422, detail, contains=contains)
        with self.subTest(language="cobol"):
            r = self.client.post_json(SOLVE, {"task": "x", "language": "cobol"})
            self.assertDetail(r, 422, prefix="Unsupported language")
        for raw in (b"not json", b"[1]"):
            with self.subTest(raw=raw):
                self.assertDetail(self.client.post_json(SOLVE, raw), 422)
        self.assertEqual(self.requests(), [], "a bad body reached the model")


# --------------------------------------------------------------------------------------------
# The classes: one daemon per configuration


class AbandonTests:
    """Issue #30 item 8: a loop whose client left makes no further model call (it kept calling
    the model for every attempt left)."""

    def abandon(self, path, read_first_event):
        program = fenced("import time\ntime.sleep(2)\nraise SystemExit(1)")
        self.model.push(*[program] * 5)
        conn = self.client.connection()
        conn.request("POST", path, body=json.dumps({"task": "Fail slowly.", "max_attempts": 5,
                                                    "timeout_ms": 10000}),
                     headers={"Content-Type": "application/json"})
        if read_first_event:
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            while b"event: program" not in r.readline():
                pass
            r.close()  # the socket stays open while the response holds it
        else:
            self.assertTrue(wait_until(lambda: len(self.requests()) == 1, 30),
                            "the model was never asked")
        conn.close()  # while attempt 1 runs
        time.sleep(4)  # attempt 1's program ends after 2 s; without the stop 2 was asked then
        self.assertEqual(len(self.requests()), 1, self.show_requests())

    def test_an_abandoned_stream_stops_asking_the_model(self):
        self.abandon(SOLVE_STREAM, read_first_event=True)

    def test_an_abandoned_batch_solve_stops_asking_the_model(self):
        self.abandon(SOLVE, read_first_event=False)


class OpenAIAgentTest(SolveTests, KeyTests, BodyValidationTests, AbandonTests, AgentCase):
    """OpenAI-compatible chat completions, the key in LLM_API_KEY."""
    setup = OPENAI
    daemon_env = OPENAI.env()


@local_backend_only
class GeminiAgentTest(SolveTests, KeyTests, AgentCase):
    """Gemini's generateContent, the key in LLM_API_KEY_FILE."""
    setup = GEMINI
    daemon_env = GEMINI.env()


@local_backend_only
class OpenAIKeyFileTest(KeyTests, AgentCase):
    """The other key source for each provider: OpenAI's from LLM_API_KEY_FILE."""
    setup = OPENAI_FILE
    daemon_env = OPENAI_FILE.env(**NO_WARM_POOL)


@local_backend_only
class GeminiKeyInlineTest(KeyTests, AgentCase):
    """... and Gemini's from LLM_API_KEY."""
    setup = GEMINI_INLINE
    daemon_env = GEMINI_INLINE.env(**NO_WARM_POOL)


class TimeoutTests:
    """LLM_TIMEOUT_SEC=1: a model that does not answer in time is a 504, soon. The bounds are
    generous; the point is seconds, not the 60 s default or never."""

    BOUND_S = 15

    def test_a_hang_is_a_504(self):
        self.model.push({"hang": True})
        r = self.client.post_json(SOLVE, {"task": "Print 1."}, timeout=60)
        self.assertEqual(r.status, 504, r)
        self.assertProviderFailure(r.json)
        self.assertLess(r.elapsed, self.BOUND_S, "LLM_TIMEOUT_SEC=1 was not applied")
        self.assertGreaterEqual(r.elapsed, 0.5, "it did not wait for the model at all")

    def test_a_slow_answer_is_a_504(self):
        self.model.push({"delay_s": 4, "text": "```python\nprint(1)\n```"})
        r = self.client.post_json(SOLVE, {"task": "Print 1."}, timeout=60)
        self.assertEqual(r.status, 504, r)
        self.assertProviderFailure(r.json)
        self.assertLess(r.elapsed, self.BOUND_S)

    def test_a_timeout_after_an_attempt_keeps_it(self):
        self.model.push(fenced("print(1 / 0)"), {"hang": True})
        r = self.client.post_json(SOLVE, {"task": "Print 1."}, timeout=60)
        self.assertEqual(r.status, 504, r)
        self.assertProviderFailure(r.json, attempts=1)
        self.assertIn("ZeroDivisionError", r.json["attempts"][0]["stderr"], r.json)
        self.assertLess(r.elapsed, self.BOUND_S)

    def test_the_stream_reports_the_timeout(self):
        self.model.push({"hang": True})
        res = self.client.sse(SOLVE_STREAM, {"task": "Print 1."}, timeout=60)
        self.assertEqual(res.status, 200, res.body)
        self.assertEqual([e for e, _, _ in res.events], ["error"], res.raw_lines)
        error = res.events[0][1]
        self.assertEqual(error["status"], 504, error)
        self.assertTrue(error["detail"].startswith(PROVIDER_FAILED), error)
        self.assertEqual(error["attempts"], [])
        self.assertLess(res.elapsed, self.BOUND_S)


@local_backend_only
class OpenAITimeoutTest(TimeoutTests, AgentCase):
    setup = OPENAI_SLOW
    daemon_env = OPENAI_SLOW.env(LLM_TIMEOUT_SEC="1", **NO_WARM_POOL)


@local_backend_only
class GeminiTimeoutTest(TimeoutTests, AgentCase):
    setup = GEMINI_SLOW
    daemon_env = GEMINI_SLOW.env(LLM_TIMEOUT_SEC="1", **NO_WARM_POOL)


# --------------------------------------------------------------------------------------------
# HTTPS and an unreachable model


# API keys for ModelCallLimitsTest: alice may not call the model, bob and carol have the default.
API_KEYS = {name: f"{name}-" + secrets.token_hex(16) for name in ("alice", "bob", "carol")}
API_KEYS_FILE = _key_file("api-keys", f"alice {API_KEYS['alice']} model_calls=0\n"
                                      f"bob {API_KEYS['bob']}\ncarol {API_KEYS['carol']}")


@local_backend_only
class ModelCallLimitsTest(AgentCase):
    """Issue #30 items 6 and 8: model calls in flight are capped on the replica
    (MAX_CONCURRENT_MODEL_CALLS) and per key (MAX_MODEL_CALLS_PER_KEY, model_calls= on the key's
    line); a key with model_calls=0 may not start the loop at all."""
    setup = OPENAI_LIMITS
    daemon_env = OPENAI_LIMITS.env(API_KEYS_FILE=API_KEYS_FILE, MAX_CONCURRENT_MODEL_CALLS="1",
                                   EXECUTION_QUEUE_TIMEOUT_SEC="1", **NO_WARM_POOL)

    def as_key(self, name):
        return Client(self.host, self.port, self._exchanges,
                      headers={"Authorization": f"Bearer {API_KEYS[name]}"})

    def test_a_key_without_model_calls_is_refused_before_the_model(self):
        r = self.as_key("alice").post_json(SOLVE, {"task": "Print 1."})
        self.assertDetail(r, 403, "API key 'alice' may not call the model (model_calls=0 on its "
                                  "line in API_KEYS_FILE)")
        self.assertEqual(self.requests(), [], "the model was asked")

    def test_calls_beyond_the_replicas_and_the_keys_share_wait_then_are_refused(self):
        self.model.push({"delay_s": 4, **fenced("print(1)")})
        first = {}
        slow = threading.Thread(target=lambda: first.update(
            r=self.as_key("bob").post_json(SOLVE, {"task": "Print 1."}, timeout=60)))
        slow.start()
        try:
            self.assertTrue(wait_until(lambda: len(self.requests()) == 1, 30, 0.05),
                            "the model was never asked")
            r = self.as_key("bob").post_json(SOLVE, {"task": "Print 2."})
            self.assertDetail(r, 429, prefix="API key 'bob' has 1 model calls in flight, its "
                                             "share (model_calls= on its line")
            r = self.as_key("carol").post_json(SOLVE, {"task": "Print 3."})
            self.assertDetail(r, 429, prefix="The model is busy: MAX_CONCURRENT_MODEL_CALLS")
        finally:
            slow.join()
        self.assertEqual(first["r"].status, 200, first["r"])
        self.assertEqual(first["r"].json["status"], "solved", first["r"].json)
        self.assertEqual(len(self.requests()), 1, self.show_requests())


class TlsCase(AgentCase):
    @classmethod
    def setUpClass(cls):
        if TLS_UNAVAILABLE:
            raise unittest.SkipTest(f"no TLS model server: {TLS_UNAVAILABLE}")
        super().setUpClass()


class TrustedTlsTests:
    """An https:// base URL whose CA the daemon trusts through SSL_CERT_FILE: it works."""

    def test_a_solve_over_https(self):
        self.model.push(fenced("print('over https')"))
        answer = self.solve("Print over https.")
        self.assertAnswer(answer, "solved", 1)
        self.assertEqual(answer["output"], "over https\n")
        self.assertEqual(len(self.requests()), 1, self.show_requests())
        self.assertKeyHeader(self.requests()[0])


@local_backend_only
class TrustedTlsOpenAITest(TrustedTlsTests, TlsCase):
    setup = OPENAI_TLS
    daemon_env = (OPENAI_TLS.env(SSL_CERT_FILE=OPENAI_TLS.model.ca_file, **NO_WARM_POOL)
                  if OPENAI_TLS else {})


@local_backend_only
class TrustedTlsGeminiTest(TrustedTlsTests, TlsCase):
    setup = GEMINI_TLS
    daemon_env = (GEMINI_TLS.env(SSL_CERT_FILE=GEMINI_TLS.model.ca_file, **NO_WARM_POOL)
                  if GEMINI_TLS else {})


@local_backend_only
class UntrustedTlsTest(TlsCase):
    """The same server, its CA not trusted: the certificate is refused (a 502 that says so)
    and no request (no key) reaches it."""
    setup = OPENAI_TLS
    daemon_env = OPENAI_TLS.env(**NO_WARM_POOL) if OPENAI_TLS else {}

    def test_an_untrusted_certificate_is_a_502(self):
        self.model.push(fenced("print('must not run')"))
        detail = self.assertProviderFailure(self.solve("Print 1.", expect_status=502))
        self.assertIn("certificate", detail.lower())
        self.assertEqual(self.requests(), [], "a request went through an unverified TLS")
        self.assertEqual(self.model.pending(), 1)


UNREACHABLE_ENV = {"LLM_PROVIDER": "openai", "LLM_MODEL": MODEL_NAME,
                   "LLM_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1",
                   "LLM_API_KEY": _new_key("unreachable"), **NO_WARM_POOL}


@local_backend_only
class UnreachableModelTest(E2ETestCase):
    """A base URL where nothing listens: the refused connection is a 502."""
    daemon_env = UNREACHABLE_ENV

    def test_a_refused_connection_is_a_502(self):
        r = self.client.post_json(SOLVE, {"task": "Print 1."})
        self.assertEqual(r.status, 502, r)
        self.assertEqual(set(r.json), {"detail", "attempts"}, r.json)
        self.assertTrue(r.json["detail"].startswith(PROVIDER_FAILED), r.json)
        self.assertEqual(r.json["attempts"], [])
        self.assertNotIn(UNREACHABLE_ENV["LLM_API_KEY"], r.body.decode())


# --------------------------------------------------------------------------------------------
# No model configured, and a key file a sandbox could read


NO_MODEL_ENV = {"LLM_PROVIDER": "", **NO_WARM_POOL}


@local_backend_only
class NoModelTest(E2ETestCase):
    """Without LLM_PROVIDER: execute_code is offered, solve_task is not, and the loop is a
    503 that says what to configure."""
    daemon_env = NO_MODEL_ENV

    def test_the_tools_without_a_model(self):
        languages = available_languages(self)
        for fmt, types in (("openai", ("object", "string", "integer")),
                           ("gemini", ("OBJECT", "STRING", "INTEGER"))):
            with self.subTest(format=fmt):
                tools = tools_of(self, fmt)
                self.assertEqual(sorted(tools), ["execute_code"])
                check_execute_code(self, tools["execute_code"], languages, *types)

    def test_solve_is_503(self):
        self.assertDetail(self.client.post_json(SOLVE, {"task": "Print 1."}), 503,
                          contains="LLM_PROVIDER")
        res = self.client.sse(SOLVE_STREAM, {"task": "Print 1."})
        self.assertEqual(res.status, 503, res.body)
        self.assertIn("LLM_PROVIDER", (res.json or {}).get("detail", ""), res.body)


class KeyFilePlaceTest(E2ETestCase):
    """A key file under /usr (which every local sandbox mounts) would hand the key to the
    programs it pays for: the daemon refuses to start, exit 2, naming the file."""
    daemon_env = NO_MODEL_ENV

    def test_a_key_file_under_usr_is_refused(self):
        self.require_host_daemon("starts a daemon of its own and reads its exit code")
        where = "/usr/local/lib"
        if not (os.path.isdir(where) and os.access(where, os.W_OK)):
            self.skipTest(f"{where} is not writable here: no key file can be put under /usr")
        key = _new_key("usr")
        fd, path = tempfile.mkstemp(prefix="code-interpreter-test-key-", dir=where)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(key + "\n")
            os.chmod(path, 0o644)
            env = {k: v for k, v in OPENAI.env().items() if k != "LLM_API_KEY"}
            d = Daemon({**env, "LLM_API_KEY_FILE": path, **NO_WARM_POOL})
            try:
                d.start()
                started = True
            except RuntimeError:
                started = False
            try:
                if started:
                    self.fail(f"the daemon started with LLM_API_KEY_FILE={path}:\n"
                              f"{d.log_since(0)}")
                code = d.proc.wait(10)
                d._reader.join(5)  # every line of the log read
                log = d.log_since(0)
                self.assertEqual(code, 2, f"the exit code, want 2:\n{log}")
                self.assertIn(os.path.basename(path), log, "the refusal names the file")
                self.assertNotIn(key, log)
            finally:
                if started:
                    d.stop()
                d.cleanup()
        finally:
            os.unlink(path)


# --------------------------------------------------------------------------------------------
# code-interpreter ask


class AskTest(unittest.TestCase):
    """The CLI asks the model with the solve_task declaration, runs the loop in its own
    sandboxes when the model calls it, and sends the result back in the provider's format. The
    scripted server's default rules answer docs/agent.md's question with no script."""

    def setUp(self):
        if not Config.bin_path:
            self.skipTest("no --bin (--url or --image mode): the CLI needs the binary")
        if Config.expected_backend not in (None, "local"):
            self.skipTest(f"{Config.expected_backend} backend: the CLI's loop is the daemon's, "
                          "tested against the local backend (see local_backend_only)")

    def run_cli(self, env, *args):
        full = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
        full.update(env)
        return subprocess.run([Config.bin_path, *args], capture_output=True, text=True,
                              timeout=180, env=full)

    def require_sandboxes(self):
        """`ask` runs sandboxes in this process, as `run` does: without the privileges for
        them, skip (or fail with CI_E2E_NO_SKIP=1)."""
        r = self.run_cli({}, "run", "-c", "print(6 * 7)")
        if (r.returncode, r.stdout) != (0, "42\n"):
            why = f"`code-interpreter run` cannot make sandboxes here: {r.stderr.strip()[:300]}"
            if Config.no_skip:
                self.fail(why + " (CI_E2E_NO_SKIP=1 turns this skip into a failure)")
            self.skipTest(why)

    def ask(self, setup):
        self.require_sandboxes()
        setup.model.clear()
        r = self.run_cli(setup.env(), "ask", scripted_model.PRIME_QUESTION)
        requests = list(setup.model.requests)
        shown = "\n".join(f"  {q['path']} {json.dumps(q['body'])[:1200]}" for q in requests)
        why = f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}\nrequests:\n{shown}"
        self.assertEqual(r.returncode, 0, why)
        self.assertIn(DIVISORS, r.stdout, why)
        self.assertIn("solve_task", r.stderr, "a progress line names the tool call\n" + why)
        for text, where in ((r.stdout, "stdout"), (r.stderr, "stderr")):
            self.assertNotIn(setup.key, text, f"the key is on {where}")
        # The question (with tools), the loop's own request (without), the tool's result.
        self.assertEqual(len(requests), 3, why)
        ask1, loop, ask2 = requests
        self.assertTrue(ask1["body"].get("tools"), "the question goes with the declaration")
        self.assertFalse(loop["body"].get("tools"), "the loop's request offers no tools")
        self.assertTrue(ask2["body"].get("tools"), why)
        self.assertEqual(conversation(loop)[-1], ("user", scripted_model.PRIME_TASK))
        self.assertIn(("user", scripted_model.PRIME_QUESTION), conversation(ask1))
        return ask1, ask2

    def test_ask_openai(self):
        ask1, ask2 = self.ask(OPENAI)
        tools = ask1["body"]["tools"]
        self.assertEqual([t["function"]["name"] for t in tools], ["solve_task"], tools)
        messages = ask2["body"]["messages"]
        self.assertEqual([m["role"] for m in messages],
                         ["system", "user", "assistant", "tool"], messages)
        call = messages[2]["tool_calls"][0]
        self.assertEqual(call["function"]["name"], "solve_task", call)
        # The server's first (and only) call id: clear() restarts its numbering.
        self.assertEqual(call["id"], "call_1", call)
        self.assertEqual(messages[3].get("tool_call_id"), "call_1", messages[3])
        result = json.loads(messages[3]["content"])
        self.assertEqual(result["status"], "solved", result)
        self.assertIn(DIVISORS, result["output"], result)
        self.assertEqual(ask2["headers"].get("authorization"), f"Bearer {OPENAI.key}")

    def test_ask_gemini(self):
        ask1, ask2 = self.ask(GEMINI)
        declared = [d["name"] for t in ask1["body"]["tools"]
                    for d in t.get("functionDeclarations", [])]
        self.assertEqual(declared, ["solve_task"], ask1["body"]["tools"])
        contents = ask2["body"]["contents"]
        calls = [p["functionCall"] for c in contents if c.get("role") == "model"
                 for p in c.get("parts", []) if "functionCall" in p]
        self.assertEqual([c["name"] for c in calls], ["solve_task"], contents)
        responses = [p["functionResponse"] for c in contents for p in c.get("parts", [])
                     if "functionResponse" in p]
        self.assertEqual(len(responses), 1, contents)
        self.assertTrue(any("functionResponse" in p for p in contents[-1].get("parts", [])),
                        f"the function response is the last content: {contents}")
        response = responses[0]
        self.assertEqual(response.get("name"), "solve_task", response)
        self.assertEqual(response["response"]["status"], "solved", response)
        self.assertIn(DIVISORS, response["response"]["output"], response)
        self.assertEqual(ask2["headers"].get("x-goog-api-key"), GEMINI.key)

    def test_ask_refuses_an_answer_nested_too_deep(self):
        self.require_sandboxes()
        for setup in (OPENAI, GEMINI):
            with self.subTest(provider=setup.provider):
                setup.model.clear()
                setup.model.push({"raw": deep_tool_call(setup.provider, 200000)})
                r = self.run_cli(setup.env(), "ask", scripted_model.PRIME_QUESTION)
                self.assertEqual(r.returncode, 1, r)
                self.assertIn("nested deeper than 128 levels", r.stderr, r)

    def test_ask_runs_a_few_tool_calls_of_one_answer(self):
        """Issue #30 item 8: one answer calling a tool 20 times runs 4 of the calls; every call
        still gets its function response, the rest saying they were not run."""
        self.require_sandboxes()
        OPENAI.model.clear()
        calls = [{"id": f"call_{i}", "type": "function",
                  "function": {"name": "solve_task", "arguments": "{}"}} for i in range(20)]
        OPENAI.model.push({"raw": json.dumps({"choices": [{
            "index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": calls}}]})},
            {"text": "done"})
        r = self.run_cli(OPENAI.env(), "ask", scripted_model.PRIME_QUESTION)
        self.assertEqual((r.returncode, r.stdout), (0, "done\n"), r)
        requests = list(OPENAI.model.requests)
        self.assertEqual(len(requests), 2, [q["body"] for q in requests])
        answers = [m for m in requests[1]["body"]["messages"] if m["role"] == "tool"]
        self.assertEqual([m["tool_call_id"] for m in answers], [c["id"] for c in calls])
        not_run = [m for m in answers if "not run: at most 4 tool calls" in m["content"]]
        self.assertEqual(len(not_run), 16, answers)

    def test_ask_without_a_provider_is_exit_2(self):
        r = self.run_cli({}, "ask", scripted_model.PRIME_QUESTION)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("LLM_PROVIDER", r.stderr, r)
        self.assertEqual(r.stdout, "", r)
