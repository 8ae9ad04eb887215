#!/usr/bin/env python3
"""A chat-model server for tests: it speaks the real wire formats of OpenAI-compatible chat
completions and of Gemini's generateContent, and answers from a script instead of a model, so
the daemon's providers and agent loop can be tested end to end without a network or a GPU.

Endpoints (both on one server):
  POST /v1/chat/completions                  OpenAI-compatible (base URL: .openai_base)
  POST /v1beta/models/{model}:generateContent  Gemini (base URL: .gemini_base)
Each answers, and fails, in its own provider's format. With an API key configured, a request
without it (OpenAI `Authorization: Bearer KEY`, Gemini `x-goog-api-key: KEY`) gets 401 whose
message echoes the wrong key it carried, as real servers partly do: tests check that the daemon
redacts keys from what it reports. A refused request does not consume a scripted reply.

The script: `push(*replies)` appends to a FIFO queue and every model request pops one reply.
A reply is a dict:
  {"text": "..."}                           an assistant text answer
  {"tool_call": {"name": "solve_task", "arguments": {...}}}
                                            a function call (text and tool_call may be combined)
  {"status": 500, "body": "..."}            that status and raw body (default body: the
                                            provider's error JSON, message "scripted failure")
  {"raw": "..."}                            200 with that raw body (a malformed answer)
  {"echo_key": True}                        401 in the provider's format, echoing the request's key
  {"hang": True}                            accept and never answer (until stop())
  {"delay_s": 5, ...}                       sleep first, then answer the rest of the reply (nothing
                                            else in it: the fallback below answers)
  {"headers": {"Retry-After": "1"}, ...}    extra response headers
Successful answers carry usage with deterministic numbers: prompt tokens = the characters of
every text in the request (string contents, text parts) // 4, completion tokens = the
characters of the answer (its text, or the call's JSON arguments) // 4, each at least 1.

When the queue is empty, the fallback answers:
  1. A function-response turn (the last message is OpenAI role "tool", or a Gemini content with
     a functionResponse part): a final text answer, "Here is what the sandbox computed:\\n" +
     the response's "output" field (or the response's JSON when it has none).
  2. Else `.rules`, a list of (regex, reply) tried in order with re.search against the LAST
     user text (OpenAI: the last role "user" message with text content; Gemini: the last role
     "user" content with a text part). A rule's reply is a reply dict, or a function
     (match, turn) -> reply dict or None (None: the rule does not apply after all; `turn` is a
     Turn). The default rules (default_rules=True; builtin_rules()), in order:
       a. "Is 1201281 prime? List all its divisors." in a request that declares tools (a
          model-facing `ask` round trip): a call of solve_task with
          {"detailedDescription": "Decide whether 1201281 is prime and list all of its
          divisors."};
       b. a text mentioning "prime" or "divisor" and an integer N of two or more digits (the
          first one): a line of prose and a ```python block that prints
          "N is prime: True|False" and "divisors: [...]";
       c. a text asking to print something, `print "X"` or `Print X`: a ```python block
          printing X.
  3. Else 500 in the provider's format: "the script is empty".

Control API (for tests in other processes, no key needed):
  POST /_script  a JSON list of replies (or one reply): appended to the queue
  GET /_requests the recorded requests, a JSON list
  POST /_clear   empties the queue and the record

Every other request is recorded in `.requests` as {"path", "headers" (lowercased names),
"body" (the parsed JSON, or the raw text when it is not JSON)}.

Command line: python3 tests/model/scripted_model.py [--port N] [--host H] [--api-key K] [--tls]
serves with the default rules until SIGTERM or SIGINT, after printing one line:
  scripted model on http://127.0.0.1:N (openai base .../v1, gemini base .../v1beta)
(with --tls also " ca-file PATH" at its end: the CA to trust, e.g. as SSL_CERT_FILE).
"""

import argparse
import dataclasses
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.parse

OPENAI_PATH = "/v1/chat/completions"
GEMINI_PATH_RE = re.compile(r"^/v1beta/models/([^/]+):generateContent$")
CREATED = 1700000000  # OpenAI's "created": a fixed time keeps answers deterministic

REPLY_KINDS = ("text", "tool_call", "status", "raw", "echo_key", "hang")
REPLY_MODIFIERS = ("delay_s", "headers", "body")

PRIME_QUESTION = "Is 1201281 prime? List all its divisors."
PRIME_TASK = "Decide whether 1201281 is prime and list all of its divisors."
SANDBOX_PREFIX = "Here is what the sandbox computed:\n"


class _Hang:
    """The answer of a request that never gets one: the connection is closed at stop()."""


