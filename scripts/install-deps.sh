#!/usr/bin/env bash
# Installs everything code-interpreter needs to build, run and test on Debian 12, from Debian's
# packages only. Idempotent: a second run installs nothing.
set -euo pipefail

packages=(
  # build
  meson ninja-build pkg-config g++ clang-format
  libboost-dev rapidjson-dev libspdlog-dev libfmt-dev libseccomp-dev libcap-dev
  libnl-3-dev libnl-route-3-dev libssl-dev libgtest-dev libgmock-dev
  # the Kubernetes backend: kubeconfig files are YAML
  libyaml-dev
  # the Python stack inside the sandbox (the onyx data-stack cases)
  python3 python3-numpy python3-pandas python3-matplotlib python3-openpyxl
  # `language: go` (no C compiler needed: programs build without cgo, scripts/go-std.sh)
  golang-go
  # the fork server loads Python's shared library (src/runtime/README.md "Fork server")
  libpython3.11
  # tests and benchmarks: real HTTP clients (curl; httpx sends a whole body before reading the
  # answer, as the onyx suite does), the bwrap baseline
  curl python3-httpx bubblewrap procps openssl
  # the Kubernetes manifests check parses kubectl kustomize's output (kubectl itself is not in
  # Debian 12: preinstalled here; the check is skipped without it outside CI)
  python3-yaml
  python3-seccomp  # the fake Kubernetes API server's pod seccomp filters (tests/k8s/fake)
  # the fake Kubernetes API server's second client (tests/k8s/python_client_test.py)
  python3-kubernetes
  # rootless sandboxes with subordinate ids (newuidmap, newgidmap)
  uidmap
  # the Docker backend's tests: a real dockerd, and the executor image built with debootstrap
  docker.io debootstrap
  # the systemd tests' Debian 12 VM on cgroup v2 (tests/vm/): software-emulated qemu, its disk
  # tools, ssh into it
  qemu-system-x86 qemu-utils openssh-client
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The MCP end-to-end test's client runs on Node.js (tests/mcp). A Node.js with npm already on the
# machine serves (Debian's npm package would conflict with one from another repository); without
# one, Debian's.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
fi
# Go's standard library compiled once for the sandboxes (nothing to do when it is up to date).
$SUDO "$(dirname "$0")/go-std.sh"
# The official MCP TypeScript SDK for tests/mcp/mcp_client.mjs, at the versions of its
# package-lock.json. Only when the lock is newer than what node_modules holds, so a second run
# installs nothing.
mcp_client_dir="$(dirname "$0")/../tests/mcp"
if ! command -v npm >/dev/null; then
  echo "warning: no npm: the MCP SDK client of tests/mcp is not installed; tests/e2e/test_mcp.py" \
    "will skip (fail under CI_E2E_NO_SKIP=1)" >&2
elif [ "$mcp_client_dir/package-lock.json" -nt "$mcp_client_dir/node_modules/.package-lock.json" ]
then
  echo "installing: the MCP SDK client (npm ci in tests/mcp)" >&2
  (cd "$mcp_client_dir" && npm ci --no-audit --no-fund >&2)
fi
