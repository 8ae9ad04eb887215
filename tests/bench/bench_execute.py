#!/usr/bin/python3
"""Hello-world latency of POST /v1/execute against process-start baselines, in one run.

Starts the daemon like the e2e harness (127.0.0.1:0, fresh FILE_STORAGE_DIR, local backend) or
uses --url, warms up, then runs the three measurements interleaved round by round (so machine
noise hits all of them alike) and prints a markdown table: p50, p99 and the ratio of our p50
to each baseline's p50 (docs/performance.md).

  tests/bench/bench_execute.py --bin build/code-interpreter
  tests/bench/bench_execute.py --bin build/code-interpreter --env WARM_POOL_SIZE=0
  tests/bench/bench_execute.py --url http://127.0.0.1:8000 --runs 500
  tests/bench/bench_execute.py --bin build/code-interpreter --docker   # EXECUTOR_BACKEND=docker

--docker runs the daemon on the Docker backend and adds the baseline `docker run --rm --network
none IMAGE python3 -c 'print(1)'` (Debian's client, /usr/bin/docker; IMAGE from --docker-image,
default code-interpreter-executor:latest) to the same interleaved run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402

PYTHON = "/usr/bin/python3"
BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
         "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev"]
CODE = "print(1)"


def target_daemon(ap, args):
    """(daemon or None, host, port): --url's daemon, or one started from --bin with --env."""
    if args.url:
        u = urllib.parse.urlsplit(args.url)
        return None, u.hostname, u.port or 80
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN) or --url URL")
    harness.Config.bin_path = os.path.abspath(args.bin)
    overrides = dict(kv.split("=", 1) for kv in args.env)
    overrides.setdefault("LOG_LEVEL", "info")  # "listening on" is an info line
    daemon = harness.Daemon(overrides).start()
    return daemon, daemon.host, daemon.port


def add_daemon_args(ap):
    """The arguments every latency bench takes: where the daemon is, how many rounds, its
    environment, and the Docker backend with its image."""
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--url")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra daemon environment (spawned mode), e.g. WARM_POOL_SIZE=0")
    ap.add_argument("--docker", action="store_true",
                    help="EXECUTOR_BACKEND=docker (bench_execute.py: and a `docker run` baseline)")
    ap.add_argument("--docker-image", default="code-interpreter-executor:latest")


def print_ratio_table(targets, samples):
    """The markdown table: each target's p50 and p99, and the first one's p50 over each other's."""
    ours_name = targets[0][0]
    ours_p50 = percentile(samples[ours_name], 50)
    print("| what | p50 ms | p99 ms | our p50 / this p50 |")
    print("|---|---:|---:|---:|")
    for name, _ in targets:
        p50, p99 = percentile(samples[name], 50), percentile(samples[name], 99)
        ratio = "—" if name == ours_name else f"{ours_p50 / p50:.2f}x"
        print(f"| {name} | {p50:.2f} | {p99:.2f} | {ratio} |")


def percentile(samples, p):
    """Nearest-rank percentile of a list of seconds, in ms."""
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k] * 1000.0


class DaemonTarget:
    """POST /v1/execute of `code` on one keep-alive connection; checks stdout and exit code."""

    def __init__(self, host, port, code=CODE, expect="1\n", **fields):
        self.conn = harness.Client(host, port, log=[]).connection(timeout=60)
        self.body = json.dumps({"code": code, **fields}).encode()
        self.expect = expect

    def once(self):
        t0 = time.perf_counter()
        self.conn.request("POST", "/v1/execute", body=self.body,
                          headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        took = time.perf_counter() - t0
        if r.status != 200:
            raise RuntimeError(f"POST /v1/execute: {r.status} {data[:300]!r}")
        out = json.loads(data)
        if out.get("stdout") != self.expect or out.get("exit_code") != 0:
            raise RuntimeError(f"unexpected result: {out}")
        return took


class CommandTarget:
    def __init__(self, argv):
        self.argv = argv

    def once(self):
        t0 = time.perf_counter()
        p = subprocess.run(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        took = time.perf_counter() - t0
        if p.returncode != 0 or p.stdout != b"1\n":
            raise RuntimeError(f"{' '.join(self.argv)}: exit {p.returncode}, "
                               f"stdout {p.stdout!r}, stderr {p.stderr[-300:]!r}")
        return took


def run_interleaved(targets, warmup, runs):
    """{name: [seconds]}: `warmup` untimed rounds, then `runs` rounds of every target in turn (so
    machine noise hits all of them alike)."""
    samples = {name: [] for name, _ in targets}
    for _ in range(warmup):
        for _, t in targets:
            t.once()
    for _ in range(runs):
        for name, t in targets:
            samples[name].append(t.once())
    return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_daemon_args(ap)
    args = ap.parse_args()
    if args.docker:
        args.env.append("EXECUTOR_BACKEND=docker")
        args.env.append(f"PYTHON_EXECUTOR_DOCKER_IMAGE={args.docker_image}")
    if args.runs < 200:
        print("note: docs/performance.md asks for at least 200 runs", file=sys.stderr)

    daemon, host, port = target_daemon(ap, args)

    targets = [("daemon `POST /v1/execute` print(1)", DaemonTarget(host, port)),
               (f"bare `{PYTHON} -c 'print(1)'`", CommandTarget([PYTHON, "-c", CODE]))]
    if shutil.which("bwrap"):
        bw = CommandTarget(BWRAP + [PYTHON, "-c", CODE])
        try:
            bw.once()
            targets.append(("`bwrap --unshare-all ... python3 -c 'print(1)'`", bw))
        except RuntimeError as e:
            print(f"bwrap baseline unavailable: {e}", file=sys.stderr)
    else:
        print("bwrap baseline unavailable: bwrap not installed (apt-get install bubblewrap)",
              file=sys.stderr)

    if args.docker:
        docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
        targets.append((f"`docker run --rm --network none IMAGE python3 -c 'print(1)'`",
                        CommandTarget([docker, "run", "--rm", "--network", "none",
                                       args.docker_image, PYTHON, "-c", CODE])))

    try:
        samples = run_interleaved(targets, args.warmup, args.runs)
    finally:
        if daemon:
            rc, _ = daemon.stop()
            daemon.cleanup()
            if rc != 0:
                print(f"daemon exit code {rc}\n{daemon.log_since(0, tail=30)}", file=sys.stderr)

    print(f"hello-world latency, {args.runs} runs each after {args.warmup} warm-up rounds, "
          f"interleaved; {os.cpu_count()} CPUs\n")
    print_ratio_table(targets, samples)
    print("\ntargets (docs/performance.md): warm pool p50 <= 0.5x bare python; "
          "cold sandbox p50 <= 1.2x bwrap")
    return 0


if __name__ == "__main__":
    sys.exit(main())
