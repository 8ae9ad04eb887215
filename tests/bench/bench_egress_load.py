#!/usr/bin/python3
"""Egress under load (docs/egress.md, issue 33's second speed row): 100 parallel downloads from a
loopback HTTP server through one sandbox's proxy, next to the daemon's own API. Blocks alternate:
(a) nothing else running, (b) one sandbox downloading, (c) a control: one sandbox spinning on
every CPU, no network (the machine as busy, without the proxy). In each the bench times, back to
back on one keep-alive connection, `GET /health` and the usual hello world (`POST /v1/execute`
of `print(1)`, warm pool, no network). Prints p50/p99 of each, the ratios against (a), what the
sandbox downloaded (MiB/s, downloads, refusals) and the daemon's and the machine's CPU.

  tests/bench/bench_egress_load.py --bin build/code-interpreter [--blocks 3] [--seconds 8]
      [--threads 100] [--in-flight 60] [--mib 4] [--no-control]

The proxy takes at most 64 connections at once per sandbox (egress_proxy.h `max_connections`)
and answers more with a 503. The sandbox runs `--threads` download threads, at most `--in-flight`
of them connected at once (a semaphore, 60 by default: within the limit, so no refusal is
expected); a 503 is counted and retried after 20 ms. `--in-flight 100` measures the limit itself
(refusals expected, each one logged by the daemon).

The daemon: local backend, no network by default (the warm pool serves the hello worlds), its
bound (`EGRESS_ALLOW_MAX`) the server's pinned name (`EGRESS_HOSTS`) and port, which the
downloading request asks for in `network.allow_out`; `PIDS_LIMIT` and `CPU_TIME_LIMIT_SEC` are
raised for its 100 threads and its seconds of reading.
"""

import argparse
import collections
import http.server
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import percentile  # noqa: E402

# Run in the sandbox: THREADS threads download URL until the deadline, at most IN_FLIGHT at once;
# what they got as JSON (wall-clock times, so the host can check its window lies inside).
SANDBOX = """
import json, threading, time, urllib.error, urllib.request
URL, SIZE, THREADS, IN_FLIGHT, SECONDS = {url!r}, {size}, {threads}, {in_flight}, {seconds}
gate = threading.Semaphore(IN_FLIGHT)
lock = threading.Lock()
st = dict(bytes=0, downloads=0, refused_503=0, errors=0, short=0, in_flight=0, max_in_flight=0)
error_kinds = {{}}
opener = urllib.request.build_opener()  # its ProxyHandler takes HTTP_PROXY from the environment
start_wall, start = time.time(), time.monotonic()
deadline = start + SECONDS

def add(**kw):
    with lock:
        for k, v in kw.items():
            st[k] += v
        st['max_in_flight'] = max(st['max_in_flight'], st['in_flight'])

def worker():
    buf = memoryview(bytearray(256 * 1024))
    while time.monotonic() < deadline:
        refused = False
        with gate:
            add(in_flight=1)
            n = 0
            try:
                with opener.open(URL, timeout=60) as r:
                    while True:
                        k = r.readinto(buf)
                        if not k:
                            break
                        n += k
                add(bytes=n, downloads=1, short=int(n != SIZE))
            except urllib.error.HTTPError as e:
                refused = e.code == 503
                add(bytes=n, refused_503=int(refused), errors=int(not refused))
                if not refused:
                    with lock:
                        error_kinds[str(e.code)] = error_kinds.get(str(e.code), 0) + 1
            except OSError as e:
                add(bytes=n, errors=1)
                with lock:
                    error_kinds[type(e).__name__] = error_kinds.get(type(e).__name__, 0) + 1
            finally:
                add(in_flight=-1)
        if refused:
            time.sleep(0.02)

threads = [threading.Thread(target=worker) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
st.update(seconds=time.monotonic() - start, start_wall=start_wall, end_wall=time.time(),
          error_kinds=error_kinds)
print(json.dumps(st))
"""


# Run in the sandbox for the control block: as many processes as the machine has CPUs, spinning
# until the deadline, no network.
BUSY = """
import os, time
start_wall, deadline = time.time(), time.monotonic() + {seconds}
children = []
for _ in range(os.cpu_count() - 1):
    pid = os.fork()
    if pid == 0:
        while time.monotonic() < deadline:
            pass
        os._exit(0)
    children.append(pid)
while time.monotonic() < deadline:
    pass
for pid in children:
    os.waitpid(pid, 0)
print(start_wall, time.time())
"""


