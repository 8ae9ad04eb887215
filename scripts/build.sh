#!/usr/bin/env bash
# Configures (once) and builds ./build: the project's one build (release: -O3, NDEBUG, warnings
# are errors), the binary that ships and the one every test suite runs. With targets named, only
# those (serve.sh builds `code-interpreter` without the test suites and their GoogleTest); with
# none, everything.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=true
[ $# -eq 0 ] || tests=false
if [ ! -f build/build.ninja ]; then
  meson setup build -Dtests=$tests >&2
elif $tests && ! python3 -c 'import json, sys
opts = json.load(open("build/meson-info/intro-buildoptions.json"))
sys.exit(0 if any(o["name"] == "tests" and o["value"] for o in opts) else 1)'; then
  meson configure build -Dtests=true >&2  # a build made by serve.sh, now with the test suites
fi
ninja -C build "$@" >&2
