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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=16, help="the parent's anonymous memory")
    ap.add_argument("--touch", type=int, default=4, help="MB each child touches")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    size, touch = args.mb << 20, min(args.touch, args.mb) << 20
    pages = touch // PAGE
    for huge in (False, True):
        mem = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if huge:
            mem.madvise(mmap.MADV_HUGEPAGE)
        mem.write(b"\1" * size)
        base = measure(mem, "none", touch, args.rounds)
        costs = {m: (measure(mem, m, touch, args.rounds) - base) * 1000 / pages
                 for m in ("read", "write", "fresh")}
        label = "huge pages" if huge else "4 KB pages"
        print(f"{label}: fork + exit + wait {base:.2f} ms; per page touched: "
              + ", ".join(f"{m} {us:.1f} us" for m, us in costs.items()))
        mem.close()


if __name__ == "__main__":
    main()