HANG = _Hang()


@dataclasses.dataclass
class Turn:
    """One model request in provider-neutral terms: what a reply is chosen and sized from."""
    provider: str            # "openai" | "gemini"
    model: str
    body: object             # the parsed request
    user_text: str | None    # the last user text
    tool_output: str | None  # the last message is a function response: its output
    has_tools: bool
    prompt_chars: int
    key: str | None          # the API key the request carried


@dataclasses.dataclass
class Answer:
    """An HTTP answer to write."""
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict = dataclasses.field(default_factory=dict)


def json_answer(status, obj, headers=None):
    return Answer(status, json.dumps(obj).encode(), headers=dict(headers or {}))


def check_reply(reply):
    """Raises ValueError for a reply that is not one of the documented kinds: a typo in a test's
    script should fail where it is written, not as a puzzling answer later."""
    if not isinstance(reply, dict):
        raise ValueError(f"a reply is a dict, not {reply!r}")
    unknown = set(reply) - set(REPLY_KINDS) - set(REPLY_MODIFIERS)
    if unknown:
        raise ValueError(f"unknown reply keys {sorted(unknown)} in {reply!r}")
    if not set(reply) & set(REPLY_KINDS) and "delay_s" not in reply:
        raise ValueError(f"a reply needs one of {REPLY_KINDS} or delay_s: {reply!r}")
    if "body" in reply and "status" not in reply:
        raise ValueError(f"body goes with status: {reply!r}")
    call = reply.get("tool_call")
    if call is not None and not (isinstance(call, dict) and isinstance(call.get("name"), str)):
        raise ValueError(f"tool_call needs a name: {reply!r}")
    return reply


def tokens(chars):
    """A deterministic token count: a quarter of the characters, at least 1."""
    return max(1, chars // 4)


def output_of(response):
    """The text a function response reports: its "output" field, else its JSON."""
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return response
    if isinstance(response, dict) and "output" in response:
        out = response["output"]
        return out if isinstance(out, str) else json.dumps(out)
    return json.dumps(response)


def answer_chars(reply):
    """The characters of an answer, for its completion token count."""
    chars = len(reply.get("text") or "")
    if reply.get("tool_call"):
        chars += len(json.dumps(reply["tool_call"].get("arguments", {})))
    return chars


# ----------------------------------------------------------------------------------------------
# The wire formats


class OpenAIFormat:
    """OpenAI-compatible chat completions."""
    name = "openai"
    ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                   404: "invalid_request_error", 429: "rate_limit_exceeded"}

    def carried_key(self, headers):
        auth = headers.get("authorization")
        if auth is None:
            return None
        return auth[7:].strip() if auth.lower().startswith("bearer ") else auth

    def error(self, status, message, code=None):
        kind = self.ERROR_TYPES.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def key_error(self, key):
        if not key:
            return self.error(401, "You didn't provide an API key. Send it in an "
                                   "Authorization: Bearer header.", "invalid_api_key")
        return self.error(401, f"Incorrect API key provided: {key}.", "invalid_api_key")

    def turn(self, body, model, key):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty array")
        texts = [self._text(m) for m in messages if isinstance(m, dict)]
        user = [self._text(m) for m in messages
                if isinstance(m, dict) and m.get("role") == "user" and self._text(m)]
        last = messages[-1] if isinstance(messages[-1], dict) else {}
        tool_output = None
        if last.get("role") == "tool":
            tool_output = output_of(last.get("content") or "")
        return Turn("openai", body.get("model") or model, body, user[-1] if user else None,
                    tool_output, bool(body.get("tools")), sum(len(t) for t in texts), key)

    @staticmethod
    def _text(message):
        """A message's text content: a string, or the text parts of a list."""
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content
                           if isinstance(p, dict) and p.get("type") == "text")
        return ""

    def success(self, reply, turn, serial):
        message = {"role": "assistant", "content": reply.get("text"), "refusal": None}
        finish = "stop"
        call = reply.get("tool_call")
        if call:
            message["tool_calls"] = [{
                "id": f"call_{serial}", "type": "function",
                "function": {"name": call["name"],
                             "arguments": json.dumps(call.get("arguments", {}))}}]
            finish = "tool_calls"
        prompt, completion = tokens(turn.prompt_chars), tokens(answer_chars(reply))
        return {"id": f"chatcmpl-scripted-{serial}", "object": "chat.completion",
                "created": CREATED, "model": turn.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}


