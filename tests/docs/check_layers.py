#!/usr/bin/env python3
"""The layout's rules, from the #include lines (docs/architecture.md has the layout):

- src/runtime/ is a folder per process, each including only the folders before it in LAYERS
  (src/runtime/README.md): the code of a sandbox's init cannot reach into the daemon's.
- No backend includes another backend's folder (BACKENDS): what two share lives below them.
- No API front includes another front's folder (FRONTS, in src/daemon/): what they share is
  daemon/front/ and the service layer under it.

Usage: check_layers.py REPO_ROOT. Prints one line per offending include; exit 1 when any.
"""
import os
import re
import sys

LAYERS = ["kernel", "wire", "init", "parent", "daemon"]
BACKENDS = ["runtime", "docker", "k8s"]
FRONTS = ["api", "mcp", "e2b"]
INCLUDE = re.compile(r'^#include "([a-z0-9_]+)/(?:([a-z0-9_]+)/)?[^"]+"', re.M)


def sources(folder):
    for dirpath, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith((".h", ".cc")):
                yield os.path.join(dirpath, f)


def check(root):
    problems = []
    runtime = os.path.join(root, "src", "runtime")
    for layer in LAYERS:
        for path in sources(os.path.join(runtime, layer)):
            for top, sub in INCLUDE.findall(open(path).read()):
                if top == "runtime" and sub in LAYERS and LAYERS.index(sub) > LAYERS.index(layer):
                    problems.append(f"{os.path.relpath(path, root)}: includes runtime/{sub}/, "
                                    f"a later layer than {layer}/")
    loose = [f for f in os.listdir(runtime) if f.endswith((".h", ".cc"))]
    problems += [f"src/runtime/{f}: outside the folders by process" for f in sorted(loose)]
    for backend in BACKENDS:
        for path in sources(os.path.join(root, "src", backend)):
            for top, _ in INCLUDE.findall(open(path).read()):
                if top in BACKENDS and top != backend:
                    problems.append(f"{os.path.relpath(path, root)}: includes {top}/, another "
                                    "backend")
    for front in FRONTS:
        for path in sources(os.path.join(root, "src", "daemon", front)):
            for top, sub in INCLUDE.findall(open(path).read()):
                if top == "daemon" and sub in FRONTS and sub != front:
                    problems.append(f"{os.path.relpath(path, root)}: includes daemon/{sub}/, "
                                    "another API front")
    return problems


def main():
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"{len(problems)} layering problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
