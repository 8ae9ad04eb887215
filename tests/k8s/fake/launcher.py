"""Start and stop fake_apiserver.py from a test, and talk to it: JSON requests, watches and exec
WebSockets over verified TLS with the bearer token, written from the protocol docs (not a
Kubernetes client library), so the tests check the wire format itself."""

import ctypes
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
from urllib.parse import urlencode, urlsplit

from . import websocket as ws
from .cgroups import remove_instance
from .locked_tls import LockedTls
from .sandbox import mounts_under

SERVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "fake_apiserver.py")


def _die_with_parent():
    """In the child: SIGTERM when the test process dies, so a killed test leaves no server."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def sweep(state_dir, info):
    """Remove the pods' cgroups (killing what is still in them) and unmount their tmpfs volumes
    after a server that could not do it itself (killed, or stuck). Returns what it removed."""
    cgroups = (info or {}).get("cgroups") or {}
    left = [d for d in sorted(set(cgroups.values())) if os.path.isdir(d)]
    remove_instance(cgroups)  # first: it kills what still runs in the pods
    for point in mounts_under(os.path.abspath(state_dir)):
        left.append(point)
        if subprocess.run(["umount", point], stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["umount", "-l", point], stderr=subprocess.DEVNULL)
    return left


def main_with_kubectl(why_root):
    """unittest.main() for a test file that drives kubectl against the fake: without kubectl or
    root (`why_root` says what needs it) it skips (77), except under CI=true."""
    import shutil
    import unittest
    ci = os.environ.get("CI") == "true"
    if not shutil.which("kubectl") and not ci:
        print("skip: no kubectl", file=sys.stderr)
        sys.exit(77)
    if os.geteuid() != 0 and not ci:
        print(f"skip: {why_root} root", file=sys.stderr)
        sys.exit(77)
    unittest.main(verbosity=2)


class Kubectl:
    """kubectl for a test class (a mixin): `env` set to the environment of its server's
    kubeconfig."""
    env = None

    @classmethod
    def kubectl(cls, *args, input=b""):
        return subprocess.run(["kubectl", *args], input=input, capture_output=True,
                              env=cls.env, timeout=120)

    @classmethod
    def kubectl_ok(cls, *args, input=b""):
        r = cls.kubectl(*args, input=input)
        if r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {r.returncode}\n"
                                 f"{r.stdout.decode()}\n{r.stderr.decode()}")
        return r.stdout.decode()


class FakeServer:
    """`with FakeServer(dir, "--restricted", "ns") as s:`; s.info has url, ca, token, kubeconfig
    and cgroups. log: a file for the server's stderr (default: the caller's stderr)."""

    def __init__(self, state_dir, *args, log=None):
        self.state_dir, self.args, self.log = state_dir, args, log
        self.proc = None
        self.info = None

    def __enter__(self):
        stderr = open(self.log, "ab") if self.log else None
        try:
            self.proc = subprocess.Popen([sys.executable, SERVER, "--port", "0", "--state-dir",
                                          self.state_dir, *self.args], stdout=subprocess.PIPE,
                                         stderr=stderr, preexec_fn=_die_with_parent)
        finally:
            if stderr:
                stderr.close()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fake_apiserver exited with {self.proc.wait()}")
        self.info = json.loads(line)
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        """SIGTERM (the server stops its pods and removes their cgroups and mounts), SIGKILL
        after 60 s; then sweep what a killed server could not clean. Returns what the sweep
        found left over (empty when the server cleaned up after itself)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        return sweep(self.state_dir, self.info)

    def client(self, token=None):
        return Client(self.info["url"], self.info["ca"],
                      self.info["token"] if token is None else token)


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


