#!/usr/bin/python3
"""Issue 35's rows, as an agent eval would load the daemon: one local daemon with
WARM_IMPORTS=numpy,pandas,matplotlib and otherwise defaults, next to bare Python in the same run.

  tests/bench/bench_eval.py --bin build/code-interpreter [--requests 400] [--runs 200]

Rows:
  8 clients   print(1) executions/s from 8 threads on keep-alive connections, against bare
              `python3 -c 'print(1)'` spawned by 8 threads; the machine's CPU per execution
              (/proc/stat) of each; target ours >= 1.5x bare's rate. print(1) imports
              nothing: it runs in the lean interpreter (docs/performance.md "Lean interpreters")
  8 clients   `import numpy` then print(1): a program that runs in the interpreter with the warm
  numpy       imports (as every program did before the lean ones); no target
  sequential  print(1) one after another: p50, mean, p99 against bare p50; the warm pool's
              misses meanwhile and how many of them waited for the refill under way rather
              than have a sandbox made (/metrics); target p99 <= 2x p50
  session     a session call `x += 1` (no target: the interpreter already runs)
The host line (bench_table.py) says what a process and a page cost here.
"""

import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import PYTHON, CommandTarget, percentile  # noqa: E402
from bench_kubernetes import SessionCallTarget  # noqa: E402
from bench_table import (WARM_IMPORTS, ExecuteTarget, host_line, throughput,  # noqa: E402
                         wait_for_pool)


def busy_seconds():
    """The machine's busy CPU seconds so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def bare_wide(clients, requests):
    """(runs/s, CPU ms per run) of `requests` bare print(1) Pythons spawned by `clients` threads."""
    def one(_):
        out = subprocess.run([PYTHON, "-c", "print(1)"], stdout=subprocess.PIPE, check=True)
        assert out.stdout == b"1\n"

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(clients)))  # untimed
        cpu, t0 = busy_seconds(), time.perf_counter()
        list(pool.map(one, range(requests)))
        wall = time.perf_counter() - t0
    return requests / wall, (busy_seconds() - cpu) * 1000 / requests


def misses(daemon):
    """(misses, of which waited for the refill under way) of both Python pools: `python`
    (WARM_IMPORTS loaded) and `python-lean` (none)."""
    text = harness.Client(daemon.host, daemon.port, log=[]).get("/metrics").body.decode()

    def total(series):
        return sum(float(l.split()[-1]) for l in text.splitlines()
                   if l.startswith(f'code_interpreter_warm_pool_{series}{{pool="python'))
    return total("misses_total"), total("waits_total")


def start_daemon(ap):
    """(the parsed arguments, the daemon) after the host line: --bin and --env are added to
    `ap`; the daemon is local, with WARM_IMPORTS and whatever --env says."""
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the daemon")
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    harness.Config.bin_path = os.path.abspath(args.bin)
    print(host_line())
    env = {"EXECUTOR_BACKEND": "local", "WARM_IMPORTS": WARM_IMPORTS, "LOG_LEVEL": "info",
           **dict(e.split("=", 1) for e in args.env)}
    daemon = harness.Daemon(env).start()
    print(f"daemon {daemon.describe()}; {os.cpu_count()} CPUs")
    return args, daemon


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=400, help="per throughput measurement")
    ap.add_argument("--runs", type=int, default=200, help="sequential executions")
    args, daemon = start_daemon(ap)
    rows = []
    try:
        wait_for_pool(daemon, timeout=120)
        bare_rate, bare_cpu = bare_wide(8, args.requests)
        cpu = busy_seconds()
        rate, p50, p99, errors = throughput(daemon, 8, args.requests)
        ours_cpu = (busy_seconds() - cpu) * 1000 / (args.requests + 40)  # + 5 untimed each
        rows.append((f"8 clients, print(1): {rate:.1f}/s (p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
                     f"{errors} errors), {ours_cpu:.1f} ms CPU each",
                     f"bare python3 8 threads: {bare_rate:.1f}/s, {bare_cpu:.1f} ms CPU each",
                     f"{rate / bare_rate:.2f}x", ">= 1.5x", rate >= 1.5 * bare_rate and not errors))
        wait_for_pool(daemon, timeout=120)
        cpu = busy_seconds()
        rate, p50, p99, errors = throughput(daemon, 8, args.requests, "import numpy\nprint(1)")
        ours_cpu = (busy_seconds() - cpu) * 1000 / (args.requests + 40)
        rows.append((f"8 clients, `import numpy` + print(1): {rate:.1f}/s (p50 {p50:.0f} ms, "
                     f"p99 {p99:.0f} ms, {errors} errors), {ours_cpu:.1f} ms CPU each",
                     "bare python3 print(1), above", f"{rate / bare_rate:.2f}x", "—", not errors))

        wait_for_pool(daemon, timeout=120)
        target, before = ExecuteTarget(daemon, "print(1)", "1\n"), misses(daemon)
        took = [target.once() for _ in range(args.runs)]
        bare = CommandTarget([PYTHON, "-c", "print(1)"])
        t_bare = [bare.once() for _ in range(min(args.runs, 50))]
        s50, s99, mean = percentile(took, 50), percentile(took, 99), statistics.mean(took) * 1000
        after = misses(daemon)
        rows.append((f"sequential print(1): p50 {s50:.1f} / mean {mean:.1f} / p99 {s99:.1f} ms, "
                     f"{after[0] - before[0]:.0f} pool misses in {args.runs} "
                     f"({after[1] - before[1]:.0f} waited for the refill under way)",
                     f"bare python3 p50 {percentile(t_bare, 50):.1f} ms",
                     f"p99 {s99 / s50:.2f}x p50", "p99 <= 2x p50", s99 <= 2 * s50))

        session = SessionCallTarget(daemon.host, daemon.port)
        calls = [session.once() for _ in range(100)]
        rows.append((f"session call `x += 1`: p50 {percentile(calls, 50):.2f} ms", "—", "—", "—",
                     True))
    finally:
        daemon.stop()
        daemon.cleanup()
    print("\n| row | baseline in the same run | ratio | target | met |\n|---|---|---|---|---|")
    for what, base, ratio, target, met in rows:
        print(f"| {what} | {base} | {ratio} | {target} | {'yes' if met else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
