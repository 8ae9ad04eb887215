#!/usr/bin/env bash
# Installs what code-interpreter needs on Debian 12, from Debian's packages only, by group:
#
#   scripts/install-deps.sh [--packages-only] [serve] [go] [docker] [tests]   (none: tests)
#
#   serve   build the daemon and serve the local backend: Python, bash and JavaScript programs
#   go      `language: go`: the toolchain and its standard library compiled once (scripts/go-std.sh)
#   docker  the Docker backend: a dockerd, and mmdebstrap for the executor image
#   tests   everything the test suites use (all the groups above, GoogleTest, the VM's qemu, the
#           MCP and E2B SDK clients from npm)
#
# --packages-only: Debian's packages, without compiling Go's library or running npm. Idempotent:
# a second run installs nothing.
set -euo pipefail

serve=(
  meson ninja-build pkg-config g++
  libboost-dev rapidjson-dev libspdlog-dev libfmt-dev libseccomp-dev libcap-dev
  libnl-3-dev libnl-route-3-dev libssl-dev
  libyaml-dev  # the Kubernetes backend: kubeconfig files are YAML
  # the Python stack inside the sandbox (the onyx data-stack cases)
  python3 python3-pip python3-numpy python3-pandas python3-matplotlib python3-openpyxl
  python3-dill  # saved session state (src/daemon/sessions/python_state.h)
  libpython3.11  # the fork server loads Python's shared library (src/runtime/README.md)
  uidmap  # rootless sandboxes with subordinate ids (newuidmap, newgidmap)
  curl
)
go=(golang-go)  # programs build without cgo: no C compiler in the sandbox (scripts/go-std.sh)
docker=(docker.io mmdebstrap)  # a real dockerd; the images are built with mmdebstrap
tests=(
  clang-format libgtest-dev libgmock-dev
  shellcheck  # the sandboxes' shell programs (tests/programs/check_programs.py)
  # real HTTP clients (httpx sends a whole body before reading the answer, as the onyx suite
  # does), the bwrap baseline of the benchmarks
  python3-httpx bubblewrap procps openssl
  # the Kubernetes manifests check parses kubectl kustomize's output (kubectl itself is not in
  # Debian 12: preinstalled here; the check is skipped without it outside CI)
  python3-yaml
  python3-seccomp  # the fake Kubernetes API server's pod seccomp filters (tests/k8s/fake)
  python3-kubernetes  # the fake Kubernetes API server's second client
  # the systemd tests' Debian 12 VM on cgroup v2 (tests/vm/): software-emulated qemu, its disk
  # tools, ssh into it
  qemu-system-x86 qemu-utils openssh-client
)

packages_only=false
if [ "${1:-}" = --packages-only ]; then packages_only=true; shift; fi
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(tests)
want=() want_go=false want_npm=false
for g in "${groups[@]}"; do
  case "$g" in
    serve) want+=("${serve[@]}") ;;
    go) want+=("${go[@]}") want_go=true ;;
    docker) want+=("${docker[@]}") ;;
    tests) want+=("${serve[@]}" "${go[@]}" "${docker[@]}" "${tests[@]}") want_go=true want_npm=true ;;
    *) echo "install-deps: unknown group '$g' (serve, go, docker, tests)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# JavaScript programs run on Node.js; the MCP test's client needs npm too. One already on the
# machine serves (Debian's npm would conflict with one from another repository); else Debian's.
command -v node >/dev/null || missing+=(nodejs)
if $want_npm && ! command -v npm >/dev/null; then missing+=(npm); fi
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
$packages_only && exit 0
# Go's standard library compiled once for the sandboxes (nothing to do when it is up to date).
if $want_go; then $SUDO "$(dirname "$0")/go-std.sh"; fi
# The official clients the tests drive, at the versions of their package-lock.json: the MCP
# TypeScript SDK (tests/mcp) and E2B's SDKs (tests/e2b); only when a lock is newer than what its
# node_modules holds.
for client_dir in "$(dirname "$0")/../tests/mcp" "$(dirname "$0")/../tests/e2b"; do
  if $want_npm &&
    [ "$client_dir/package-lock.json" -nt "$client_dir/node_modules/.package-lock.json" ]
  then
    echo "installing: the SDK clients of $(basename "$client_dir") (npm ci)" >&2
    (cd "$client_dir" && npm ci --no-audit --no-fund >&2)
  fi
done