class Client:
    def __init__(self, url, ca, token):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.token = token
        self.context = ssl.create_default_context(cafile=ca)
        self.context.set_alpn_protocols(["http/1.1"])

    def _headers(self, extra=None):
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra or {})
        return headers

    def _connection(self):
        return http.client.HTTPSConnection(self.host, self.port, context=self.context)

    def request(self, method, path, body=None, headers=None):
        conn = self._connection()
        data = json.dumps(body).encode() if body is not None else None
        h = self._headers(headers)
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        result = Response(r.status, r.headers, r.read())
        conn.close()
        return result

    def watch(self, path):
        """Yield each WatchEvent (dict) of a chunked watch response as it arrives."""
        conn = self._connection()
        conn.request("GET", path, headers=self._headers())
        r = conn.getresponse()
        if r.status != 200:
            raise AssertionError(f"watch: {r.status} {r.read()!r}")
        try:
            while True:
                line = r.readline()  # http.client undoes the chunking
                if not line:
                    return
                yield json.loads(line)
        finally:
            conn.close()

    def exec(self, namespace, pod, command, protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"),
             stdin=True, stdout=True, stderr=True, container=None, method="GET"):
        """Open the exec WebSocket: an ExecSocket after a 101, or a Response on refusal."""
        query = [("command", c) for c in command]
        return self._upgrade(namespace, pod, "exec", query, protocols, stdin, stdout, stderr,
                             container, method)

    def attach(self, namespace, pod, protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"),
               stdin=True, stdout=True, stderr=True, container=None, method="POST"):
        """Open the attach WebSocket (the container's command's stdio), as exec does."""
        return self._upgrade(namespace, pod, "attach", [], protocols, stdin, stdout, stderr,
                             container, method)

    def _upgrade(self, namespace, pod, subresource, query, protocols, stdin, stdout, stderr,
                 container, method):
        query = query + [("stdin", str(stdin).lower()), ("stdout", str(stdout).lower()),
                         ("stderr", str(stderr).lower())]
        if container:
            query.append(("container", container))
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/{subresource}?{urlencode(query)}"
        raw = socket.create_connection((self.host, self.port))
        sock = LockedTls(self.context.wrap_socket(raw, server_hostname=self.host))
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                 "Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                 f"Sec-WebSocket-Key: {key}", f"Sec-WebSocket-Protocol: {', '.join(protocols)}"]
        if self.token:
            lines.append(f"Authorization: Bearer {self.token}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        stream = sock.reader()
        status_line = stream.readline().decode()
        status = int(status_line.split()[1])
        headers = http.client.parse_headers(stream)
        if status != 101:
            length = int(headers.get("Content-Length") or 0)
            body = stream.read(length)
            sock.close()
            return Response(status, headers, body)
        if headers.get("Sec-WebSocket-Accept") != ws.accept_key(key):
            raise AssertionError("bad Sec-WebSocket-Accept")
        return ExecSocket(sock, stream, headers.get("Sec-WebSocket-Protocol"))


class ExecSocket:
    def __init__(self, sock, stream, protocol):
        self.sock, self.stream, self.protocol = sock, stream, protocol
        self.close_code = None

    def send(self, channel, data=b""):
        self.sock.sendall(ws.encode_frame(ws.OP_BINARY, bytes([channel]) + data, masked=True))

    def send_frame(self, opcode, payload):
        self.sock.sendall(ws.encode_frame(opcode, payload, masked=True))

    def close_stdin(self):
        self.send(255, b"\x00")

    def receive(self):
        """The next message as (channel, payload), ("pong", payload), or None after the close
        frame (which it answers)."""
        opcode, payload = ws.read_message(self.stream, expect_masked=False)
        if opcode == ws.OP_CLOSE:
            self.close_code = ws.parse_close(payload)[0]
            try:
                self.send_frame(ws.OP_CLOSE, payload[:2])
            except OSError:
                pass
            self.sock.close()
            return None
        if opcode == ws.OP_PONG:
            return "pong", payload
        return payload[0], payload[1:]

    def collect(self):
        """Read to the close: ({channel: bytes}, [messages in order], status dict or None)."""
        out, order = {1: b"", 2: b""}, []
        status = None
        while (m := self.receive()) is not None:
            channel, data = m
            order.append(m)
            if channel == 3:
                status = json.loads(data)
            elif channel in out:
                out[channel] += data
        return out, order, status