class Bulk(http.server.BaseHTTPRequestHandler):
    """GET /<n>: n bytes of a random buffer made once."""

    body = b""

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        n = min(int(self.path.lstrip("/")), len(self.body))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        try:
            self.wfile.write(memoryview(self.body)[:n])
        except OSError:
            pass

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # 60+ connections arrive at once: no SYN retries of a short backlog


class Prober:
    """`GET /health` and `POST /v1/execute` print(1), alternating on one keep-alive connection;
    every answer checked."""

    def __init__(self, host, port):
        self.client = harness.Client(host, port, log=collections.deque(maxlen=20))
        self.conn = self.client.connection(timeout=60)
        self.execute = json.dumps({"code": "print(1)"}).encode()
        self.pid = None

    def health(self):
        r = self.client.request("GET", "/health", conn=self.conn)
        if r.status != 200 or r.json.get("status") != "ok":
            raise RuntimeError(f"GET /health: {r!r}")
        return r.elapsed

    def hello(self):
        r = self.client.request("POST", "/v1/execute", body=self.execute, conn=self.conn,
                                headers={"Content-Type": "application/json"})
        if r.status != 200 or r.json.get("stdout") != "1\n" or r.json.get("exit_code") != 0:
            raise RuntimeError(f"POST /v1/execute: {r!r}")
        return r.elapsed

    def block(self, seconds, samples, cpu=None):
        """Probes for `seconds`; returns the (start, end) wall-clock window. `cpu`: a dict that
        adds up the daemon's and the machine's busy seconds and the window's."""
        t0, before = time.time(), cpu_seconds(self.pid)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            samples["health"].append(self.health())
            samples["execute"].append(self.hello())
        t1, after = time.time(), cpu_seconds(self.pid)
        if cpu is not None:
            for k, a, b in zip(("daemon", "machine"), before, after):
                cpu[k] = cpu.get(k, 0.0) + b - a
            cpu["wall"] = cpu.get("wall", 0.0) + t1 - t0
        return t0, t1


