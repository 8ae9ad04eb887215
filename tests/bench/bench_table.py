#!/usr/bin/python3
"""Every row of docs/performance.md's latency table in one run: each of our figures next to its
baseline, measured interleaved round by round (machine noise hits both alike), p50 and p99 over
--runs rounds after --warmup untimed ones, the ratio, and the configuration of each daemon.

  tests/bench/bench_table.py --bin build/code-interpreter            # local rows
  tests/bench/bench_table.py --bin build/code-interpreter --docker   # and the Docker rows

Rows (sequential requests on one keep-alive connection unless said):
  hello      POST /v1/execute print(1), local, default config     vs bare python3 -c 'print(1)'
  pandas     POST /v1/execute import pandas, local,               vs bare python3 -c 'import pandas'
             WARM_IMPORTS=numpy,pandas,matplotlib
  session    a session call `x += 1` on a live interpreter, local  vs bare python3 -c 'print(1)'
  throughput executions/s, p99 and errors of print(1) at 8 and 32 concurrent clients, local
  docker     the same hello, session and throughput (8 clients) rows on EXECUTOR_BACKEND=docker,
             hello against `docker run --rm --network none IMAGE python3 -c 'print(1)'`
  idle RSS   the default local daemon's resident set after its pool filled, before any request
"""

import argparse
import concurrent.futures
import math
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import bench_page_costs  # noqa: E402
import harness  # noqa: E402
from bench_execute import (PYTHON, CommandTarget, DaemonTarget, percentile,  # noqa: E402
                           run_interleaved)
from bench_kubernetes import SessionCallTarget  # noqa: E402

WARM_IMPORTS = "numpy,pandas,matplotlib"


def host_line():
    """What this host charges for a process and a page (bench_page_costs.py), measured before
    any daemon starts: a PVM guest (page tables paravirtualised) makes both expensive, and the
    local throughput rows with them (tests/bench/README.md "The PVM guest again")."""
    try:
        with open("/proc/kallsyms") as f:
            pvm = sum(1 for line in f if " pvm_" in line)
    except OSError:
        pvm = 0
    kind = f"a PVM guest ({pvm} pvm_ kernel symbols)" if pvm else "not a PVM guest"
    return (f"host: {os.uname().release}, {kind}; a 16 MB process: "
            + bench_page_costs.describe(*bench_page_costs.host_costs()))


def ExecuteTarget(daemon, code, expect):
    return DaemonTarget(daemon.host, daemon.port, code, expect)


def throughput(daemon, clients, requests, code="print(1)"):
    """(executions/s, p50 ms, p99 ms, errors) of `requests` executions of `code` (which prints
    1) sent by `clients` threads at once, each on its own keep-alive connection, after 5 untimed
    ones per client (the steady state is measured, not the ramp)."""
    latencies, errors = [], []
    lock = threading.Lock()
    per_client = [requests // clients + (1 if i < requests % clients else 0)
                  for i in range(clients)]
    started = threading.Barrier(clients + 1)

    def client(n):
        target = ExecuteTarget(daemon, code, "1\n")
        for _ in range(5):
            target.once()
        started.wait()
        for _ in range(n):
            try:
                took = target.once()
                with lock:
                    latencies.append(took)
            except Exception as e:  # noqa: BLE001 - counted, the first few printed
                with lock:
                    errors.append(str(e))
                target = ExecuteTarget(daemon, code, "1\n")

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        done = [pool.submit(client, n) for n in per_client]
        started.wait()
        t0 = time.perf_counter()
        for d in done:
            d.result()
    wall = time.perf_counter() - t0
    for e in errors[:3]:
        print(f"throughput error: {e}", file=sys.stderr)
    if not latencies:
        return 0.0, float("nan"), float("nan"), len(errors)
    return (len(latencies) / wall, percentile(latencies, 50), percentile(latencies, 99),
            len(errors))


def wait_for_pool(daemon, timeout=60):
    """Until every warm pool of the daemon is full (/metrics), so no row measures its fill."""
    client = harness.Client(daemon.host, daemon.port, log=[])
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = client.get("/metrics").body.decode()
        size = {l.split("{")[1].split("}")[0]: float(l.split()[-1]) for l in text.splitlines()
                if l.startswith("code_interpreter_warm_pool_size{")}
        ready = {l.split("{")[1].split("}")[0]: float(l.split()[-1]) for l in text.splitlines()
                 if l.startswith("code_interpreter_warm_pool_ready{")}
        if all(ready.get(k, 0) >= v for k, v in size.items()):
            return
        time.sleep(0.2)
    raise RuntimeError("the warm pools did not fill within 60 s")


class Table:
    def __init__(self):
        self.rows = []

    def add(self, what, ours, baseline_name, baseline, target, met):
        self.rows.append((what, ours, baseline_name, baseline, target, met))

    def print(self):
        print("| row | ours p50 ms | ours p99 ms | baseline | baseline p50 ms | ratio | target | met |")
        print("|---|---:|---:|---|---:|---:|---|---|")
        for what, ours, bname, base, target, met in self.rows:
            ratio = f"{ours[0] / base[0]:.2f}x" if base else "—"
            b50 = f"{base[0]:.2f}" if base else "—"
            o50, o99 = ("" if math.isnan(v) else f"{v:.2f}" for v in ours)  # no latency: blank
            print(f"| {what} | {o50} | {o99} | {bname} | {b50} | {ratio} | "
                  f"{target} | {'yes' if met else 'NO'} |")


