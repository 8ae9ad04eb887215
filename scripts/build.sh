#!/usr/bin/env bash
# Configures (once) and builds into ./build: everything, or only the targets named (serve.sh
# builds just `code-interpreter`, not the test binaries). `--release`: a release build (-O3,
# NDEBUG, warnings still errors) of the code-interpreter binary and its container agent (which
# the executor image takes from there first), into ./build-release.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--release" ]; then
  if [ ! -f build-release/build.ninja ]; then
    meson setup build-release --buildtype=release >&2
  fi
  ninja -C build-release code-interpreter src/agent/code-interpreter-agent >&2
  exit 0
fi
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=debugoptimized >&2
fi
ninja -C build "$@" >&2