def cpu_seconds(pid):
    """(the daemon process's user + system CPU seconds, the machine's busy CPU seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    return (int(fields[11]) + int(fields[12])) / tick, (sum(cpu) - cpu[3] - cpu[4]) / tick


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--blocks", type=int, default=3, help="blocks of each, alternating")
    ap.add_argument("--seconds", type=float, default=8.0, help="probing per block")
    ap.add_argument("--threads", type=int, default=100, help="download threads in the sandbox")
    ap.add_argument("--in-flight", type=int, default=60, help="connected at once (semaphore)")
    ap.add_argument("--mib", type=float, default=4.0, help="MiB per download")
    ap.add_argument("--no-control", action="store_true",
                    help="skip the control blocks (a sandbox spinning on every CPU)")
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    harness.Config.bin_path = os.path.abspath(args.bin)
    load_before = os.getloadavg()[0]
    size = int(args.mib * 1024 * 1024)
    Bulk.body = os.urandom(size)
    server = Server(("127.0.0.1", 0), Bulk)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    allow = ["bulk.test", f"127.0.0.1/32:{port}"]
    daemon = harness.Daemon({"LOG_LEVEL": "info", "EGRESS_ALLOW_MAX": ", ".join(allow),
                             "EGRESS_HOSTS": "bulk.test=127.0.0.1", "PIDS_LIMIT": "256",
                             "CPU_TIME_LIMIT_SEC": "120"}).start()
    prober = Prober(daemon.host, daemon.port)
    prober.pid = daemon.pid
    settle = 1.0  # after the downloading request is sent, before probing: its sandbox starts
    run_for = args.seconds + settle + 1.0
    code = SANDBOX.format(url=f"http://bulk.test:{port}/{size}", size=size, threads=args.threads,
                          in_flight=args.in_flight, seconds=run_for)
    request = {"code": code, "network": {"allow_out": allow},
               "timeout_ms": int((run_for + 30) * 1000)}
    busy = {"code": BUSY.format(seconds=run_for), "timeout_ms": int((run_for + 30) * 1000)}
    kinds = ["idle", "downloads"] + ([] if args.no_control else ["cpu"])
    samples = {k: {"health": [], "execute": []} for k in kinds}
    cpu = {k: {} for k in kinds}
    runs, reports, notes = [], [], []

    def beside(body, kind):
        """Probes while one sandbox runs `body`; returns its answer."""
        answer = {}

        def run():
            client = harness.Client(daemon.host, daemon.port, log=[])
            answer["r"] = client.post_json("/v1/execute", body, timeout=run_for + 60)
        t = threading.Thread(target=run)
        t.start()
        time.sleep(settle)
        window = prober.block(args.seconds, samples[kind], cpu[kind])
        t.join()
        r = answer.get("r")
        if r is None or r.status != 200 or r.json["exit_code"] != 0:
            raise SystemExit(f"the {kind} sandbox failed: {r!r}")
        if kind == "downloads":
            got = json.loads(r.json["stdout"])
            start, end = got["start_wall"], got["end_wall"]
        else:
            start, end = map(float, r.json["stdout"].split())
        if not (start <= window[0] and window[1] <= end):
            notes.append(f"a probing window {window} was not inside the {kind} sandbox's "
                         f"{start:.3f}-{end:.3f}")
        return r

    try:
        prober.block(2.0, {"health": [], "execute": []})  # warm-up
        for _ in range(args.blocks):
            prober.block(args.seconds, samples["idle"], cpu["idle"])
            r = beside(request, "downloads")
            runs.append(json.loads(r.json["stdout"]))
            reports.append(r.json.get("network") or {})
            if "cpu" in kinds:
                beside(busy, "cpu")
    finally:
        rc, _ = daemon.stop()
        log = daemon.log_since(0)
        daemon.cleanup()
        server.shutdown()
        server.server_close()
    load_after = os.getloadavg()[0]
    if rc != 0:
        notes.append(f"daemon exit code {rc}")
    p = {(k, what): (percentile(v, 50), percentile(v, 99))
         for k, by in samples.items() for what, v in by.items()}
    print(f"{args.blocks} rounds of {args.seconds:g} s blocks ({', '.join(kinds)}) after a 2 s "
          f"warm-up; {os.cpu_count()} CPUs; {args.threads} download threads in one sandbox, at "
          f"most {args.in_flight} connected at once, {args.mib:g} MiB each; load (1 min) "
          f"{load_before:.1f} -> {load_after:.1f}\n")
    beside_what = {"idle": "nothing", "downloads": f"{args.threads} downloads",
                   "cpu": f"{os.cpu_count()} spinning processes (control)"}
    print("| call | beside it | p50 ms | p99 ms | p50 / idle p50 | p99 / idle p99 | samples |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for what, name in (("health", "`GET /health`"),
                       ("execute", "`POST /v1/execute` print(1), warm pool")):
        i50, i99 = p[("idle", what)]
        for kind in kinds:
            p50, p99 = p[(kind, what)]
            print(f"| {name} | {beside_what[kind]} | {p50:.2f} | {p99:.2f} | {p50 / i50:.2f}x | "
                  f"{p99 / i99:.2f}x | {len(samples[kind][what])} |")
    total = {k: sum(g[k] for g in runs) for k in ("bytes", "downloads", "refused_503", "errors",
                                                  "short")}
    seconds = sum(g["seconds"] for g in runs)
    errors = collections.Counter()
    for g in runs:
        errors.update(g["error_kinds"])
    bytes_in = sum(d.get("bytes_in", 0) for rep in reports for d in rep.get("reached", []))
    refused_daemon = sum(rep.get("refused_count", len(rep.get("refused", []))) for rep in reports)
    print(f"\ndownloads in the sandbox: {total['bytes'] / 2**20 / seconds:.1f} MiB/s "
          f"({total['bytes'] / 2**20:.0f} MiB in {seconds:.1f} s over {len(runs)} blocks), "
          f"{total['downloads']} downloads, {total['short']} short, most connected at once "
          f"{max(g['max_in_flight'] for g in runs)}; 503 refusals seen {total['refused_503']}, "
          f"other errors {total['errors']} {dict(errors) or ''}")
    print(f"the daemon's report: {bytes_in / 2**20:.0f} MiB in from the server, "
          f"{refused_daemon} refusals")
    print("CPU while probing (cores busy on average): " + ", ".join(
        f"{k} daemon {c['daemon'] / c['wall']:.2f}, machine {c['machine'] / c['wall']:.2f}"
        for k, c in cpu.items()))
    warnings = [line for line in log.splitlines()
                if "warn" in line.lower() or "error" in line.lower()]
    print(f"daemon log: {len(log.splitlines())} lines, {len(warnings)} warnings or errors")
    for line in warnings[:10]:
        print(f"  {line}")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