def interleaved_row(table, what, ours, baseline_name, baseline, args, max_ratio):
    samples = run_interleaved([("ours", ours), ("base", baseline)], args.warmup, args.runs)
    o = (percentile(samples["ours"], 50), percentile(samples["ours"], 99))
    b = (percentile(samples["base"], 50), percentile(samples["base"], 99))
    table.add(what, o, baseline_name, b, f"p50 <= {max_ratio}x", o[0] / b[0] <= max_ratio)


def throughput_rows(table, daemon, label, client_counts, requests, min_rate, max_p99):
    for clients in client_counts:
        rate, p50, p99, errors = throughput(daemon, clients, requests)
        target = f">= {min_rate}/s" + (f", p99 < {max_p99} ms" if max_p99 else "") + ", 0 errors"
        met = rate >= min_rate and errors == 0 and (max_p99 is None or p99 < max_p99)
        if clients > client_counts[0]:
            target, met = "no collapse, 0 errors", errors == 0 and rate >= 0.5 * min_rate
        table.add(f"{label} throughput, {clients} clients: {rate:.1f}/s, {errors} errors",
                  (p50, p99), "—", None, target, met)


def start(overrides, log):
    daemon = harness.Daemon(dict(overrides, LOG_LEVEL="info")).start()
    log.append(f"- daemon {daemon.describe()}")
    return daemon


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--requests", type=int, default=800, help="per throughput measurement")
    ap.add_argument("--docker", action="store_true", help="the Docker backend's rows too")
    ap.add_argument("--docker-image", default="code-interpreter-executor:latest")
    ap.add_argument("--only", action="append", default=[],
                    help="rows to run: hello, pandas, session, throughput, docker, rss")
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    harness.Config.bin_path = os.path.abspath(args.bin)
    want = set(args.only) or {"hello", "pandas", "session", "throughput", "rss"} | (
        {"docker"} if args.docker else set())
    table, config = Table(), []
    host = host_line()
    bare = CommandTarget([PYTHON, "-c", "print(1)"])
    bare_name = "`python3 -c 'print(1)'`"

    if want & {"hello", "session", "throughput", "rss"}:
        local = start({"EXECUTOR_BACKEND": "local"}, config)
        try:
            wait_for_pool(local)
            if "rss" in want:
                kb = local.vm_rss_kb()
                table.add(f"daemon idle RSS: {kb / 1024:.1f} MB", (float("nan"),) * 2, "—",
                          None, "< 20 MB", kb < 20 * 1024)
            if "hello" in want:
                interleaved_row(table, "hello world, local, warm pool",
                                ExecuteTarget(local, "print(1)", "1\n"), bare_name, bare, args,
                                0.5)
            if "session" in want:
                interleaved_row(table, "session call `x += 1`, local",
                                SessionCallTarget(local.host, local.port), bare_name, bare, args,
                                0.2)
            if "throughput" in want:
                throughput_rows(table, local, "local", [8, 32], args.requests, 100, 100)
        finally:
            local.stop()
            local.cleanup()

    if "pandas" in want:
        daemon = start({"EXECUTOR_BACKEND": "local", "WARM_IMPORTS": WARM_IMPORTS}, config)
        try:
            wait_for_pool(daemon, timeout=120)
            interleaved_row(table, f"`import pandas`, local, WARM_IMPORTS={WARM_IMPORTS}",
                            ExecuteTarget(daemon, "import pandas\nprint(1)", "1\n"),
                            "`python3 -c 'import pandas'`",
                            CommandTarget([PYTHON, "-c", "import pandas\nprint(1)"]), args, 0.1)
        finally:
            daemon.stop()
            daemon.cleanup()

    if "docker" in want:
        # Default settings: the in-container agent (src/agent) and its fork server.
        docker = start({"EXECUTOR_BACKEND": "docker", "PYTHON_EXECUTOR_DOCKER_IMAGE": args.docker_image}, config)
        try:
            wait_for_pool(docker, timeout=120)
            run = CommandTarget(["/usr/bin/docker", "run", "--rm", "--network", "none",
                                 args.docker_image, PYTHON, "-c", "print(1)"])
            interleaved_row(table, "hello world, docker, sequential",
                            ExecuteTarget(docker, "print(1)", "1\n"), "`docker run --rm ...`",
                            run, args, 0.1)
            interleaved_row(table, "session call `x += 1`, docker",
                            SessionCallTarget(docker.host, docker.port), bare_name, bare, args,
                            0.5)
            throughput_rows(table, docker, "docker", [8], args.requests // 4, 30, None)
        finally:
            docker.stop()
            docker.cleanup()

    print(f"{args.runs} runs per latency row after {args.warmup} warm-up rounds, interleaved "
          f"with the baseline; throughput {args.requests} requests; {os.cpu_count()} CPUs; "
          f"binary {args.bin}")
    print(host)
    print("\n".join(config) + "\n")
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
