#!/usr/bin/python3
"""Session pause and resume (issue 34's speed rows, docs/sessions.md): what a freeze, a thaw, a
snapshot to disk and its resume take, and what a frozen or snapshotted session costs the host.

  tests/bench/bench_session_pause.py --bin build/code-interpreter [--reps 10] [--env K=V]

One local daemon (root: each sandbox a host uid of its own), `WARM_POOL_SIZE=0`,
`MEMORY_LIMIT_MB=1024` and `CPU_TIME_LIMIT_SEC=600` (the arrays, the spinning process). Rows:

  freeze / thaw   `POST .../pause {"memory": true}` on an idle session, then `POST .../resume {}`
                  on the frozen one, round trips on one keep-alive connection (target < 50 ms each)
  snapshot / resume  a session holding 10 MB of random files (/workspace and /tmp) and 50 MB of
                  random numpy arrays in its globals: `pause {"memory": false}` (files and globals
                  to the store, sandbox removed), then `resume {}` (a new sandbox, restored);
                  after each resume the arrays' and the files' sha256 are checked against the
                  host's own (target < 1 s each)
  frozen CPU      a process spinning in the session (found on the host by a marker in its argv):
                  its utime+stime over 2 s running (the control) and over 2 s frozen
  snapshot memory the VmRSS of every host process of the sandbox's uid, before the pause to disk
                  and right after it

Each latency row is p50/p90 (and min) over --reps; before them one untimed cycle of each (the
memory row is measured on the snapshot's). Prints the host line, a markdown table, the daemon's
own timings (its "frozen in N ms" and "paused to disk in N ms" lines) and one JSON line.
"""

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import harness  # noqa: E402
from bench_execute import percentile  # noqa: E402

MB = 1 << 20
# (path, MB, seed): 10 MB of random bytes in several files, in /workspace and /tmp.
FILES = [("/workspace/data/a.bin", 3, 11), ("/workspace/b.bin", 2, 12),
         ("/workspace/data/deep/c.bin", 1, 13), ("/tmp/d.bin", 3, 14), ("/tmp/e.bin", 1, 15)]
ARRAYS = [(f"arr{i}", 10, 100 + i) for i in range(5)]  # 5 x 10 MB of random uint64: 50 MB

FILL = """
import hashlib, os, random
import numpy as np
for _p, _mb, _seed in {files!r}:
    os.makedirs(os.path.dirname(_p), exist_ok=True)
    with open(_p, 'wb') as _f:
        _f.write(random.Random(_seed).randbytes(_mb << 20))
for _name, _mb, _seed in {arrays!r}:
    globals()[_name] = np.frombuffer(random.Random(_seed).randbytes(_mb << 20),
                                     dtype=np.uint64).copy()
del _p, _mb, _seed, _f, _name
print(sum(globals()[n].nbytes for n, _, _ in {arrays!r}))
"""

CHECK = """
import hashlib, json
_h = {{}}
for _p, _, _ in {files!r}:
    with open(_p, 'rb') as _f:
        _h[_p] = hashlib.sha256(_f.read()).hexdigest()
for _n, _, _ in {arrays!r}:
    _h[_n] = hashlib.sha256(globals()[_n].tobytes()).hexdigest()
print(json.dumps(_h))
del _h, _p, _f, _n
"""

# A process of the session's own, found on the host by the marker in its argv.
SPAWN = """
import subprocess
subprocess.Popen(['python3', '-c', {body!r}, {marker!r}], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print('started')
"""
SPIN = "while True: pass"
SLEEP = "import time; time.sleep(100000)"

FROZEN_RE = re.compile(r"session \S+ frozen in (\d+) ms")
TO_DISK_RE = re.compile(r"session \S+ paused to disk in (\d+) ms \((\d+) bytes")


def host_line():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cgroup = "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1"
    return (f"host: {model}, {os.cpu_count()} CPUs, kernel {os.uname().release}, cgroup {cgroup}, "
            f"load {os.getloadavg()[0]:.2f}")


