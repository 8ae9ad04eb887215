#!/usr/bin/env python3
"""The programs that run inside sandboxes are files (scripts/embed_text.py embeds them): each
.py under src/ compiles, each .sh passes shellcheck, and no C++ file holds an embedded program
of more than MAX_LINES lines (a raw string, or a run of adjacent string literals).

Usage: check_programs.py REPO_ROOT. One line per problem; exit 1 when any.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 10
RAW = re.compile(r'R"(\w*)\((.*?)\)\1"', re.S)
LITERAL_LINE = re.compile(r'^\s*(?:[\w:<>*& ]+=\s*|return\s+|\(\s*)?"(?:[^"\\]|\\.)*"\s*[;+,)]?\s*$')


def files(root, suffixes):
    for dirpath, dirnames, names in os.walk(os.path.join(root, "src")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in sorted(names):
            if name.endswith(suffixes):
                yield os.path.join(dirpath, name)


def check(root):
    problems = []
    for path in files(root, (".py",)):
        try:
            compile(open(path).read(), path, "exec")
        except SyntaxError as e:
            problems.append(f"{os.path.relpath(path, root)}:{e.lineno}: {e.msg}")
    shells = list(files(root, (".sh",)))
    if shells:
        r = subprocess.run(["shellcheck", "-s", "bash", "-f", "gcc"] + shells,
                           capture_output=True, text=True)
        problems += [line.replace(root + "/", "") for line in r.stdout.splitlines()]
    for path in files(root, (".cc", ".h")):
        text = open(path).read()
        for m in RAW.finditer(text):
            if m.group(2).count("\n") >= MAX_LINES:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{os.path.relpath(path, root)}:{line}: a raw string of "
                                f"{m.group(2).count(chr(10)) + 1} lines: make it a file")
        run = 0
        for number, line in enumerate(text.split("\n"), 1):
            run = run + 1 if LITERAL_LINE.match(line) else 0
            if run == MAX_LINES + 1:
                problems.append(f"{os.path.relpath(path, root)}:{number - MAX_LINES}: more than "
                                f"{MAX_LINES} lines of string literals: make it a file")
    return problems


def main():
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) in the programs")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
