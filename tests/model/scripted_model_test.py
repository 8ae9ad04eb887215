#!/usr/bin/env python3
"""The scripted model server against real HTTP clients: each reply kind in both wire formats,
the key check, the fallback rules, TLS with its generated CA, the control API and the command
line. The daemon's provider tests trust this server to be the real formats, so it is tested
first. Prints TAP version 13 on stdout (meson's protocol: 'tap' counts every case)."""

import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)

import scripted_model  # noqa: E402
from scripted_model import ScriptedModel  # noqa: E402

KEY = "sk-test-0123456789"
PROMPT = "Is 1201281 prime? List all its divisors."
TOOLS_OPENAI = [{"type": "function", "function": {
    "name": "solve_task", "description": "Solve a task in a sandbox",
    "parameters": {"type": "object", "properties": {"detailedDescription": {"type": "string"}},
                   "required": ["detailedDescription"]}}}]
TOOLS_GEMINI = [{"functionDeclarations": [{
    "name": "solve_task", "description": "Solve a task in a sandbox",
    "parameters": {"type": "OBJECT",
                   "properties": {"detailedDescription": {"type": "STRING"}}}}]}]


def request(url, method, path, body=None, headers=None, timeout=10, context=None):
    """(status, headers, parsed JSON or raw text) of one request on a fresh connection."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout,
                                           context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read().decode()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed
    finally:
        conn.close()


def openai_body(text=PROMPT, tools=False, messages=None):
    body = {"model": "gpt-test", "messages": messages or [{"role": "user", "content": text}]}
    if tools:
        body["tools"] = TOOLS_OPENAI
    return body


def gemini_body(text=PROMPT, tools=False, contents=None):
    body = {"contents": contents or [{"role": "user", "parts": [{"text": text}]}]}
    if tools:
        body["tools"] = TOOLS_GEMINI
    return body


def program_of(text):
    """The program in a ```python fenced block."""
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m, text
    return m.group(1)


def run_python(program):
    p = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


class ModelTestCase(unittest.TestCase):
    """A fresh server per test (options from the class), stopped whatever happens."""
    options = {}

    def setUp(self):
        self.model = ScriptedModel(**self.options).start()
        self.addCleanup(self.model.stop)

    def openai(self, body, headers=None, **kw):
        return request(self.model.url, "POST", "/v1/chat/completions", body, headers, **kw)

    def gemini(self, body, headers=None, model="gemini-test", **kw):
        return request(self.model.url, "POST", f"/v1beta/models/{model}:generateContent",
                       body, headers, **kw)


class OpenAIFormatTest(ModelTestCase):
    def test_text(self):
        self.model.push({"text": "hello there"})
        status, headers, body = self.openai(openai_body("say hello"))
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["model"], "gpt-test")
        choice = body["choices"][0]
        self.assertEqual(choice["message"], {"role": "assistant", "content": "hello there",
                                             "refusal": None})
        self.assertEqual(choice["finish_reason"], "stop")
        self.assertEqual(body["usage"], {"prompt_tokens": 2, "completion_tokens": 2,
                                         "total_tokens": 4})

    def test_tool_call(self):
        args = {"detailedDescription": "add 2 and 2"}
        self.model.push({"tool_call": {"name": "solve_task", "arguments": args}},
                        {"tool_call": {"name": "solve_task", "arguments": args}})
        _, _, first = self.openai(openai_body(tools=True))
        _, _, second = self.openai(openai_body(tools=True))
        message = first["choices"][0]["message"]
        self.assertIsNone(message["content"])
        self.assertEqual(first["choices"][0]["finish_reason"], "tool_calls")
        call = message["tool_calls"][0]
        self.assertEqual((call["id"], call["type"], call["function"]["name"]),
                         ("call_1", "function", "solve_task"))
        self.assertIsInstance(call["function"]["arguments"], str)
        self.assertEqual(json.loads(call["function"]["arguments"]), args)
        self.assertEqual(second["choices"][0]["message"]["tool_calls"][0]["id"], "call_2")
        self.assertEqual(first["usage"]["completion_tokens"], len(json.dumps(args)) // 4)

    def test_status_with_default_and_raw_body(self):
        self.model.push({"status": 503}, {"status": 429, "body": "slow down"})
        status, _, body = self.openai(openai_body())
        self.assertEqual(status, 503)
        self.assertEqual(body["error"]["message"], "scripted failure")
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        status, headers, body = self.openai(openai_body())
        self.assertEqual((status, body), (429, "slow down"))
        self.assertTrue(headers["content-type"].startswith("text/plain"))

    def test_raw(self):
        self.model.push({"raw": '{"choices": []'})
        status, headers, body = self.openai(openai_body())
        self.assertEqual((status, body), (200, '{"choices": []'))
        self.assertEqual(headers["content-type"], "application/json")

    def test_echo_key(self):
        self.model.push({"echo_key": True})
        status, _, body = self.openai(openai_body(), {"Authorization": "Bearer sk-leaky"})
        self.assertEqual(status, 401)
        self.assertIn("sk-leaky", body["error"]["message"])
        self.assertEqual(body["error"]["code"], "invalid_api_key")

    def test_extra_headers(self):
        self.model.push({"status": 429, "headers": {"Retry-After": "7"}})
        status, headers, _ = self.openai(openai_body())
        self.assertEqual((status, headers["retry-after"]), (429, "7"))

    def test_requests_are_recorded(self):
        self.model.push({"text": "a"})
        self.openai(openai_body("record me"), {"X-Trace": "t1"})
        [rec] = self.model.requests
        self.assertEqual(rec["path"], "/v1/chat/completions")
        self.assertEqual(rec["headers"]["x-trace"], "t1")
        self.assertEqual(rec["body"]["messages"][0]["content"], "record me")
        self.model.clear()
        self.assertEqual(self.model.requests, [])


class GeminiFormatTest(ModelTestCase):
    def test_text(self):
        self.model.push({"text": "hello there"})
        status, _, body = self.gemini(gemini_body("say hello"))
        self.assertEqual(status, 200)
        cand = body["candidates"][0]
        self.assertEqual(cand["content"], {"parts": [{"text": "hello there"}], "role": "model"})
        self.assertEqual(cand["finishReason"], "STOP")
        self.assertEqual(body["usageMetadata"], {"promptTokenCount": 2,
                                                 "candidatesTokenCount": 2,
                                                 "totalTokenCount": 4})
        self.assertEqual(body["modelVersion"], "gemini-test")
        self.assertEqual(self.model.requests[0]["path"],
                         "/v1beta/models/gemini-test:generateContent")

    def test_tool_call(self):
        args = {"detailedDescription": "add 2 and 2"}
        self.model.push({"tool_call": {"name": "solve_task", "arguments": args}})
        _, _, body = self.gemini(gemini_body(tools=True))
        parts = body["candidates"][0]["content"]["parts"]
        self.assertEqual(parts, [{"functionCall": {"name": "solve_task", "args": args}}])

    def test_status_with_default_body(self):
        self.model.push({"status": 500})
        status, _, body = self.gemini(gemini_body())
        self.assertEqual(status, 500)
        self.assertEqual(body, {"error": {"code": 500, "message": "scripted failure",
                                          "status": "INTERNAL"}})

    def test_raw(self):
        self.model.push({"raw": "not json"})
        self.assertEqual(self.gemini(gemini_body())[::2], (200, "not json"))

    def test_echo_key(self):
        self.model.push({"echo_key": True})
        status, _, body = self.gemini(gemini_body(), {"x-goog-api-key": "AIza-leaky"})
        self.assertEqual(status, 401)
        self.assertEqual(body["error"]["status"], "UNAUTHENTICATED")
        self.assertIn("AIza-leaky", body["error"]["message"])


class ScriptTest(ModelTestCase):
    options = {"default_rules": False}

    def test_fifo(self):
        self.model.push({"text": "one"}, {"text": "two"})
        self.model.push({"text": "three"})
        texts = [self.openai(openai_body())[2]["choices"][0]["message"]["content"]
                 for _ in range(3)]
        self.assertEqual(texts, ["one", "two", "three"])
        self.assertEqual(self.model.pending(), 0)

    def test_empty_script(self):
        status, _, body = self.openai(openai_body())
        self.assertEqual(status, 500)
        self.assertIn("the script is empty", body["error"]["message"])
        status, _, body = self.gemini(gemini_body())
        self.assertEqual((status, body["error"]["status"]), (500, "INTERNAL"))
        self.assertIn("the script is empty", body["error"]["message"])

    def test_bad_replies_are_refused_when_pushed(self):
        for bad in ({"txt": "x"}, {"body": "x"}, {"tool_call": {}}, "text", {}):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                self.model.push(bad)

    def test_delay(self):
        self.model.push({"delay_s": 0.6, "text": "late"}, {"delay_s": 0.3, "text": "later"})
        with self.assertRaises(socket.timeout):
            self.openai(openai_body(), timeout=0.2)
        started = time.monotonic()
        _, _, body = self.openai(openai_body())
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.assertEqual(body["choices"][0]["message"]["content"], "later")

    def test_hang_until_stop(self):
        self.model.push({"hang": True})
        with self.assertRaises(socket.timeout):
            self.gemini(gemini_body(), timeout=0.3)
        started = time.monotonic()
        self.model.stop()
        self.assertLess(time.monotonic() - started, 3)

    def test_invalid_requests(self):
        status, _, body = self.openai(b"{not json")
        self.assertEqual((status, body["error"]["type"]), (400, "invalid_request_error"))
        status, _, body = self.gemini({"contents": []})
        self.assertEqual((status, body["error"]["status"]), (400, "INVALID_ARGUMENT"))
        self.assertEqual(request(self.model.url, "GET", "/v1/chat/completions")[0], 405)
        self.assertEqual(request(self.model.url, "POST", "/v1/models", {})[0], 404)
        self.assertEqual(len(self.model.requests), 4)

    def test_custom_rules(self):
        self.model.rules.append((r"(?i)weather", {"text": "sunny"}))
        self.model.rules.append((r"(\d+) plus (\d+)",
                                 lambda m, turn: {"text": str(int(m[1]) + int(m[2]))}))
        ask = lambda text: self.openai(openai_body(text))[2]["choices"][0]["message"]  # noqa
        self.assertEqual(ask("What WEATHER today?")["content"], "sunny")
        self.assertEqual(ask("what is 2 plus 40")["content"], "42")
        self.model.push({"text": "scripted"})
        self.assertEqual(ask("weather?")["content"], "scripted")


class KeyTest(ModelTestCase):
    options = {"api_key": KEY}

    def test_openai(self):
        self.model.push({"text": "ok"})
        status, _, body = self.openai(openai_body())
        self.assertEqual(status, 401)
        self.assertEqual(body["error"]["code"], "invalid_api_key")
        status, _, body = self.openai(openai_body(), {"Authorization": "Bearer sk-wrong"})
        self.assertEqual(status, 401)
        self.assertIn("sk-wrong", body["error"]["message"])
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        status, _, body = self.openai(openai_body(), {"Authorization": f"Bearer {KEY}"})
        self.assertEqual((status, body["choices"][0]["message"]["content"]), (200, "ok"))
        self.assertEqual(len(self.model.requests), 3)

    def test_gemini(self):
        self.model.push({"text": "ok"})
        status, _, body = self.gemini(gemini_body(), {"Authorization": f"Bearer {KEY}"})
        self.assertEqual((status, body["error"]["code"]), (401, 401))
        status, _, body = self.gemini(gemini_body(), {"x-goog-api-key": "AIza-wrong"})
        self.assertEqual(body["error"]["status"], "UNAUTHENTICATED")
        self.assertIn("AIza-wrong", body["error"]["message"])
        status, _, body = self.gemini(gemini_body(), {"x-goog-api-key": KEY})
        self.assertEqual((status, body["candidates"][0]["content"]["parts"][0]["text"]),
                         (200, "ok"))


class RulesTest(ModelTestCase):
    def test_ask_round_trip_openai(self):
        """`ask`: a tool call; solve_task's inner request: a program; then the final answer."""
        _, _, body = self.openai(openai_body(tools=True))
        call = body["choices"][0]["message"]["tool_calls"][0]
        self.assertEqual(call["function"]["name"], "solve_task")
        self.assertEqual(json.loads(call["function"]["arguments"]),
                         {"detailedDescription": scripted_model.PRIME_TASK})
        _, _, body = self.openai(openai_body(scripted_model.PRIME_TASK))
        output = run_python(program_of(body["choices"][0]["message"]["content"]))
        self.assertEqual(output, "1201281 is prime: False\n"
                                 "divisors: [1, 3, 31, 93, 12917, 38751, 400427, 1201281]\n")
        messages = [{"role": "user", "content": PROMPT},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call["id"],
                     "content": json.dumps({"output": output, "exit_code": 0})}]
        _, _, body = self.openai(openai_body(messages=messages, tools=True))
        self.assertEqual(body["choices"][0]["message"]["content"],
                         "Here is what the sandbox computed:\n" + output)

    def test_ask_round_trip_gemini(self):
        _, _, body = self.gemini(gemini_body(tools=True))
        part = body["candidates"][0]["content"]["parts"][0]
        self.assertEqual(part["functionCall"]["args"],
                         {"detailedDescription": scripted_model.PRIME_TASK})
        contents = [{"role": "user", "parts": [{"text": PROMPT}]},
                    {"role": "model", "parts": [part]},
                    {"role": "user", "parts": [{"functionResponse": {
                        "name": "solve_task", "response": {"exit_code": 0}}}]}]
        _, _, body = self.gemini(gemini_body(contents=contents, tools=True))
        self.assertEqual(body["candidates"][0]["content"]["parts"][0]["text"],
                         'Here is what the sandbox computed:\n{"exit_code": 0}')

    def test_prime_program_without_tools(self):
        _, _, body = self.gemini(gemini_body(PROMPT))
        text = body["candidates"][0]["content"]["parts"][0]["text"]
        self.assertFalse(text.startswith("```"), "a line of prose comes first")
        self.assertIn("1201281 is prime: False", run_python(program_of(text)))
        _, _, body = self.openai(openai_body("List the divisors of 97, please"))
        output = run_python(program_of(body["choices"][0]["message"]["content"]))
        self.assertEqual(output, "97 is prime: True\ndivisors: [1, 97]\n")

    def test_last_user_text_decides(self):
        messages = [{"role": "system", "content": "Is 77 prime?"},
                    {"role": "user", "content": "Is 1201281 prime?"},
                    {"role": "assistant", "content": "Let me see."},
                    {"role": "user", "content": [{"type": "text", "text": "Is 13 prime?"}]}]
        _, _, body = self.openai(openai_body(messages=messages))
        self.assertIn("n = 13\n", body["choices"][0]["message"]["content"])

    def test_print(self):
        for text, want in (('Write code that will print "hello, world"', "hello, world\n"),
                           ("Print the word banana.", "the word banana\n")):
            with self.subTest(text=text):
                _, _, body = self.openai(openai_body(text))
                program = program_of(body["choices"][0]["message"]["content"])
                self.assertEqual(run_python(program), want)

    def test_nothing_matches(self):
        status, _, body = self.openai(openai_body("tell me a joke"))
        self.assertEqual(status, 500)
        self.assertIn("the script is empty", body["error"]["message"])


