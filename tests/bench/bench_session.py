#!/usr/bin/python3
"""A persistent-Python session holding a 100 MB numpy array across calls (issue: sessions).

Starts the daemon like the e2e harness (or uses --url), creates a session, allocates the array
in the first call, then times --calls calls that each touch it (`a[0] += 1; int(a[0])`, so the
array provably survives and the work per call is tiny), and for comparison the same number of
one-off `POST /v1/execute` runs that must rebuild the array every time. Prints a markdown table
with p50/p99 per kind of call.

  tests/bench/bench_session.py --bin build/code-interpreter
  tests/bench/bench_session.py --bin build/code-interpreter --env EXECUTOR_BACKEND=docker
"""

import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import percentile, target_daemon  # noqa: E402

ALLOCATE = "import numpy as np\na = np.zeros(100 * 2**20 // 8)\na.nbytes"
TOUCH = "a[0] += 1\nint(a[0])"
REBUILD = "import numpy as np\na = np.zeros(100 * 2**20 // 8)\na[0] += 1\nint(a[0])"


def call(conn, path, code):
    body = json.dumps({"code": code, "timeout_ms": 30000}).encode()
    t0 = time.perf_counter()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    took = time.perf_counter() - t0
    if r.status not in (200, 201):
        raise RuntimeError(f"POST {path}: {r.status} {data[:300]!r}")
    return took, json.loads(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--url")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    daemon, host, port = target_daemon(ap, args)
    conn = harness.Client(host, port, log=[]).connection(timeout=120)
    try:
        _, created = call(conn, "/v1/sessions", "")
        sid = created["session_id"]
        path = f"/v1/sessions/{sid}/execute"
        first, out = call(conn, path, ALLOCATE)
        if out.get("stdout") != f"{100 * 2**20}\n":
            raise RuntimeError(f"allocation failed: {out}")
        session, one_off = [], []
        for i in range(args.calls):
            took, out = call(conn, path, TOUCH)
            if out.get("stdout") != f"{i + 1}\n":
                raise RuntimeError(f"call {i + 1}: the array did not survive: {out}")
            session.append(took)
            took, out = call(conn, "/v1/execute", REBUILD)
            if out.get("stdout") != "1\n":
                raise RuntimeError(f"one-off run: {out}")
            one_off.append(took)
        conn.request("DELETE", f"/v1/sessions/{sid}")
        conn.getresponse().read()
    finally:
        if daemon:
            daemon.stop()
            daemon.cleanup()

    print(f"100 MB numpy array, {args.calls} calls each, interleaved; {os.cpu_count()} CPUs\n")
    print("| call | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    print(f"| session: first call (start interpreter, import numpy, allocate) | {first * 1000:.1f} "
          f"| — |")
    print(f"| session: touch the kept array | {percentile(session, 50):.1f} | "
          f"{percentile(session, 99):.1f} |")
    print(f"| one-off `/v1/execute`: import numpy, allocate, touch | {percentile(one_off, 50):.1f}"
          f" | {percentile(one_off, 99):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
