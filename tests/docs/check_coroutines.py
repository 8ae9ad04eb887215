#!/usr/bin/env python3
"""No braced temporary and no conditional operator inside a co_await expression (CONTRIBUTING.md,
toolchain traps): GCC 12 destroys such a temporary, or a class-type `?:` result, twice, which
crashed the daemon on a request (free(): invalid pointer, free(): invalid size). Flagged:
`type{...}`, `({...`, `, {...` between `co_await` and the statement's end, and `?` before its end
or its first `{`. Name the value first, as a local, and pass that.

Usage: check_coroutines.py REPO_ROOT. Prints one line per offending statement; exit 1 when any.
"""
import os
import re
import sys

BRACED = re.compile(r"\b[A-Za-z_][\w:]*(?:<[^;{}]*>)?\{|[(,]\s*\{")
COMMENT = re.compile(r"//[^\n]*")
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def check(root):
    problems = []
    for folder in ("src", "tests"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            if "node_modules" in dirpath:
                continue
            for f in sorted(files):
                if not f.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, f)
                text = STRING.sub('""', COMMENT.sub("", open(path).read()))
                for m in re.finditer(r"\bco_await\b", text):
                    end = text.find(";", m.end())
                    statement = text[m.end():end]
                    line = text.count("\n", 0, m.start()) + 1
                    where = f"{os.path.relpath(path, root)}:{line}"
                    if BRACED.search(statement):
                        problems.append(f"{where}: a braced temporary in a co_await expression")
                    begin = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
                    if "?" in text[begin:m.start()] + statement.split("{")[0]:
                        problems.append(f"{where}: a conditional operator in a co_await "
                                        "expression")
    return problems


def main():
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"{len(problems)} braced temporaries or conditional operators in co_await expressions")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