class TlsTest(ModelTestCase):
    options = {"tls": True}

    def test_generated_ca_is_trusted_for_both_names(self):
        self.assertTrue(self.model.url.startswith("https://127.0.0.1:"))
        context = ssl.create_default_context(cafile=self.model.ca_file)
        self.model.push({"text": "secure"}, {"text": "also"})
        status, _, body = self.openai(openai_body(), context=context)
        self.assertEqual((status, body["choices"][0]["message"]["content"]), (200, "secure"))
        url = self.model.url.replace("127.0.0.1", "localhost")
        status, _, body = request(url, "POST", "/v1beta/models/g:generateContent",
                                  gemini_body(), context=context)
        self.assertEqual(status, 200)

    def test_untrusted_without_the_ca(self):
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.openai(openai_body(), context=ssl.create_default_context())
        self.model.push({"text": "still serving"})
        context = ssl.create_default_context(cafile=self.model.ca_file)
        self.assertEqual(self.openai(openai_body(), context=context)[0], 200)

    def test_ca_file_is_removed_at_stop(self):
        ca = self.model.ca_file
        self.assertTrue(os.path.exists(ca))
        self.model.stop()
        self.assertFalse(os.path.exists(ca))


class ControlApiTest(ModelTestCase):
    options = {"default_rules": False}

    def test_script_requests_clear(self):
        url = self.model.url
        status, _, body = request(url, "POST", "/_script",
                                  [{"text": "first"}, {"status": 502}])
        self.assertEqual((status, body), (200, {"queued": 2}))
        self.assertEqual(request(url, "POST", "/_script", {"text": "third"})[2], {"queued": 3})
        self.assertEqual(self.openai(openai_body("q"))[0], 200)
        self.assertEqual(self.gemini(gemini_body("q"))[0], 502)
        _, _, recorded = request(url, "GET", "/_requests")
        self.assertEqual([r["path"] for r in recorded],
                         ["/v1/chat/completions", "/v1beta/models/gemini-test:generateContent"])
        self.assertEqual(request(url, "POST", "/_clear")[0], 200)
        self.assertEqual(request(url, "GET", "/_requests")[2], [])
        self.assertEqual(self.model.pending(), 0)

    def test_bad_script(self):
        status, _, body = request(self.model.url, "POST", "/_script", [{"nope": 1}])
        self.assertEqual(status, 400)
        self.assertIn("unknown reply keys", body["error"]["message"])
        self.assertEqual(self.model.pending(), 0)