class GeminiFormat:
    """Gemini's generateContent."""
    name = "gemini"
    STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                    404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

    def carried_key(self, headers):
        return headers.get("x-goog-api-key")

    def error(self, status, message, code=None):
        return {"error": {"code": status, "message": message,
                          "status": self.STATUS_NAMES.get(status, "UNKNOWN")}}

    def key_error(self, key):
        if not key:
            return self.error(401, "Method doesn't allow unregistered callers. Please use an "
                                   "API key (x-goog-api-key).")
        return self.error(401, f"API key not valid: {key}. Please pass a valid API key.")

    def turn(self, body, model, key):
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise ValueError("'contents' must be a non-empty array")
        system = body.get("systemInstruction") or {}
        texts = [self._text(c) for c in contents + [system] if isinstance(c, dict)]
        user = [self._text(c) for c in contents
                if isinstance(c, dict) and c.get("role", "user") == "user" and self._text(c)]
        return Turn("gemini", model, body, user[-1] if user else None,
                    self._function_output(contents[-1]), bool(body.get("tools")),
                    sum(len(t) for t in texts), key)

    @staticmethod
    def _parts(content):
        parts = content.get("parts") if isinstance(content, dict) else None
        return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []

    def _text(self, content):
        return "".join(p["text"] for p in self._parts(content) if isinstance(p.get("text"), str))

    def _function_output(self, content):
        for part in self._parts(content):
            if isinstance(part.get("functionResponse"), dict):
                return output_of(part["functionResponse"].get("response"))
        return None

    def success(self, reply, turn, serial):
        parts = []
        if reply.get("text") is not None:
            parts.append({"text": reply["text"]})
        call = reply.get("tool_call")
        if call:
            parts.append({"functionCall": {"name": call["name"],
                                           "args": call.get("arguments", {})}})
        prompt, completion = tokens(turn.prompt_chars), tokens(answer_chars(reply))
        return {"candidates": [{"content": {"parts": parts, "role": "model"},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": prompt,
                                  "candidatesTokenCount": completion,
                                  "totalTokenCount": prompt + completion},
                "modelVersion": turn.model, "responseId": f"scripted-{serial}"}


OPENAI = OpenAIFormat()
GEMINI = GeminiFormat()


# ----------------------------------------------------------------------------------------------
# The default rules


def prime_program(n):
    """A Python program that prints whether n is prime and its divisors (fast for any n the
    docs/agent.md asks about: trial division up to its square root)."""
    return ("import math\n\n"
            f"n = {n}\n"
            "small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]\n"
            "divisors = sorted(set(small + [n // d for d in small]))\n"
            "is_prime = divisors == [1, n]\n"
            'print(f"{n} is prime: {is_prime}")\n'
            'print("divisors:", divisors)\n')


def python_answer(prose, program):
    """A model-like answer: a line of prose, then the program in a fenced block."""
    return {"text": f"{prose}\n\n```python\n{program}```\n"}


def ask_rule(match, turn):
    """(a) The model-facing `ask` round trip: delegate the question to solve_task."""
    if not turn.has_tools:
        return None
    return {"tool_call": {"name": "solve_task",
                          "arguments": {"detailedDescription": PRIME_TASK}}}


def prime_rule(match, turn):
    """(b) A question about primality or divisors of a number: a program that answers it."""
    number = re.search(r"(?<!\d)\d{2,}(?!\d)", turn.user_text)
    if number is None:
        return None
    n = int(number.group())
    return python_answer(f"This program checks whether {n} is prime and lists its divisors.",
                         prime_program(n))


def print_rule(match, turn):
    """(c) A request to print something: a program that prints it."""
    what = next(g for g in match.groups() if g is not None).strip()
    return python_answer("This program prints it.", f"print({what!r})\n")


def builtin_rules():
    """The rules that make the examples of docs/agent.md work without a script."""
    return [
        (re.compile(re.escape(PRIME_QUESTION)), ask_rule),
        (re.compile(r"(?i)\bprime|\bdivisor"), prime_rule),
        (re.compile(r'(?i)\bprint\s+"([^"]*)"|(?:^|[.!?]\s+)Print\s+([^\n]+?)[.!]?\s*$',
                    re.MULTILINE), print_rule),
    ]


# ----------------------------------------------------------------------------------------------
# TLS


OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = scripted-model test CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


def make_certificates(directory):
    """A fresh CA and a server certificate it signed for 127.0.0.1 and localhost, made with the
    openssl tool (the standard library cannot sign). Returns (ca.pem, server.pem, server.key)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("tls=True needs the openssl command-line tool")
    path = lambda name: os.path.join(directory, name)  # noqa: E731
    with open(path("openssl.cnf"), "w", encoding="ascii") as f:
        f.write(OPENSSL_CONFIG)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["req", "-x509", *ec, "-config", path("openssl.cnf"), "-extensions", "ca",
         "-days", "7", "-keyout", path("ca.key"), "-out", path("ca.pem")],
        ["req", "-new", *ec, "-config", path("openssl.cnf"), "-subj", "/CN=localhost",
         "-keyout", path("server.key"), "-out", path("server.csr")],
        ["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"),
         "-CAkey", path("ca.key"), "-set_serial", "0x" + os.urandom(8).hex(), "-days", "7",
         "-extfile", path("openssl.cnf"), "-extensions", "server", "-out", path("server.pem")],
    ]
    for step in steps:
        p = subprocess.run(["openssl", *step], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"openssl {step[0]} failed: {p.stderr.strip()}")
    return path("ca.pem"), path("server.pem"), path("server.key")


# ----------------------------------------------------------------------------------------------
# The server


class _Server(http.server.ThreadingHTTPServer):
    """One thread per connection; TLS is set up per connection, in its own thread, so that a
    client that never finishes its handshake does not stall accepting the others."""
    daemon_threads = True

    def __init__(self, address, model, tls_context):
        self.model = model
        self.tls_context = tls_context
        super().__init__(address, _Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        """Clients that give up (timeouts, refused certificates) are expected: one line."""
        err = sys.exc_info()[1]
        if isinstance(err, OSError):  # resets, broken pipes, TLS alerts, timeouts
            if self.model.log:
                sys.stderr.write(f"scripted model: connection ended: {err}\n")
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real APIs
    server_version = "scripted-model/1"

    def setup(self):
        super().setup()
        self.server.model._track(self.connection)
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()  # here, in this connection's thread
            except OSError:
                self.server.model._untrack(self.connection)  # finish() will not run
                raise

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.model._untrack(self.connection)

    def do_GET(self):
        self._serve()

    def do_POST(self):
        self._serve()

    def _serve(self):
        raw = self._read_body()
        path = urllib.parse.urlsplit(self.path).path
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.server.model._answer(self.command, path, headers, raw)
        if answer is HANG:
            self.close_connection = True
            return
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(answer.body)
        self.wfile.flush()

    def _read_body(self):
        """The request body, by Content-Length or chunked."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def log_message(self, format, *args):
        if self.server.model.log:
            sys.stderr.write("scripted model: %s\n" % (format % args))


class ScriptedModel:
    """The server. start() before use, stop() after (or use it as a context manager)."""

    def __init__(self, api_key=None, tls=False, default_rules=True, host="127.0.0.1", port=0,
                 log=False):
        self.api_key = api_key
        self.tls = tls
        self.host = host
        self.port = port
        self.log = log
        self.rules = builtin_rules() if default_rules else []
        self.requests = []
        self.ca_file = None
        self._queue = []
        self._serial = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections = {}  # socket -> the thread serving it
        self._server = None
        self._thread = None
        self._tmp = None

    # -- life cycle

    def start(self):
        """Binds host:port (0: a free port) and serves on a thread."""
        context = None
        if self.tls:
            self._tmp = tempfile.mkdtemp(prefix="scripted-model-")
            self.ca_file, cert, key = make_certificates(self._tmp)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
        self._stopping.clear()
        self._server = _Server((self.host, self.port), self, context)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                         kwargs={"poll_interval": 0.1},
                                         name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stops serving, ends every connection (hung and delayed ones too) and waits for their
        threads, so that nothing outlives the test that started the server."""
        if self._server is None:
            return
        with self._lock:
            self._stopping.set()
        self._server.shutdown()
        with self._lock:
            connections = dict(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in connections.values():
            thread.join(timeout=5)
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server = self._thread = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = self.ca_file = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def openai_base(self):
        return self.url + "/v1"

    @property
    def gemini_base(self):
        return self.url + "/v1beta"

    # -- the script

    def push(self, *replies):
        """Appends replies to the queue (FIFO); every model request pops one."""
        for reply in replies:
            check_reply(reply)
        with self._lock:
            self._queue.extend(replies)

    def pending(self):
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._queue)

    def clear(self):
        """Empties the queue and the record of requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._serial = 0

    # -- serving (called from connection threads)

    def _track(self, conn):
        with self._lock:
            if self._stopping.is_set():  # accepted while stop() ran: end it here
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._connections[conn] = threading.current_thread()

    def _untrack(self, conn):
        with self._lock:
            self._connections.pop(conn, None)

    def _answer(self, method, path, headers, raw):
        if path.startswith("/_"):
            return self._control(method, path, raw)
        body = self._parse(raw)
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
        fmt, model = self._route(path)
        if fmt is None:
            return json_answer(404, {"error": {"message": f"no such endpoint: {path}"}})
        if method != "POST":
            return json_answer(405, fmt.error(405, f"{method} is not allowed on {path}"))
        key = fmt.carried_key(headers)
        if self.api_key is not None and key != self.api_key:
            return json_answer(401, fmt.key_error(key))
        if not isinstance(body, dict):
            return json_answer(400, fmt.error(400, "the request body is not a JSON object"))
        try:
            turn = fmt.turn(body, model, key)
        except ValueError as e:
            return json_answer(400, fmt.error(400, f"invalid request: {e}"))
        return self._reply(fmt, turn, self._pop())

    @staticmethod
    def _parse(raw):
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    @staticmethod
    def _route(path):
        if path == OPENAI_PATH:
            return OPENAI, None
        m = GEMINI_PATH_RE.match(path)
        if m:
            return GEMINI, urllib.parse.unquote(m.group(1))
        return None, None

    def _pop(self):
        with self._lock:
            return self._queue.pop(0) if self._queue else None

    def _next_serial(self):
        with self._lock:
            self._serial += 1
            return self._serial

    def _reply(self, fmt, turn, reply):
        """The answer of one scripted reply (None: the fallback's)."""
        if reply is None:
            reply = self._fallback(turn)
            if reply is None:
                return json_answer(500, fmt.error(500, "the script is empty: no scripted "
                                                       "reply is left and no rule matches"))
        if reply.get("delay_s"):
            if self._stopping.wait(float(reply["delay_s"])):
                return HANG
            rest = {k: v for k, v in reply.items() if k != "delay_s"}
            return self._reply(fmt, turn, rest if set(rest) & set(REPLY_KINDS) else None)
        headers = reply.get("headers") or {}
        if reply.get("hang"):
            self._stopping.wait()
            return HANG
        if reply.get("echo_key"):
            return json_answer(401, fmt.key_error(turn.key or ""), headers)
        if "status" in reply:
            return self._status_answer(fmt, reply, headers)
        if "raw" in reply:
            return Answer(200, reply["raw"].encode(), headers=dict(headers))
        return json_answer(200, fmt.success(reply, turn, self._next_serial()), headers)

    @staticmethod
    def _status_answer(fmt, reply, headers):
        status = int(reply["status"])
        if "body" not in reply:
            return json_answer(status, fmt.error(status, "scripted failure"), headers)
        body = reply["body"]
        try:
            json.loads(body)
            content_type = "application/json"
        except ValueError:
            content_type = "text/plain; charset=utf-8"
        return Answer(status, body.encode(), content_type, dict(headers))

    def _fallback(self, turn):
        """What an empty script answers: a function response's summary, or the first rule
        whose regex matches the last user text."""
        if turn.tool_output is not None:
            return {"text": SANDBOX_PREFIX + turn.tool_output}
        if turn.user_text is None:
            return None
        for pattern, reply in list(self.rules):
            match = re.search(pattern, turn.user_text)
            if match is None:
                continue
            chosen = reply(match, turn) if callable(reply) else reply
            if chosen is not None:
                return check_reply(chosen)
        return None

    def _control(self, method, path, raw):
        """The control API: the script and the record, over HTTP."""
        route = (method, path)
        if route == ("GET", "/_requests"):
            with self._lock:
                return json_answer(200, list(self.requests))
        if route == ("POST", "/_clear"):
            self.clear()
            return json_answer(200, {"cleared": True})
        if route == ("POST", "/_script"):
            try:
                replies = json.loads(raw or b"null")
                replies = replies if isinstance(replies, list) else [replies]
                self.push(*replies)
            except ValueError as e:
                return json_answer(400, {"error": {"message": f"bad script: {e}"}})
            return json_answer(200, {"queued": self.pending()})
        return json_answer(404, {"error": {"message": f"no such control endpoint: "
                                                      f"{method} {path}"}})


# ----------------------------------------------------------------------------------------------
# Command line


def banner(model):
    """The line a process that started this one waits for."""
    line = (f"scripted model on {model.url} (openai base {model.openai_base}, "
            f"gemini base {model.gemini_base})")
    return line + (f" ca-file {model.ca_file}" if model.ca_file else "")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--api-key", help="require this key")
    parser.add_argument("--tls", action="store_true",
                        help="serve HTTPS with a generated CA (its path is printed)")
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    model = ScriptedModel(api_key=args.api_key, tls=args.tls, host=args.host, port=args.port,
                          log=True).start()
    print(banner(model), flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        model.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
