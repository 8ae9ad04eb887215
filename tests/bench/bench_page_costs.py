#!/usr/bin/python3
"""What this host charges for a new process and for each page it touches: the costs a fork
server pays per sandbox (tests/bench/README.md "bench_page_costs.py — what a process and a page
cost on this host").

A parent maps --mb MB of private anonymous memory and fills it; each round forks a child that
touches --touch MB of it one byte per page (reading it, or writing it: a copy-on-write fault), or
writes as many pages of a fresh mapping (a zero-fill fault), then exits; the parent waits.
Printed: a fork + exit + wait that touches nothing (ms), and per page what touching adds over
that (microseconds), the same with the parent's memory on transparent huge pages. Run with
/usr/bin/python3 on a quiet machine:

  /usr/bin/python3 tests/bench/bench_page_costs.py
"""
import argparse
import mmap
import os
import statistics
import time

PAGE = mmap.PAGESIZE


def child(mem, mode, touch):
    if mode == "read":
        for offset in range(0, touch, PAGE):
            mem[offset]
    elif mode == "write":
        for offset in range(0, touch, PAGE):
            mem[offset] = 2
    elif mode == "fresh":
        fresh = mmap.mmap(-1, touch, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for offset in range(0, touch, PAGE):
            fresh[offset] = 3
    os._exit(0)


def round_ms(mem, mode, touch):
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        child(mem, mode, touch)
    os.waitpid(pid, 0)
    return (time.perf_counter() - start) * 1000


def measure(mem, mode, touch, rounds):
    return statistics.median(round_ms(mem, mode, touch) for _ in range(rounds))


def host_costs(mb=16, touch_mb=4, rounds=30, huge=False):
    """(fork + exit + wait in ms, {"read"|"write"|"fresh": microseconds per page touched})."""
    size, touch = mb << 20, min(touch_mb, mb) << 20
    pages = touch // PAGE
    mem = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if huge:
            mem.madvise(mmap.MADV_HUGEPAGE)
        mem.write(b"\1" * size)
        base = measure(mem, "none", touch, rounds)
        return base, {m: (measure(mem, m, touch, rounds) - base) * 1000 / pages
                      for m in ("read", "write", "fresh")}
    finally:
        mem.close()


def describe(base, costs):
    return (f"fork + exit + wait {base:.2f} ms; per page touched: "
            + ", ".join(f"{m} {us:.1f} us" for m, us in costs.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=16, help="the parent's anonymous memory")
    ap.add_argument("--touch", type=int, default=4, help="MB each child touches")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    for huge in (False, True):
        label = "huge pages" if huge else "4 KB pages"
        print(f"{label}: " + describe(*host_costs(args.mb, args.touch, args.rounds, huge)))


if __name__ == "__main__":
    main()