class LifeCycleTest(unittest.TestCase):
    def test_stop_ends_kept_alive_connections_and_threads(self):
        before = set(threading.enumerate())
        model = ScriptedModel().start()
        conn = http.client.HTTPConnection("127.0.0.1", model.port, timeout=5)
        conn.request("GET", "/_requests")
        self.assertEqual(conn.getresponse().read(), b"[]")  # the connection stays open
        model.stop()
        conn.close()
        self.assertEqual(set(threading.enumerate()) - before, set())
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", model.port), timeout=2).close()

    def test_command_line(self):
        script = os.path.join(HERE, "scripted_model.py")
        proc = subprocess.Popen([sys.executable, script, "--port", "0", "--api-key", KEY],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = proc.stdout.readline()
            m = re.fullmatch(r"scripted model on (http://127\.0\.0\.1:\d+) \(openai base "
                             r"(\S+)/v1, gemini base (\S+)/v1beta\)\n", line)
            self.assertIsNotNone(m, line)
            url = m[1]
            self.assertEqual((m[2], m[3]), (url, url))
            status, _, body = request(url, "POST", "/v1/chat/completions", openai_body(),
                                      {"Authorization": f"Bearer {KEY}"})
            self.assertEqual(status, 200)
            self.assertIn("1201281", body["choices"][0]["message"]["content"])
            request(url, "POST", "/_script", [{"text": "scripted"}])
            status, _, body = request(url, "POST", "/v1beta/models/g:generateContent",
                                      gemini_body(), {"x-goog-api-key": KEY})
            self.assertEqual(body["candidates"][0]["content"]["parts"][0]["text"], "scripted")
            self.assertEqual(len(request(url, "GET", "/_requests")[2]), 2)
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(timeout=10), 0)
            proc.stdout.close()


