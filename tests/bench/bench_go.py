#!/usr/bin/python3
"""Go hello world: POST /v1/execute with `language: go` (built and run in a sandbox) against
`go run` of the same file on the host with a warm build cache (docs/performance.md: p50 <=
1.5x), measured interleaved round by round like bench_execute.py.

  tests/bench/bench_go.py --bin build/code-interpreter [--runs 200] [--env K=V]
  tests/bench/bench_go.py --bin build/code-interpreter --docker   # EXECUTOR_BACKEND=docker

The daemon's build starts from an empty cache every time (a fresh sandbox) with the standard
library precompiled (scripts/go-std.sh); `go run` finds the program's own package in its warm
cache and links (it does not cache the binary in Go 1.19).
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_execute import (CommandTarget, DaemonTarget, add_daemon_args,  # noqa: E402
                           print_ratio_table, run_interleaved, target_daemon)

GO_HELLO = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println(1)\n}\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_daemon_args(ap)
    ap.set_defaults(warmup=10)  # a round is ~1 s: go run's cache is warm after the first
    args = ap.parse_args()
    if args.docker:
        args.env += ["EXECUTOR_BACKEND=docker", f"PYTHON_EXECUTOR_DOCKER_IMAGE={args.docker_image}"]
    go = shutil.which("go")
    if not go:
        ap.error("no go on PATH (scripts/install-deps.sh installs golang-go)")
    if args.runs < 200:
        print("note: docs/performance.md asks for at least 200 runs", file=sys.stderr)

    work = tempfile.mkdtemp(prefix="bench-go-")
    with open(os.path.join(work, "main.go"), "w") as f:
        f.write(GO_HELLO)
    daemon, host, port = target_daemon(ap, args)
    targets = [("daemon `POST /v1/execute` go hello",
                DaemonTarget(host, port, GO_HELLO, language="go", timeout_ms=30000)),
               ("host `go run main.go`, warm cache",
                CommandTarget([go, "run", os.path.join(work, "main.go")]))]
    try:
        samples = run_interleaved(targets, args.warmup, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if daemon:
            daemon.stop()
            daemon.cleanup()
    print(f"Go hello world, {args.runs} runs each after {args.warmup} warm-up rounds, "
          f"interleaved; {os.cpu_count()} CPUs; backend "
          f"{'docker' if args.docker else 'local'}\n")
    print_ratio_table(targets, samples)
    print("\ntarget (docs/performance.md): p50 <= 1.5x `go run` with a warm cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
