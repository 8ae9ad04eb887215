#!/usr/bin/env bash
# One command: install what the backend needs, build the daemon, and start it. Configuration comes
# from the environment (docs/configuration.md), e.g. PORT=9000 scripts/serve.sh. With
# EXECUTOR_BACKEND=docker it also installs docker.io, builds the containers' agent and makes a
# dockerd (if none answers) and the executor image (tests/docker/start-dockerd.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${EXECUTOR_BACKEND:-local}" = docker ]; then
  scripts/install-deps.sh serve docker
  scripts/build.sh code-interpreter src/agent/code-interpreter-agent
  tests/docker/start-dockerd.sh
else
  scripts/install-deps.sh serve
  scripts/build.sh code-interpreter  # the test suites are for scripts/test.sh
fi
exec ./build/code-interpreter serve
