#!/usr/bin/python3
"""Egress (docs/egress.md, issue 33's speed row): a TLS handshake with a loopback server through
a local sandbox's proxy (CONNECT, the proxy's checks, the tunnel) next to the same handshake with
the same server from the host directly. Blocks of each alternate; prints p50/p99 of both and the
difference against the target (at most 1 ms added).

  tests/bench/bench_egress.py --bin build/code-interpreter [--rounds 200] [--blocks 4]
"""

import argparse
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import percentile  # noqa: E402

# Run in the sandbox: `rounds` handshakes through the proxy, their seconds as JSON.
SANDBOX = """
import json, socket, ssl, time
ctx = ssl.create_default_context(cafile='/tmp/ca.pem')
out = []
for _ in range({rounds}):
    t0 = time.perf_counter()
    s = socket.create_connection(('127.0.0.1', 3128))
    s.sendall(b'CONNECT tls.test:{port} HTTP/1.1\\r\\n\\r\\n')
    answer = b''
    while not answer.endswith(b'\\r\\n\\r\\n'):
        answer += s.recv(1)
    assert answer.startswith(b'HTTP/1.1 200'), answer
    t = ctx.wrap_socket(s, server_hostname='tls.test')
    out.append(time.perf_counter() - t0)
    t.close()
print(json.dumps(out))
"""


def serve_handshakes(listener, context):
    """Each connection: the handshake, then closed (the bench measures the handshake only)."""
    def one(conn):
        try:
            context.wrap_socket(conn, server_side=True).close()
        except OSError:
            conn.close()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def direct(port, cafile, rounds):
    ctx = ssl.create_default_context(cafile=cafile)
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port))
        t = ctx.wrap_socket(s, server_hostname="tls.test")
        out.append(time.perf_counter() - t0)
        t.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--rounds", type=int, default=200, help="handshakes per block")
    ap.add_argument("--blocks", type=int, default=4, help="blocks of each, alternating")
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    harness.Config.bin_path = os.path.abspath(args.bin)
    tmp = tempfile.mkdtemp(prefix="bench-egress-")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-keyout", key,
                    "-out", cert, "-subj", "/CN=tls.test", "-addext",
                    "subjectAltName=DNS:tls.test"], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=serve_handshakes, args=(listener, context), daemon=True).start()
    port = listener.getsockname()[1]
    daemon = harness.Daemon({"LOG_LEVEL": "info",
                             "EGRESS_ALLOW": f"tls.test, 127.0.0.1/32:{port}",
                             "EGRESS_HOSTS": "tls.test=127.0.0.1"}).start()
    client = harness.Client(daemon.host, daemon.port, log=[])
    with open(cert) as f:
        pem = f.read()
    code = f"open('/tmp/ca.pem', 'w').write({pem!r})\n" + SANDBOX.format(rounds=args.rounds,
                                                                           port=port)
    samples = {"proxy": [], "direct": []}
    try:
        for block in range(args.blocks + 1):  # the first of each is a warm-up
            r = client.post_json("/v1/execute", {"code": code, "timeout_ms": 60000})
            if r.status != 200 or r.json["exit_code"] != 0:
                raise SystemExit(f"the sandbox's block failed: {r!r}")
            proxied = json.loads(r.json["stdout"])
            straight = direct(port, cert, args.rounds)
            if block:
                samples["proxy"] += proxied
                samples["direct"] += straight
    finally:
        daemon.stop()
        daemon.cleanup()
        listener.close()
    p = {k: (percentile(v, 50), percentile(v, 99)) for k, v in samples.items()}
    added = p["proxy"][0] - p["direct"][0]
    print(f"{args.blocks} blocks of {args.rounds} TLS handshakes each way after one warm-up "
          f"block; {os.cpu_count()} CPUs\n")
    print("| row | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    print(f"| through the sandbox's proxy (CONNECT + handshake) | {p['proxy'][0]:.3f} | "
          f"{p['proxy'][1]:.3f} |")
    print(f"| from the host directly (handshake) | {p['direct'][0]:.3f} | {p['direct'][1]:.3f} |")
    print(f"\nadded by the proxy, p50: {added:.3f} ms (target <= 1 ms: "
          f"{'met' if added <= 1.0 else 'NOT met'})")


if __name__ == "__main__":
    main()
