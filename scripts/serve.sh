#!/usr/bin/env bash
# One command: install what is needed, build, and start the daemon on the local backend.
# Configuration comes from the environment (see the README), e.g. PORT=9000 scripts/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh code-interpreter  # the test binaries are for scripts/test.sh
exec ./build/code-interpreter serve