def expected_digests():
    out = {}
    for path, mb, seed in FILES:
        out[path] = hashlib.sha256(random.Random(seed).randbytes(mb * MB)).hexdigest()
    for name, mb, seed in ARRAYS:
        out[name] = hashlib.sha256(random.Random(seed).randbytes(mb * MB)).hexdigest()
    return out


class Api:
    def __init__(self, host, port):
        self.conn = harness.Client(host, port, log=[]).connection(timeout=120)

    def post(self, path, obj, expect=(200, 201)):
        body = json.dumps(obj).encode()
        t0 = time.perf_counter()
        self.conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        took = time.perf_counter() - t0
        if r.status not in expect:
            raise RuntimeError(f"POST {path} {obj}: {r.status} {data[:500]!r}")
        return took, json.loads(data) if data else {}

    def get(self, path):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {data[:300]!r}")
        return json.loads(data)

    def delete(self, path):
        self.conn.request("DELETE", path)
        self.conn.getresponse().read()

    def session(self):
        return self.post("/v1/sessions", {})[1]["session_id"]

    def run(self, sid, code, expect_stdout=None):
        _, out = self.post(f"/v1/sessions/{sid}/execute", {"code": code, "timeout_ms": 60000})
        if out.get("exit_code") not in (0, None) or (expect_stdout is not None
                                                     and out.get("stdout") != expect_stdout):
            raise RuntimeError(f"session call failed: {json.dumps(out)[:1500]}")
        return out.get("stdout", "")

    def state(self, sid):
        for s in self.get("/v1/sessions").get("sessions", []):
            if s.get("session_id") == sid:
                return s.get("state")
        return None

    def pause(self, sid, memory, want):
        took, out = self.post(f"/v1/sessions/{sid}/pause", {"memory": memory})
        if out.get("state") != want:
            raise RuntimeError(f"pause {{memory: {memory}}} answered {out}, expected {want}")
        return took, out

    def resume(self, sid, want):
        took, out = self.post(f"/v1/sessions/{sid}/resume", {})
        if out.get("state") != "running" or out.get("resumed_from") != want:
            raise RuntimeError(f"resume answered {out}, expected resumed_from {want}")
        return took, out


# ---------------------------------------------------------------------------- host processes

def pids_with_marker(marker):
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in args:
            found.append(int(d))
    return found


def find_marker(marker, timeout=10.0):
    pids = harness.wait_until(lambda: pids_with_marker(marker), timeout)
    if not pids:
        raise RuntimeError(f"no host process has {marker} in its argv")
    return pids[0]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (3rd field): utime and stime are the 14th and 15th
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def uid_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise RuntimeError(f"no Uid line for {pid}")


