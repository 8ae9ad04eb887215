"""Egress (docs/egress.md) with real traffic: a daemon with EGRESS_ALLOW whose sandboxes reach an
HTTP and an HTTPS server of the test's own (on 127.0.0.1, under names pinned by EGRESS_HOSTS)
through the daemon's proxy, and nothing else: other names, addresses off the policy, the
daemon's own port, a TLS server name other than the tunnel's host, direct connections and UDP.
Every backend: the local runtime's socket in the sandbox's namespace, the agent's relay in a
container or pod on network none."""

import base64
import hashlib
import http.server
import io
import json
import os
import pwd
import re
import ssl
import subprocess
import tempfile
import threading
import zipfile

from harness import Config, E2ETestCase


def _wheel():
    """A pure-Python wheel made here (no package index can be reached from CI): `demo_pkg`."""
    files = {"demo_pkg/__init__.py": b"VALUE = 42\n",
             "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\n"
                                                b"Version: 1.0\n",
             "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                             b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    record += "demo_pkg-1.0.dist-info/RECORD,,\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("demo_pkg-1.0.dist-info/RECORD", record)
    return out.getvalue()


WHEEL = _wheel()
WHEEL_NAME = "demo_pkg-1.0-py3-none-any.whl"


class _Hello(http.server.BaseHTTPRequestHandler):
    """Says who was asked for what; also a package index (/simple/), bulk bytes (/bytes/N) and
    a digest of what is posted."""

    protocol_version = "HTTP/1.1"
    seen = []  # the headers /headers was asked with

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        if self.path == "/simple/demo-pkg/":
            digest = hashlib.sha256(WHEEL).hexdigest()
            self.answer(f'<a href="/files/{WHEEL_NAME}#sha256={digest}">{WHEEL_NAME}</a>'.encode(),
                        "text/html")
        elif self.path == f"/files/{WHEEL_NAME}":
            self.answer(WHEEL, "application/octet-stream")
        elif self.path == "/headers":  # an echo: what a server that reflects them does
            _Hello.seen.append(dict(self.headers))
            self.answer("".join(f"{k}: {v}\n" for k, v in self.headers.items()).encode())
        elif self.path.startswith("/bytes/"):
            self.answer(_bulk(int(self.path[len("/bytes/"):])), "application/octet-stream")
        else:
            self.answer(f"hello {self.headers.get('Host')} {self.path}".encode())

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(hashlib.sha256(body).hexdigest().encode())

    def answer(self, body, content_type="text/plain"):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _bulk(n):
    """n bytes that are not all alike (a relay that drops or repeats a chunk changes them)."""
    block = hashlib.sha256(str(n).encode()).digest() * 2048  # 64 KiB
    return (block * (n // len(block) + 1))[:n]


def _serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class EgressTest(E2ETestCase):
    """One daemon with an egress policy for the class (the pool's), on every backend."""

    HTTP_SECRET = "s3cret-http-" + os.urandom(8).hex()
    TLS_SECRET = "s3cret-tls-" + os.urandom(8).hex()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ci-egress-")
        cls.cert = os.path.join(cls.tmp, "cert.pem")
        key = os.path.join(cls.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", key, "-out", cls.cert, "-subj", "/CN=tls.test",
                        "-addext", "subjectAltName=DNS:tls.test,DNS:secret.test"],
                       check=True, capture_output=True)
        cls.web = _serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello))
        cls.tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cls.cert, key)
        cls.tls.socket = context.wrap_socket(cls.tls.socket, server_side=True)
        _serve(cls.tls)
        cls.web_port = cls.web.server_address[1]
        cls.tls_port = cls.tls.server_address[1]
        secrets = os.path.join(cls.tmp, "secrets")
        with open(secrets, "w") as f:
            f.write(f"# the proxy adds these; the sandbox never holds them\n"
                    f"web.test Authorization: Bearer {cls.HTTP_SECRET}\n"
                    f"secret.test X-Api-Key: {cls.TLS_SECRET}\n")
        if Config.as_user:  # a rootless daemon reads them as its own user
            pw = pwd.getpwnam(Config.as_user)
            for path in (cls.tmp, secrets, cls.cert):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        cls.daemon_env = {
            # Loopback only at the two servers' ports: not the daemon's own.
            "EGRESS_ALLOW": f"web.test, tls.test, secret.test, metadata.test, loopback.test, "
                            f"127.0.0.1/32:{cls.web_port}, 127.0.0.1/32:{cls.tls_port}",
            "EGRESS_HOSTS": "web.test=127.0.0.1, tls.test=127.0.0.1, secret.test=127.0.0.1, "
                            "metadata.test=169.254.169.254, loopback.test=127.0.0.1",
            "EGRESS_SECRETS_FILE": secrets,
            # secret.test's tunnels are opened by the daemon's CA; tls.test's stay opaque.
            "EGRESS_TLS_INTERCEPT": "secret.test",
            "EGRESS_UPSTREAM_CA_FILE": cls.cert,
        }
        # The servers are the host's: a daemon in a container (--image) would not reach them.
        if not Config.image:
            super().setUpClass()
        else:
            cls._skip_reason = "--image: the test's servers listen on the host's loopback"
            cls._start_error = cls.daemon = None

    @classmethod
    def tearDownClass(cls):
        for server in (cls.web, cls.tls):
            server.shutdown()
            server.server_close()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        # /ready checks the backend afresh: a cluster's refusals are known once it answered.
        if (self.client.get("/ready").json or {}).get("backend_downgrades"):
            self.skipTest("egress needs the sandbox's agent, which this cluster's RBAC refuses "
                          "(test_k8s_access.py checks that answer)")

    def run_code(self, code, expect_status=200, **fields):
        r = self.client.post_json("/v1/execute", {"code": code, "timeout_ms": 20000, **fields})
        self.assertEqual(r.status, expect_status, r)
        return r.json

    def test_allowed_names_are_reached_over_http_and_tls(self):
        with open(self.cert) as f:
            pem = f.read()
        res = self.run_code(
            "import os, ssl, urllib.request\n"
            f"open('/tmp/ca.pem', 'w').write({pem!r})\n"
            "ctx = ssl.create_default_context(cafile='/tmp/ca.pem')\n"
            f"print(urllib.request.urlopen('http://web.test:{self.web_port}/a').read().decode())\n"
            f"print(urllib.request.urlopen('https://tls.test:{self.tls_port}/b', context=ctx)"
            ".read().decode())\n"
            "print(os.environ['HTTPS_PROXY'])")
        self.assertEqual(res["stdout"], f"hello web.test:{self.web_port} /a\n"
                                        f"hello tls.test:{self.tls_port} /b\n"
                                        "http://127.0.0.1:3128\n", res)
        reached = {(d["host"], d["port"]) for d in res["network"]["reached"]}
        self.assertEqual(reached, {("web.test", self.web_port), ("tls.test", self.tls_port)})
        self.assertTrue(all(d["bytes_in"] > 0 and d["bytes_out"] > 0
                            for d in res["network"]["reached"]), res["network"])
        self.assertEqual(res["network"]["refused"], [])

    def test_everything_else_is_refused_and_reported(self):
        daemon_port = self.port
        res = self.run_code(
            "import os, socket, urllib.request, urllib.error\n"
            # Loopback names go to the proxy too here: it is what refuses them.
            "os.environ.pop('no_proxy'); os.environ.pop('NO_PROXY')\n"
            "def get(url):\n"
            "    try:\n"
            "        urllib.request.urlopen(url, timeout=10)\n"
            "        print('reached', url)\n"
            "    except urllib.error.HTTPError as e:\n"
            "        print(e.code, e.read().decode().strip())\n"
            "    except OSError as e:\n"
            "        print('failed', url, type(e).__name__)\n"
            "get('http://other.test/')\n"
            "get('http://metadata.test/latest/meta-data/')\n"
            # An allowed name that resolves to loopback, at a port no CIDR rule names.
            f"get('http://loopback.test:{daemon_port}/health')\n"
            "get('http://169.254.169.254/')\n"
            "get('http://10.0.0.1/')\n"
            "get('http://[::1]:80/')\n"
            f"get('http://127.0.0.1:{daemon_port}/health')\n"
            f"get('https://tls.test:{daemon_port}/')\n"
            # Around the proxy: no route, no listener in the sandbox's own namespace.
            f"for target in (('127.0.0.1', {self.web_port}), ('93.184.216.34', 80)):\n"
            "    try:\n"
            "        socket.create_connection(target, timeout=3)\n"
            "        print('direct reached', target)\n"
            "    except OSError as e:\n"
            "        print('direct', type(e).__name__)\n"
            "try:\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))\n"
            "    print('udp sent')\n"
            "except OSError as e:\n"
            "    print('udp', type(e).__name__)\n")
        lines = res["stdout"].splitlines()
        self.assertTrue(lines[0].startswith("403 code-interpreter egress: not allowed"), lines)
        self.assertIn("169.254.169.254, an address this sandbox may not reach", lines[1])
        self.assertIn("127.0.0.1, an address this sandbox may not reach", lines[2])
        for line in lines[3:7]:
            self.assertTrue(line.startswith("403 code-interpreter egress: not allowed"), lines)
        self.assertTrue(lines[7].startswith("failed https://tls.test"), lines)  # a 403 CONNECT
        self.assertEqual(lines[8:], ["direct ConnectionRefusedError", "direct OSError",
                                     "udp OSError"], res["stdout"])
        self.assertEqual(res["network"]["reached"], [])
        self.assertEqual(res["network"]["refused_count"], 8, res["network"])
        # /metrics counts them with every other sandbox's.
        metrics = self.client.get("/metrics").body.decode()
        refused = re.search(r'^code_interpreter_egress_connections_total\{outcome="refused"\} '
                            r'(\d+)$', metrics, re.M)
        self.assertGreaterEqual(int(refused.group(1)), 8, metrics)

    def test_a_tunnel_whose_tls_names_another_server_is_closed(self):
        res = self.run_code(
            "import socket, ssl\n"
            "s = socket.create_connection(('127.0.0.1', 3128))\n"
            f"s.sendall(b'CONNECT tls.test:{self.tls_port} HTTP/1.1\\r\\n\\r\\n')\n"
            "print(s.recv(100).decode().strip())\n"
            "ctx = ssl.create_default_context()\n"
            "try:\n"
            "    ctx.wrap_socket(s, server_hostname='evil.test')\n"
            "    print('handshake done')\n"
            "except (ssl.SSLError, OSError) as e:\n"
            "    print('closed', type(e).__name__)\n")
        self.assertTrue(res["stdout"].startswith("HTTP/1.1 200 Connection established\n"
                                                 "closed"), res)
        [refused] = res["network"]["refused"]
        self.assertEqual(refused["reason"], "the ClientHello names evil.test, the CONNECT "
                                            "tls.test")

    def test_a_request_only_narrows_the_operators_policy(self):
        r = self.client.post_json("/v1/execute", {"code": "1", "network": {"allow_out": ["evil.org"]}})
        self.assertEqual(r.status, 422, r)
        self.assertIn("'evil.org' is not within what this server allows (EGRESS_ALLOW_MAX",
                      r.json["detail"])
        for bad in ({"allow_out": "web.test"}, {"allow": ["web.test"]}, ["web.test"],
                    {"allow_out": ["*"]}):
            r = self.client.post_json("/v1/execute", {"code": "1", "network": bad})
            self.assertEqual(r.status, 422, (bad, r))
        # An empty allow list: no network, as without egress (no proxy, no report).
        res = self.run_code("import os\nprint(os.environ.get('HTTP_PROXY'))",
                            network={"allow_out": []})
        self.assertEqual((res["stdout"], "network" in res), ("None\n", False), res)
        res = self.run_code(
            "import urllib.request\n"
            f"print(urllib.request.urlopen('http://web.test:{self.web_port}/n').read().decode())",
            network={"allow_out": ["web.test", f"127.0.0.1/32:{self.web_port}"],
                     "deny_out": ["tls.test"]})
        self.assertEqual(res["stdout"], f"hello web.test:{self.web_port} /n\n", res)

    def test_pip_installs_from_an_allowed_https_index(self):
        # An index behind an intercepted name: pip trusts it through PIP_CERT, no flag needed.
        res = self.run_code(
            "import subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-cache-dir',\n"
            "                    '--disable-pip-version-check', '--target', '/tmp/pkgs',\n"
            f"                    '--index-url', 'https://secret.test:{self.tls_port}/simple',\n"
            "                    'demo-pkg'], capture_output=True, text=True)\n"
            "print(r.returncode, r.stderr[-2000:])\n"
            "sys.path.insert(0, '/tmp/pkgs')\n"
            "import demo_pkg\n"
            "print('VALUE', demo_pkg.VALUE)\n", timeout_ms=30000)
        self.assertTrue(res["stdout"].startswith("0 "), res)
        self.assertTrue(res["stdout"].endswith("VALUE 42\n"), res)
        [reached] = res["network"]["reached"]
        self.assertEqual((reached["host"], reached["port"]), ("secret.test", self.tls_port))

    def test_large_transfers_arrive_whole(self):
        # Through the agent's relay this crosses its window (256 KiB) many times each way.
        down, up = 24 << 20, 6 << 20
        res = self.run_code(
            "import hashlib, urllib.request\n"
            f"data = urllib.request.urlopen('http://web.test:{self.web_port}/bytes/{down}')"
            ".read()\n"
            "print(len(data), hashlib.sha256(data).hexdigest())\n"
            f"body = bytes(range(256)) * ({up} // 256)\n"
            f"r = urllib.request.urlopen('http://web.test:{self.web_port}/post', data=body)\n"
            "print(r.read().decode())\n")
        self.assertEqual(res["stdout"].split(),
                         [str(down), hashlib.sha256(_bulk(down)).hexdigest(),
                          hashlib.sha256(bytes(range(256)) * (up // 256)).hexdigest()], res)
        [reached] = res["network"]["reached"]
        self.assertGreaterEqual(reached["bytes_in"], down)
        self.assertGreaterEqual(reached["bytes_out"], up)

    def test_secrets_reach_the_server_and_never_the_sandbox(self):
        _Hello.seen.clear()
        res = self.run_code(
            "import os, urllib.request\n"
            f"req = urllib.request.Request('http://web.test:{self.web_port}/headers',\n"
            "                             headers={'Authorization': 'Bearer mine'})\n"
            "print(urllib.request.urlopen(req).read().decode())\n"
            # Intercepted: the daemon's CA is trusted through SSL_CERT_FILE.
            f"print(urllib.request.urlopen('https://secret.test:{self.tls_port}/headers')"
            ".read().decode())\n"
            "print(sorted(k for k in os.environ if 'CERT' in k or 'CA_' in k))\n"
            "print(open(os.environ['SSL_CERT_FILE']).read().count('BEGIN CERTIFICATE') > 1)\n"
            # What the program can see of itself: its environment and its files.
            "print(dict(os.environ))\n"
            "for root in ('/workspace', '/tmp'):\n"
            "    for d, _, names in os.walk(root):\n"
            "        for n in names:\n"
            "            print(n, open(os.path.join(d, n), errors='replace').read())\n")
        seen = {h.get("Authorization") or h.get("X-Api-Key") for h in _Hello.seen}
        self.assertEqual(seen, {f"Bearer {self.HTTP_SECRET}", self.TLS_SECRET})
        out = res["stdout"]
        self.assertIn("Authorization: " + "*" * len("Bearer " + self.HTTP_SECRET), out)
        self.assertIn("X-Api-Key: " + "*" * len(self.TLS_SECRET), out)
        self.assertIn("['CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS', 'PIP_CERT', "
                      "'REQUESTS_CA_BUNDLE', 'SSL_CERT_FILE']\nTrue\n", out)
        self.assertIn(".ci-egress-ca.pem -----BEGIN CERTIFICATE-----", out)  # the walk ran
        # Nowhere in the answer (nor its files: the trust file is an input), nor the log.
        for secret in (self.HTTP_SECRET, self.TLS_SECRET):
            self.assertNotIn(secret, json.dumps(res))
            self.assertNotIn(secret, self.daemon.log_since(0) if self.daemon else "")
        self.assertEqual(res["files"], [], res)
        reached = {(d["host"], d["port"]) for d in res["network"]["reached"]}
        self.assertEqual(reached, {("web.test", self.web_port), ("secret.test", self.tls_port)})

    def test_secrets_never_travel_in_an_opaque_tunnel(self):
        # tls.test is not intercepted: its tunnel is the program's own TLS, secrets or not.
        _Hello.seen.clear()
        with open(self.cert) as f:
            pem = f.read()
        res = self.run_code(
            "import ssl, urllib.request\n"
            f"open('/tmp/ca.pem', 'w').write({pem!r})\n"
            "ctx = ssl.create_default_context(cafile='/tmp/ca.pem')\n"
            f"print(urllib.request.urlopen('https://tls.test:{self.tls_port}/headers', "
            "context=ctx).read().decode())\n")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(len(_Hello.seen), 1)
        self.assertNotIn("X-Api-Key", _Hello.seen[0])
        self.assertNotIn("Authorization", _Hello.seen[0])


    def fetch_in_session(self, sid, *urls):
        code = ("import urllib.request, urllib.error\n"
                f"for url in {list(urls)!r}:\n"
                "    try:\n"
                "        print(urllib.request.urlopen(url, timeout=10).read().decode())\n"
                "    except urllib.error.HTTPError as e:\n"
                "        print(e.code)\n")
        r = self.client.post_json(f"/v1/sessions/{sid}/execute", {"code": code,
                                                                  "timeout_ms": 20000})
        self.assertEqual(r.status, 200, r)
        return r.json["stdout"].splitlines()

    def test_a_session_reaches_what_its_network_allows(self):
        web = f"http://web.test:{self.web_port}/s"
        tls = f"http://tls.test:{self.tls_port}/s"  # plain HTTP to a TLS port: refused first
        r = self.client.post_json("/v1/sessions", {"network": {
            "allow_out": ["web.test", f"127.0.0.1/32:{self.web_port}"]}})
        self.assertEqual(r.status, 201, r)
        sid = r.json["session_id"]
        try:
            self.assertEqual(self.fetch_in_session(sid, web, tls),
                             [f"hello web.test:{self.web_port} /s", "403"])
            # Paused to disk and resumed in a new sandbox: the same policy, through a new proxy.
            for memory in (False, True):
                r = self.client.post_json(f"/v1/sessions/{sid}/pause", {"memory": memory})
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.fetch_in_session(sid, web, tls),
                                 [f"hello web.test:{self.web_port} /s", "403"])
        finally:
            self.assertEqual(self.client.delete(f"/v1/sessions/{sid}").status, 204)
        r = self.client.post_json("/v1/sessions", {"network": {"allow_out": ["evil.org"]}})
        self.assertEqual(r.status, 422, r)

    def test_e2b_network_options_and_update(self):
        web = f"http://web.test:{self.web_port}/e"
        deny_all = {"denyOut": ["0.0.0.0/0"],
                    "allowOut": ["web.test", f"127.0.0.1/32:{self.web_port}"]}
        r = self.client.post_json("/sandboxes", {"templateID": "base", "network": deny_all})
        self.assertEqual(r.status, 201, r)
        sid = r.json["sandboxID"]
        try:
            self.assertEqual(self.fetch_in_session(sid, web), [f"hello web.test:{self.web_port} /e"])
            # updateNetwork's body: the SDK puts allowOut and denyOut at the top level.
            r = self.client.request("PUT", f"/sandboxes/{sid}/network",
                                    body=json.dumps({"allow_internet_access": False}).encode(),
                                    headers={"Content-Type": "application/json"})
            self.assertEqual(r.status, 204, r)
            self.assertEqual(self.fetch_in_session(sid, web), ["403"])
        finally:
            self.assertEqual(self.client.delete(f"/sandboxes/{sid}").status, 204)
        r = self.client.post_json("/sandboxes", {"templateID": "base",
                                                 "network": {"allowOut": ["evil.org"]}})
        self.assertEqual(r.status, 400, r)
