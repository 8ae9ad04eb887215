"""Prints where a scripts/test.sh run's time went: each phase (install, build, images, the VM's
disk, the meson run) with its wall time and when it started and ended, each meson test, and the
ten slowest test cases (gtest cases and exit-code tests from meson's JUnit log; TAP cases from the
"(N.NN s)" that tests/e2e/harness.py puts at the end of their names).

  scripts/ci_times.py LOGS_DIR MESON_LOGS_DIR
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

TAP_SECONDS = re.compile(r"^\d+ - (.*) \((\d+\.\d+) s\)$")


def clock(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def busy(cpu_start, cpu_end):
    """The share of the machine's CPU time (all cores) spent busy between two /proc/stat lines."""
    a = [int(x) for x in cpu_start.split()[1:]]
    b = [int(x) for x in cpu_end.split()[1:]]
    total = sum(b) - sum(a)
    idle = (b[3] + b[4]) - (a[3] + a[4])  # idle and iowait
    return (total - idle) / total if total > 0 else 0.0


def read_phases(path):
    """[(name, start, end, exit status, the machine's busy share meanwhile)]"""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                name, start, end, status, cpu_start, cpu_end = line.rstrip("\n").split("\t")
                rows.append((name, float(start), float(end), int(status),
                             busy(cpu_start, cpu_end)))
    except OSError:
        pass
    return rows


def read_samples(path):
    """[(time, /proc/stat cpu line)] sampled during the run."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                t, cpu = line.rstrip("\n").split("\t")
                rows.append((float(t), cpu))
    except (OSError, ValueError):
        pass
    return rows


def busy_between(samples, start, end):
    inside = [cpu for t, cpu in samples if start <= t <= end]
    return busy(inside[0], inside[-1]) if len(inside) >= 2 else None


def meson_logs_of(meson_logs, suffix):
    """The logs of every `meson test` run: testlog.* or scripts/test.sh's lane-*.*"""
    try:
        names = os.listdir(meson_logs)
    except OSError:
        return []
    return [os.path.join(meson_logs, n) for n in sorted(names)
            if n.endswith(suffix) and (n.startswith("lane-") or n.startswith("testlog."))]


def read_tests(meson_logs):
    """[(name, start, duration, result)] of the JSON logs, one per meson test."""
    rows = []
    for path in meson_logs_of(meson_logs, ".json"):
        try:
            with open(path) as f:
                for line in f:
                    t = json.loads(line)
                    rows.append((t["name"], t["starttime"], t["duration"], t["result"]))
        except (OSError, ValueError, KeyError):
            pass
    return rows


def read_cases(meson_logs):
    """[(seconds, test, case)] for every case whose time the JUnit log gives."""
    cases = []
    suites = []
    for path in meson_logs_of(meson_logs, ".junit.xml"):
        try:
            suites += ET.parse(path).getroot().iter("testsuite")
        except (OSError, ET.ParseError):
            pass
    for suite in suites:
        test = suite.get("name", "").split(".")[1] if "." in suite.get("name", "") else ""
        for case in suite.iter("testcase"):
            name = case.get("name", "")
            m = TAP_SECONDS.match(name)
            if m:
                cases.append((float(m.group(2)), test, m.group(1)))
            elif case.get("time"):  # a gtest case, or a whole exit-code test (no suite name)
                cases.append((float(case.get("time")), test, name))
    return cases


def main(logs, meson_logs):
    phases = read_phases(os.path.join(logs, "phases.tsv"))
    tests = read_tests(meson_logs)
    samples = read_samples(os.path.join(logs, "cpu.tsv"))
    if not phases and not tests:
        return
    t0 = min([p[1] for p in phases] + [t[1] for t in tests])
    t1 = max([p[2] for p in phases] + [t[1] + t[2] for t in tests])
    print(f"\nWhere the time went ({clock(t1 - t0)} in all; start and end are minutes:seconds "
          f"from the run's start, so phases side by side overlap; CPU busy: the share of all "
          "cores' time the machine was busy meanwhile):")
    print(f"{'phase':<30} {'start':>6} {'end':>6} {'wall':>6} {'CPU busy':>9}")
    for name, start, end, status, busy_share in phases:
        note = "" if status == 0 else f"  (exit {status})"
        print(f"{name:<30} {clock(start - t0):>6} {clock(end - t0):>6} {clock(end - start):>6} "
              f"{busy_share:>8.0%}{note}")
    if tests:
        print(f"\n{'meson test':<30} {'start':>6} {'end':>6} {'wall':>6} {'CPU busy':>9}")
        for name, start, duration, result in sorted(tests, key=lambda t: t[1]):
            note = "" if result == "OK" else f"  ({result})"
            share = busy_between(samples, start, start + duration)
            share = f"{share:>8.0%}" if share is not None else f"{'':>8}"
            print(f"{name:<30} {clock(start - t0):>6} {clock(start + duration - t0):>6} "
                  f"{clock(duration):>6} {share}{note}")
    cases = sorted(read_cases(meson_logs), reverse=True)[:10]
    if cases:
        print("\nThe ten slowest test cases:")
        for seconds, test, case in cases:
            print(f"{seconds:8.1f} s  {test + ': ' if test else ''}{case}")
    print()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