# ----------------------------------------------------------------------------------------------
# TAP output


class TapResult(unittest.TestResult):
    """One TAP line per test; failures with their traceback as YAML-ish diagnostics."""

    def __init__(self, stream):
        super().__init__()
        self.tap = stream
        self.count = 0
        self._errors = None

    def startTest(self, test):
        super().startTest(test)
        self._errors = []

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, err)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, err)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._note(test, err, f"{subtest._subDescription()}: ")

    def _note(self, test, err, prefix=""):
        text = prefix + self._exc_info_to_string(err, test)
        if self._errors is None:  # a class or module fixture failed: a line of its own
            self._line(False, str(test), text)
        else:
            self._errors.append(text)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(True, test.id(), directive="SKIP " + reason.replace("#", ""))
        self._errors = None

    def stopTest(self, test):
        super().stopTest(test)
        if self._errors is not None:
            self._line(not self._errors, test.id(), "\n".join(self._errors))
        self._errors = None

    def _line(self, ok, name, diag="", directive=""):
        self.count += 1
        name = name.removeprefix("__main__.").replace("#", "")
        line = f"{'ok' if ok else 'not ok'} {self.count} - {name}"
        self.tap.write(line + (f" # {directive}" if directive else "") + "\n")
        if diag:
            self.tap.write("  ---\n  message: |\n")
            self.tap.writelines(f"    {row}\n" for row in diag.splitlines())
            self.tap.write("  ...\n")
        self.tap.flush()


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    out = sys.stdout
    out.write("TAP version 13\n")
    result = TapResult(out)
    suite.run(result)
    out.write(f"1..{result.count}\n")
    out.flush()
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
