"""Prints 'N passed, N failed, N skipped' from meson's JUnit logs (one per `meson test` run: the
lanes of scripts/test.sh), counting each test case
(gtest cases and TAP subtests), not each test binary. Exit 1 when nothing ran or any failed.
Each failed case is named on a line of its own, with the last lines of its message where the log
has them (gtest's failure text in the JUnit log; a TAP case's YAML `message` in testlog.txt):
CI shows only the end of the output, so the reason has to be there. A test binary meson killed
(its timeout) or that crashed has no failing case in the JUnit log: meson's JSON log beside it
says so, and it counts as one failure.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

REASON_LINES = 3
REASON_WIDTH = 300


def tap_messages(testlog):
    """{(test, case): the lines of its `message` field} from the TAP YAML blocks of testlog.txt
    (each test's section starts with a `test:` line naming it as the JUnit classname ends)."""
    messages, test, name, field = {}, None, None, None
    try:
        lines = open(testlog, errors="replace").read().splitlines()
    except OSError:
        return messages
    for line in lines:
        if line.startswith("test:"):
            test, name = line[5:].strip(), None
        elif line.startswith("not ok "):
            name = line[7:].split(" # ", 1)[0]  # "163 - sessions.Case.test", as JUnit names it
            field = None
        elif line.startswith("ok ") or line.startswith("  ..."):
            name = field = None
        elif name and line.startswith("  ") and line.rstrip().endswith(": |"):
            field = line.strip()[:-3]
        elif name and field == "message" and line.startswith("    | "):
            messages.setdefault((test, name), []).append(line[6:])
    return messages


def reason(case, messages):
    failure = case.find("failure")
    if failure is None:
        failure = case.find("error")
    text = (failure.get("message") or failure.text or "") if failure is not None else ""
    test = case.get("classname", "").split(".", 1)[-1]
    lines = [l for l in text.splitlines() if l.strip()] or messages.get((test, case.get("name")), [])
    return [l[:REASON_WIDTH] for l in lines[-REASON_LINES:]]


def cases(paths):
    """(case, the TAP messages of its log) of every JUnit log; None for a log that cannot be read."""
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"cannot read {path}: {e}")
            yield None, {}
            continue
        messages = tap_messages(path[:-len(".junit.xml")] + ".txt")
        for case in root.iter("testcase"):
            yield case, messages


def failing_suites(path):
    """The meson tests whose JUnit suite counts a failing case (named without the project)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return set()
    return {s.get("name", "").split(".", 1)[-1] for s in root.iter("testsuite")
            if int(s.get("failures") or 0) + int(s.get("errors") or 0) > 0}


def killed(paths):
    """[(test, result, seconds)] of the tests meson's JSON logs (beside the JUnit ones) report as
    ended by their timeout, or with an error (a crash, a bad exit status) that no failing case
    of theirs accounts for."""
    out = []
    for path in paths:
        failing = failing_suites(path)
        try:
            with open(path[:-len(".junit.xml")] + ".json") as f:
                for line in f:
                    t = json.loads(line)
                    if t.get("result") == "TIMEOUT" or (
                            t.get("result") == "ERROR" and t.get("name") not in failing):
                        out.append((t.get("name"), t["result"], t.get("duration") or 0))
        except (OSError, ValueError):
            continue
    return out


def main(paths):
    passed = failed = skipped = 0
    ended = killed(paths)
    for name, result, seconds in ended:
        failed += 1
        print(f"FAILED: {name} ({result} after {seconds:.0f} s: meson ended it, its cases untold)")
    for case, messages in cases(paths):
        if case is None:
            failed += 1
            continue
        if case.get("name") in {name for name, _, _ in ended}:
            continue  # counted above (its JUnit entry shows no failure)
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            print(f"FAILED: {case.get('classname')} {case.get('name')}")
            for line in reason(case, messages):
                print(f"    {line}")
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