def processes_of_uid(uid):
    """[(pid, name, VmRSS kB)] of every host process whose real uid is `uid`."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 0").split()[0]) != uid:
            continue
        rss = int(fields["VmRSS"].split()[0]) if "VmRSS" in fields else 0
        out.append((int(d), fields.get("Name", "?").strip(), rss))
    return out


def rss_mb(procs):
    return sum(p[2] for p in procs) / 1024.0


# ---------------------------------------------------------------------------- the rows

def freeze_rows(api, sid, reps):
    """Freeze and thaw an idle session: one untimed cycle, then `reps` timed."""
    api.run(sid, "x = 1\nprint(x)", "1\n")
    api.pause(sid, True, "frozen")
    api.resume(sid, "memory")
    freeze, thaw = [], []
    for i in range(reps):
        took, _ = api.pause(sid, True, "frozen")
        freeze.append(took)
        if i == 0 and api.state(sid) != "frozen":
            raise RuntimeError(f"GET /v1/sessions: state {api.state(sid)!r}, expected frozen")
        took, _ = api.resume(sid, "memory")
        thaw.append(took)
    api.run(sid, "x += 1\nprint(x)", "2\n")  # the interpreter lived through all of it
    return freeze, thaw


def frozen_cpu_row(api, sid, seconds):
    marker = f"ci-bench-spin-{uuid.uuid4().hex}"
    api.run(sid, SPAWN.format(body=SPIN, marker=marker), "started\n")
    pid = find_marker(marker)
    time.sleep(0.5)  # it runs
    c0 = cpu_seconds(pid)
    time.sleep(seconds)
    running = cpu_seconds(pid) - c0
    api.pause(sid, True, "frozen")
    c0 = cpu_seconds(pid)
    time.sleep(seconds)
    frozen = cpu_seconds(pid) - c0
    api.resume(sid, "memory")
    c0 = cpu_seconds(pid)
    time.sleep(0.5)
    thawed = cpu_seconds(pid) - c0  # it spins again
    os.kill(pid, 9)
    return running, frozen, thawed


def snapshot_rows(api, sid, reps, expected):
    """Fill the session, then one untimed cycle (the memory row measured around its pause),
    then `reps` timed cycles, each resume checked."""
    nbytes = int(api.run(sid, FILL.format(files=FILES, arrays=ARRAYS)))
    if nbytes != sum(mb for _, mb, _ in ARRAYS) * MB:
        raise RuntimeError(f"the arrays hold {nbytes} bytes")
    check = CHECK.format(files=FILES, arrays=ARRAYS)

    def verify(when):
        got = json.loads(api.run(sid, check))
        bad = [k for k in expected if got.get(k) != expected[k]]
        if bad:
            raise RuntimeError(f"SNAPSHOT DAMAGED {when}: sha256 differs for {bad}")

    verify("before any pause")
    # The memory row: a sleeper of the session's gives the sandbox's host uid.
    marker = f"ci-bench-sleep-{uuid.uuid4().hex}"
    api.run(sid, SPAWN.format(body=SLEEP, marker=marker), "started\n")
    uid = uid_of(find_marker(marker))
    before = processes_of_uid(uid)
    _, out = api.pause(sid, False, "paused")
    after = processes_of_uid(uid)
    after_1s = None
    if after:  # the sandbox's removal may finish after the answer
        time.sleep(1.0)
        after_1s = processes_of_uid(uid)
    if api.state(sid) != "paused":
        raise RuntimeError(f"GET /v1/sessions: state {api.state(sid)!r}, expected paused")
    memory = dict(uid=uid, before=before, after=after, after_1s=after_1s,
                  not_kept=out.get("not_kept", []))
    api.resume(sid, "snapshot")
    verify("after the first resume")

    pause, resume = [], []
    for i in range(reps):
        took, _ = api.pause(sid, False, "paused")
        pause.append(took)
        took, _ = api.resume(sid, "snapshot")
        resume.append(took)
        verify(f"after resume {i + 1}")
    return pause, resume, memory


def stats(samples):
    return dict(p50=round(percentile(samples, 50), 2), p90=round(percentile(samples, 90), 2),
                min=round(min(samples) * 1000, 2), n=len(samples))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=2.0, help="each CPU window of the CPU row")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    if not args.bin:
        ap.error("give --bin PATH (or CI_DAEMON_BIN)")
    if os.geteuid() != 0:
        ap.error("run as root: the local backend gives each sandbox a host uid of its own")

    print(host_line(), flush=True)
    expected = expected_digests()
    harness.Config.bin_path = os.path.abspath(args.bin)
    overrides = {"LOG_LEVEL": "info", "EXECUTOR_BACKEND": "local", "WARM_POOL_SIZE": "0",
                 "MEMORY_LIMIT_MB": "1024", "CPU_TIME_LIMIT_SEC": "600"}
    overrides.update(dict(kv.split("=", 1) for kv in args.env))
    daemon = harness.Daemon(overrides).start()
    print("daemon: " + daemon.describe(), flush=True)
    try:
        api = Api(daemon.host, daemon.port)
        idle = api.session()
        freeze, thaw = freeze_rows(api, idle, args.reps)
        running, frozen, thawed = frozen_cpu_row(api, idle, args.seconds)
        api.delete(f"/v1/sessions/{idle}")
        full = api.session()
        pause, resume, memory = snapshot_rows(api, full, args.reps, expected)
        api.delete(f"/v1/sessions/{full}")
        log = daemon.log_since(0)
    finally:
        daemon.stop()
        daemon.cleanup()

    frozen_ms = [int(m) for m in FROZEN_RE.findall(log)]
    to_disk = [(int(ms), int(b)) for ms, b in TO_DISK_RE.findall(log)]
    rows = [
        ("freeze: `pause {\"memory\": true}`, idle session", stats(freeze), "< 50 ms", 50),
        ("thaw: `resume {}` of the frozen session", stats(thaw), "< 50 ms", 50),
        ("snapshot: `pause {\"memory\": false}`, 10 MB files + 50 MB numpy", stats(pause),
         "< 1 s", 1000),
        ("resume `{}` from the snapshot (new sandbox, restored; checked after)", stats(resume), "< 1 s",
         1000),
    ]
    print(f"\n{args.reps} repetitions per row after one untimed cycle\n")
    print("| row | p50 ms | p90 ms | min ms | target | met |")
    print("|---|---:|---:|---:|---|---|")
    for name, s, target, limit in rows:
        print(f"| {name} | {s['p50']:.2f} | {s['p90']:.2f} | {s['min']:.2f} | {target} | "
              f"{'yes' if s['p50'] < limit and s['p90'] < limit else 'NO'} |")
    print("\n| cost | measured | expected |\n|---|---:|---|")
    print(f"| CPU of a spinning process, {args.seconds:g} s running (control) | {running:.2f} s | "
          f"~{args.seconds:g} s |")
    print(f"| CPU of the same process, {args.seconds:g} s frozen | {frozen:.2f} s | 0.00 s |")
    print(f"| (after the thaw, 0.5 s) | {thawed:.2f} s | ~0.5 s |")
    b, a = memory["before"], memory["after"]
    print(f"| host processes of the sandbox's uid {memory['uid']}, before the pause to disk | "
          f"{len(b)} ({', '.join(sorted(set(p[1] for p in b)))}), {rss_mb(b):.1f} MB RSS | — |")
    print(f"| the same, right after its answer | {len(a)}, {rss_mb(a):.1f} MB RSS | 0, 0 MB |")
    if memory["after_1s"] is not None:
        a1 = memory["after_1s"]
        print(f"| the same, 1 s later | {len(a1)}, {rss_mb(a1):.1f} MB RSS | 0, 0 MB |")
    print(f"\nnot kept by the snapshot: {memory['not_kept']}")
    if frozen_ms:
        print(f"daemon log: frozen in {sorted(frozen_ms)[len(frozen_ms) // 2]} ms (median of "
              f"{len(frozen_ms)}, max {max(frozen_ms)})")
    if to_disk:
        ms = sorted(t[0] for t in to_disk)
        print(f"daemon log: paused to disk in {ms[len(ms) // 2]} ms (median of {len(ms)}, "
              f"max {ms[-1]}), {to_disk[-1][1] / MB:.1f} MB saved")

    ok = all(s["p50"] < limit and s["p90"] < limit for _, s, _, limit in rows)
    print(json.dumps({
        "host": host_line(), "reps": args.reps,
        "freeze_ms": stats(freeze), "thaw_ms": stats(thaw),
        "snapshot_ms": stats(pause), "resume_snapshot_ms": stats(resume),
        "cpu_s_running": round(running, 3), "cpu_s_frozen": round(frozen, 3),
        "cpu_s_thawed_0_5s": round(thawed, 3), "window_s": args.seconds,
        "uid": memory["uid"],
        "procs_before": len(b), "rss_mb_before": round(rss_mb(b), 1),
        "procs_after": len(a), "rss_mb_after": round(rss_mb(a), 1),
        "daemon_frozen_ms": frozen_ms, "daemon_to_disk_ms": [t[0] for t in to_disk],
        "snapshot_bytes": to_disk[-1][1] if to_disk else None,
        "targets_met": ok}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
