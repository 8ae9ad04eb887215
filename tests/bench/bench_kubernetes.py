#!/usr/bin/python3
"""The kubernetes backend on the fake API server (tests/k8s/) next to the local backend, in one
run: hello-world `POST /v1/execute` and a persistent-Python session call (`x += 1`) on each,
with bare `python3 -c 'print(1)'` as the baseline, interleaved round by round (the executions in
one pass, the session calls in another: the executions' pool refills load the fake). Needs root (the
fake's pods). The fake's pods are bubblewrap sandboxes on this machine, so the kubernetes rows
measure the backend's own cost (pod create + watch, exec WebSockets, staging), not a cluster's
scheduling or image pulls.

With --docker, the Docker backend's rows too (the host's dockerd and executor image,
tests/docker/start-dockerd.sh), and 8-client throughput of both: issue 36's rows are ratios of
kubernetes to docker (hello world from the warm pool, a session call, 8 clients).

  tests/bench/bench_kubernetes.py --bin build/code-interpreter
  tests/bench/bench_kubernetes.py --bin build/code-interpreter --docker --runs 100
"""

import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import (CODE, PYTHON, CommandTarget, DaemonTarget, percentile,  # noqa: E402
                           run_interleaved)


class SessionCallTarget:
    """One call `x += 1` on a live interpreter (the session made and warmed first)."""

    def __init__(self, host, port):
        self.conn = harness.Client(host, port, log=[]).connection(timeout=60)
        created = self.post("/v1/sessions", {})
        self.path = f"/v1/sessions/{created['session_id']}/execute"
        self.post(self.path, {"code": "x = 0"})
        self.expect = 0

    def post(self, path, obj):
        self.conn.request("POST", path, body=json.dumps(obj).encode(),
                          headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status not in (200, 201):
            raise RuntimeError(f"POST {path}: {r.status} {data[:300]!r}")
        return json.loads(data)

    def once(self):
        t0 = time.perf_counter()
        out = self.post(self.path, {"code": "x += 1\nx"})
        took = time.perf_counter() - t0
        self.expect += 1
        if out.get("stdout") != f"{self.expect}\n":
            raise RuntimeError(f"session call: {out}")
        return took


class CallAfterBashTarget(SessionCallTarget):
    """The same call right after a `bash` call of the same session (untimed): the pattern of an
    E2B client, where each step goes over the sandbox's stream after another's."""

    def once(self):
        self.post(self.path.replace("/execute", "/bash"), {"cmd": "true"})
        return super().once()


class FakeExecTarget:
    """The fake API server's own cost of an exec: `true` in a pod of its own, over the exec
    WebSocket (TLS, the upgrade, nsenter into the pod, the status frame)."""

    def __init__(self, client, pod):
        self.client, self.pod = client, pod

    def once(self):
        t0 = time.perf_counter()
        _, _, status = self.client.exec("default", self.pod, ["true"]).collect()
        took = time.perf_counter() - t0
        if not status or status.get("status") != "Success":
            raise RuntimeError(f"fake exec: {status}")
        return took


class FakeAttachTarget:
    """The fake's own cost of a frame both ways on an attach (the pod's PID 1 is `cat`): what
    every step of an agent-driven sandbox pays twice."""

    def __init__(self, client, pod):
        self.sock = client.attach("default", pod, stderr=False)
        self.sent = self.echoed = 0

    def once(self):
        t0 = time.perf_counter()
        self.sock.send(0, b"x\n")
        self.sent += 2
        while self.echoed < self.sent:  # (two echoes may come as one message)
            m = self.sock.receive()
            if m is None:
                raise RuntimeError("the fake's attach closed")
            if m[0] == 1:
                self.echoed += len(m[1])
        return time.perf_counter() - t0


def start_cat_pod(client):
    """A pod whose PID 1 is `cat` with its stdin open, Running (the fake's cost rows)."""
    container = {"name": "cat", "image": "bench", "command": ["cat"], "stdin": True,
                 "workingDir": "/workspace",
                 "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}]}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench-fake-cost"},
            "spec": {"restartPolicy": "Never", "containers": [container],
                     "securityContext": {"runAsUser": 65532, "runAsGroup": 65532},
                     "volumes": [{"name": "workspace", "emptyDir": {"medium": "Memory"}}]}}
    r = client.request("POST", "/api/v1/namespaces/default/pods", body)
    if r.status != 201:
        raise RuntimeError(f"the fake's cost pod: {r.status} {r.body[:300]!r}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = client.request("GET", "/api/v1/namespaces/default/pods/bench-fake-cost").json()
        if pod.get("status", {}).get("phase") == "Running":
            return "bench-fake-cost"
        time.sleep(0.1)
    raise RuntimeError("the fake's cost pod did not run within 60 s")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment of both daemons, e.g. WARM_POOL_SIZE=0")
    ap.add_argument("--docker", action="store_true",
                    help="also the docker backend's rows (the host's dockerd), and 8 clients")
    ap.add_argument("--throughput-requests", type=int, default=200)
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    why = harness.kubernetes_unavailable()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 77
    harness.Config.bin_path = os.path.abspath(args.bin)
    overrides = dict(kv.split("=", 1) for kv in args.env)
    overrides.setdefault("LOG_LEVEL", "info")
    cluster = harness.FakeCluster().start()
    daemons = []
    try:
        local = harness.Daemon(dict(overrides, EXECUTOR_BACKEND="local")).start()
        daemons.append(local)
        k8s = harness.Daemon(dict(overrides, EXECUTOR_BACKEND="kubernetes")).start()
        daemons.append(k8s)
        # KUBERNETES_SHARED_WARM_POOL: the pool is pods any replica claims, no interpreter
        # started ahead (src/k8s/README.md "Shared warm pool").
        shared = harness.Daemon(dict(overrides, EXECUTOR_BACKEND="kubernetes",
                                     KUBERNETES_SHARED_WARM_POOL="true")).start()
        daemons.append(shared)
        # KUBERNETES_SANDBOX_API=agent-sandbox: a claim of a SandboxWarmPool's sandbox per
        # execution, on the fake's agent-sandbox controller (src/k8s/README.md "agent-sandbox").
        claimed = harness.Daemon(dict(overrides, EXECUTOR_BACKEND="kubernetes",
                                      KUBERNETES_SANDBOX_API="agent-sandbox")).start()
        daemons.append(claimed)
        docker = None
        if args.docker:
            docker = harness.Daemon(dict(overrides, EXECUTOR_BACKEND="docker")).start()
            daemons.append(docker)
        bare = (f"bare `{PYTHON} -c 'print(1)'`", CommandTarget([PYTHON, "-c", CODE]))
        executions = [
            ("kubernetes (fake) `POST /v1/execute` print(1)", DaemonTarget(k8s.host, k8s.port)),
            ("kubernetes (fake), shared warm pool, print(1)",
             DaemonTarget(shared.host, shared.port)),
            ("kubernetes (fake), agent-sandbox claim, print(1)",
             DaemonTarget(claimed.host, claimed.port)),
            ("local `POST /v1/execute` print(1)", DaemonTarget(local.host, local.port)),
        ]
        if docker:
            executions.append(
                ("docker `POST /v1/execute` print(1)", DaemonTarget(docker.host, docker.port)))
        # Two passes, each interleaved: the session calls apart from the executions, whose pods
        # (the shared pool's, the claims') are refilled meanwhile by the one fake API server that
        # stands in for a cluster's, in Python: its frame relay would wait on that work. The
        # sessions are made after the first pass (an idle connection would be closed meanwhile).
        samples = run_interleaved(executions + [bare], args.warmup, args.runs)
        fake = cluster.server.client()
        cat_pod = start_cat_pod(fake)
        calls = [
            ("kubernetes (fake) session call `x += 1`", SessionCallTarget(k8s.host, k8s.port)),
            ("local session call `x += 1`", SessionCallTarget(local.host, local.port)),
            ("kubernetes (fake) session call after a `bash` call",
             CallAfterBashTarget(k8s.host, k8s.port)),
            ("the fake's own cost: an exec of `true`", FakeExecTarget(fake, cat_pod)),
            ("the fake's own cost: a frame both ways on an attach",
             FakeAttachTarget(fake, cat_pod)),
        ]
        if docker:
            calls += [
                ("docker session call `x += 1`", SessionCallTarget(docker.host, docker.port)),
                ("docker session call after a `bash` call",
                 CallAfterBashTarget(docker.host, docker.port))]
        samples.update(run_interleaved(calls, args.warmup, args.runs))
        targets = executions + calls + [bare]
        rates = {}
        if docker:
            from bench_table import throughput  # (it imports this module)
            for name, d in (("kubernetes (fake)", k8s), ("docker", docker)):
                rates[name] = throughput(d, 8, args.throughput_requests)
    finally:
        for d in daemons:
            d.stop()
            d.cleanup()
        cluster.close(show_log=False)

    base = percentile(samples[targets[-1][0]], 50)
    print(f"kubernetes on the fake API server next to local, {args.runs} runs each after "
          f"{args.warmup} warm-up rounds, interleaved; {os.cpu_count()} CPUs\n")
    print("| what | p50 ms | p99 ms | p50 / bare python p50 |")
    print("|---|---:|---:|---:|")
    for name, _ in targets:
        p50, p99 = percentile(samples[name], 50), percentile(samples[name], 99)
        print(f"| {name} | {p50:.2f} | {p99:.2f} | {p50 / base:.2f}x |")
    if rates:
        def ratio(what):
            return (percentile(samples[f"kubernetes (fake) {what}"], 50) /
                    percentile(samples[f"docker {what}"], 50))
        print("\n| 8 clients, print(1) | executions/s | p50 ms | p99 ms | errors |")
        print("|---|---:|---:|---:|---:|")
        for name, (rate, p50, p99, errors) in rates.items():
            print(f"| {name} | {rate:.1f} | {p50:.0f} | {p99:.0f} | {errors} |")
        print("\nkubernetes / docker (issue 36's targets): hello world p50 "
              f"{ratio('`POST /v1/execute` print(1)'):.2f}x (1.5x), session call p50 "
              f"{ratio('session call `x += 1`'):.2f}x (2x), 8-client rate "
              f"{rates['docker'][0] / max(rates['kubernetes (fake)'][0], 1e-9):.2f}x fewer (2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
