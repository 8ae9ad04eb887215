#!/usr/bin/env bash
# Makes a dockerd and the executor image available for the docker, e2e-docker and hostile-docker
# tests (scripts/test.sh runs it before `meson test`): starts dockerd when /_ping does not answer
# on $DOCKER_SOCK (no bridge, no iptables: sandboxes use network "none"), waits up to 30 s
# (printing its log on failure), then builds or reuses the image with
# packaging/executor-image/build.sh (a cold build debootstraps Debian 12, several minutes; the
# root is cached in /var/cache/code-interpreter).
#
# Env: DOCKER_SOCK (/var/run/docker.sock), DOCKERD_LOG (/tmp/code-interpreter-dockerd.log),
#      IMAGE (code-interpreter-executor:latest). Needs root to start dockerd.
set -euo pipefail
cd "$(dirname "$0")/../.."

SOCK="${DOCKER_SOCK:-/var/run/docker.sock}"
LOG="${DOCKERD_LOG:-/tmp/code-interpreter-dockerd.log}"
IMAGE="${IMAGE:-code-interpreter-executor:latest}"

ping_ok() { curl -sf --max-time 2 --unix-socket "$SOCK" http://docker/_ping >/dev/null 2>&1; }

if ! ping_ok; then
  command -v dockerd >/dev/null || { echo "dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
  echo "starting dockerd (log: $LOG)" >&2
  # setsid: the daemon outlives this script and the test run; it is not ours to stop.
  setsid dockerd --host "unix://$SOCK" --bridge=none --iptables=false --ip6tables=false \
    >"$LOG" 2>&1 </dev/null &
  for _ in $(seq 60); do
    ping_ok && break
    sleep 0.5
  done
  if ! ping_ok; then
    echo "dockerd did not answer on $SOCK within 30 s; its log:" >&2
    tail -n 50 "$LOG" >&2 || true
    exit 1
  fi
fi
echo "dockerd answers on $SOCK" >&2

start=$(date +%s)
DOCKER_HOST="unix://$SOCK" packaging/executor-image/build.sh "$IMAGE"
echo "executor image ready in $(( $(date +%s) - start )) s" >&2
