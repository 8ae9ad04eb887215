#!/usr/bin/python3
"""E2B's SDK against the daemon's own API on the same backend (issue 32's speed rows), through
tests/e2b/bench_client.mjs: each round `commands.run('true')` on a live sandbox next to a session
`bash` call `true`, `runCode('1+1')` next to a session `execute` of `1+1`, and `Sandbox.create()`
next to `POST /v1/sessions`, all from the same Node process. Prints p50/p99 of each and the ratios against their targets (2x).

  tests/bench/bench_e2b.py --bin build/code-interpreter
  tests/bench/bench_e2b.py --bin build/code-interpreter --env EXECUTOR_BACKEND=docker
  tests/bench/bench_e2b.py --bin build/code-interpreter --kubernetes   # on the fake API server
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import percentile  # noqa: E402

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2b", "bench_client.mjs")
KEY = "bench-key-0123456789abcdef"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--kubernetes", action="store_true",
                    help="EXECUTOR_BACKEND=kubernetes on the fake API server (tests/k8s; root)")
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    harness.Config.bin_path = os.path.abspath(args.bin)
    cluster = None
    if args.kubernetes:
        why = harness.kubernetes_unavailable()
        if why:
            print(f"cannot run: {why}", file=sys.stderr)
            return 77
        cluster = harness.FakeCluster().start()
        args.env.append("EXECUTOR_BACKEND=kubernetes")
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as keys:
        keys.write(f"bench {KEY}\n")
    env = dict(kv.split("=", 1) for kv in args.env)
    daemon = harness.Daemon(dict(env, LOG_LEVEL="info", API_KEYS_FILE=keys.name)).start()
    try:
        url = f"http://{daemon.host}:{daemon.port}"
        proc = subprocess.run(["node", CLIENT, str(args.rounds), str(args.warmup)],
                              capture_output=True, text=True, check=True, timeout=3600,
                              env=dict(os.environ, E2B_API_URL=url, E2B_SANDBOX_URL=url,
                                       E2B_API_KEY=KEY))
        samples = {k: [ms / 1000 for ms in v] for k, v in json.loads(proc.stdout).items()}
    finally:
        daemon.stop()
        daemon.cleanup()
        os.unlink(keys.name)
        if cluster:
            cluster.close(show_log=False)
    print(f"{args.rounds} rounds after {args.warmup} warm-up ones, interleaved; "
          f"{os.cpu_count()} CPUs; daemon {daemon.describe()}\n")
    print("| row | ours p50 ms | ours p99 ms | baseline | baseline p50 ms | ratio | target | met |")
    print("|---|---:|---:|---|---:|---:|---|---|")
    for what, ours, bname, base in (
            ("`commands.run('true')` (SDK)", "command", "session `bash` `true` (REST)",
             "session_bash"),
            ("`runCode('1+1')` (SDK)", "run_code", "session `execute` `1+1` (REST)",
             "session_execute"),
            ("`Sandbox.create()` (SDK)", "create", "`POST /v1/sessions` (REST)",
             "session_create")):
        o50, o99 = percentile(samples[ours], 50), percentile(samples[ours], 99)
        b50 = percentile(samples[base], 50)
        ratio = o50 / b50
        print(f"| {what} | {o50:.2f} | {o99:.2f} | {bname} | {b50:.2f} | {ratio:.2f}x | "
              f"p50 <= 2x | {'yes' if ratio <= 2 else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
