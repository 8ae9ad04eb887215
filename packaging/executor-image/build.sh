#!/usr/bin/env bash
# Builds the executor image without any registry: mmdebstrap a Debian 12 minbase root with the
# sandbox's language stack, then import it into the local dockerd (`docker import`). The root
# tarball is cached under $CACHE_DIR keyed by the package list and suite, so a rerun only imports
# (or does nothing when the image already carries the same key).
#
#   packaging/executor-image/build.sh [IMAGE]      (default code-interpreter-executor:latest)
#   packaging/executor-image/build.sh --root-tarball   builds (or reuses) the cached root only and
#                                                  prints its path; no dockerd needed (the default
#                                                  image of packaging/image/ ships it, and the
#                                                  image's configuration in <path>.changes)
#   packaging/executor-image/build.sh --base-tarball   builds (or reuses) the cached root without
#                                                  the agent: no build and no dockerd needed, so
#                                                  scripts/test.sh runs it while it compiles
#
# The image carries the Docker backend's agent (src/agent) at /usr/local/lib/code-interpreter/agent,
# named by its labels; the root key covers it, so a new agent makes a new image.
#
# Env: AGENT (build/src/agent/code-interpreter-agent),
#      CACHE_DIR (/var/cache/code-interpreter), DEBIAN_MIRROR (http://deb.debian.org/debian),
#      FORCE=1 rebuilds the root even when cached, DOCKER (/usr/bin/docker, Debian's docker.io
#      client: a `docker` earlier in PATH may be another one). The same root, unpacked, serves the local
#      runtime's SANDBOX_ROOTFS=<dir> mode (ROOT_DIR=<dir> keeps the unpacked copy there).
set -euo pipefail

ROOT_ONLY=0 BASE_ONLY=0
if [ "${1:-}" = "--root-tarball" ]; then ROOT_ONLY=1; shift; fi
if [ "${1:-}" = "--base-tarball" ]; then BASE_ONLY=1; shift; fi
IMAGE="${1:-code-interpreter-executor:latest}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_DIR="${CACHE_DIR:-/var/cache/code-interpreter}"
PACKAGES=(python3 python3-pip python3-numpy python3-pandas python3-matplotlib python3-openpyxl
          python3-dill golang-go nodejs bash tar coreutils)
# 65532 is the sandbox uid/gid (SandboxSpec), user `user`; the image does not need a passwd entry
# for it, but tools that print the user name are friendlier with one.
SANDBOX_ID=65532
DOCKER="${DOCKER:-/usr/bin/docker}"

# The agent (src/agent, static) that the Docker backend runs as the containers' PID 1.
REPO="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
AGENT="${AGENT:-$REPO/build/src/agent/code-interpreter-agent}"
[ $BASE_ONLY = 1 ] || [ -x "$AGENT" ] ||
  { echo "no agent binary at $AGENT (scripts/build.sh builds it; or AGENT=path)" >&2; exit 1; }
AGENT_PATH=/usr/local/lib/code-interpreter/agent
AGENT_WIRE="$(sed -n 's/.*kWireVersion = \([0-9]*\);.*/\1/p' "$REPO/src/agent/agent_wire.h")"
[ -n "$AGENT_WIRE" ] || { echo "no kWireVersion in src/agent/agent_wire.h" >&2; exit 1; }

GO_STD="$REPO/scripts/go-std.sh"
base_key="$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" "recipe-v4" "$(sha256sum <"$GO_STD")" |
  sha256sum | cut -c1-16)"
base="$CACHE_DIR/executor-base-$base_key.tar"
mkdir -p "$CACHE_DIR"
[ $BASE_ONLY = 1 ] ||
  key="$(printf '%s\n' "$base_key" "$(sha256sum <"$AGENT")" "$AGENT_PATH" "agent-v$AGENT_WIRE" |
    sha256sum | cut -c1-16)"
tarball="$CACHE_DIR/executor-root-${key:-}.tar"

if [ $ROOT_ONLY = 0 ] && [ $BASE_ONLY = 0 ] &&
   "$DOCKER" image inspect --format '{{index .Config.Labels "code-interpreter.root-key"}}' "$IMAGE" \
     2>/dev/null | grep -qx "$key" && [ "${FORCE:-0}" != 1 ]; then
  echo "executor image $IMAGE is up to date (root key $key)" >&2
  exit 0
fi

# One root build at a time (scripts/test.sh starts one while it compiles; the image after it
# waits here, then finds it cached).
HOST_GO_STD=/usr/local/lib/code-interpreter/go-std
# Whether the root's Go toolchain is the host's, whose standard library HOST_GO_STD holds: the
# same `go version` and the same Debian package version of the toolchain.
same_go_as_host() {
  local root="$1" pkg
  [ -s "$HOST_GO_STD/go-version" ] && command -v go >/dev/null || return 1
  pkg="$(dpkg -S "$(readlink -f "$(command -v go)")" 2>/dev/null | cut -d: -f1)"
  [ -n "$pkg" ] &&
    [ "$(cat "$HOST_GO_STD/go-version")" = "$(chroot "$root" go version 2>/dev/null)" ] &&
    [ "$(dpkg-query -W -f '${Version}' "$pkg")" = \
      "$(chroot "$root" dpkg-query -W -f '${Version}' "$pkg" 2>/dev/null)" ]
}

exec 8>"$CACHE_DIR/.executor-root.lock"
flock 8
if [ ! -s "$base" ] || [ ! -s "$base.end" ] || [ "${FORCE:-0}" = 1 ]; then
  root="$(mktemp -d /var/tmp/executor-root.XXXXXX)"
  trap 'umount "$root/proc" 2>/dev/null || true; rm -rf --one-file-system "$root"' EXIT
  start=$(date +%s)
  echo "bootstrapping $SUITE minbase with: ${PACKAGES[*]}" >&2
  include="$(IFS=,; echo "${PACKAGES[*]}")"
  "$REPO/scripts/debian-root.sh" "$SUITE" "$MIRROR" "$root" "$include" >&2
  mkdir -p "$root/workspace" "$root/home"
  chmod 0755 "$root/workspace"
  # The sandbox user's home (E2B's /home/user) is the workspace under a second name.
  ln -sfn /workspace "$root/home/user"
  grep -q "^user:" "$root/etc/passwd" ||
    echo "user:x:$SANDBOX_ID:$SANDBOX_ID:user:/home/user:/bin/bash" >>"$root/etc/passwd"
  grep -q "^user:" "$root/etc/group" || echo "user:x:$SANDBOX_ID:" >>"$root/etc/group"
  # Go (`language: go`): the standard library compiled without cgo where the sandbox's build
  # looks for it (scripts/go-std.sh, by the image's own toolchain: the paths and build ids must
  # be the image's). Debian's precompiled copy (built with cgo) is then never used: removed.
  mount -t proc proc "$root/proc"
  if same_go_as_host "$root"; then
    # The host's copy (scripts/go-std.sh, which install-deps.sh runs) was built by the same
    # toolchain: compiling it again would cost minutes of CPU for the same files.
    echo "go-std: the host's $HOST_GO_STD, built by the same toolchain" >&2
    mkdir -p "$root$(dirname "$HOST_GO_STD")"
    cp -a "$HOST_GO_STD" "$root$HOST_GO_STD"
  else
    install -m 0755 "$GO_STD" "$root/tmp/go-std.sh"
    chroot "$root" env -i PATH=/usr/bin:/bin HOME=/tmp /tmp/go-std.sh >&2
  fi
  umount "$root/proc"
  rm -rf "$root/tmp/go-std.sh" "$root"/usr/lib/go-*/pkg/linux_amd64
  # Trim what a sandbox never needs: apt lists, caches, docs, man pages.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
         "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  # -b 1: 512-byte records, so the archive ends exactly after its two zero blocks (.end), where
  # the agent's members are appended.
  tar --numeric-owner -b 1 -C "$root" -cf "$base.tmp" .
  blocks="$(tar -tR -b 1 -f "$base.tmp" | tail -n1 |
    sed -n 's/^block \([0-9]*\): \*\* Block of NULs \*\*$/\1/p')"
  [ -n "$blocks" ] || { echo "cannot find the end of $base.tmp" >&2; exit 1; }
  echo $((blocks * 512)) >"$base.end"
  mv "$base.tmp" "$base"
  echo "root built in $(( $(date +%s) - start )) s: $base ($(du -h "$base" | cut -f1))" >&2
  if [ -n "${ROOT_DIR:-}" ]; then
    rm -rf "$ROOT_DIR" && mkdir -p "$ROOT_DIR" && tar -C "$ROOT_DIR" -xf "$base"
  fi
fi
if [ $BASE_ONLY = 1 ]; then
  echo "$base"
  exit 0
fi

# The image's root: the base's members, then the agent's. Roots of older agents are removed.
if [ ! -s "$tarball" ] || [ "${FORCE:-0}" = 1 ]; then
  stage="$(mktemp -d /var/tmp/executor-agent.XXXXXX)"
  install -D -m 0755 "$AGENT" "$stage$AGENT_PATH"
  { head -c "$(cat "$base.end")" "$base"
    tar -C "$stage" --numeric-owner --owner=0 --group=0 -b 1 -cf - ".$AGENT_PATH"
  } >"$tarball.tmp"
  rm -rf "$stage"
  find "$CACHE_DIR" -maxdepth 1 -name 'executor-root-*.tar*' ! -name "executor-root-$key.tar*" \
    -delete
  mv "$tarball.tmp" "$tarball"
fi

# The image's configuration, one Dockerfile instruction a line; also kept next to the tarball
# ($tarball.changes), where Docker-in-Docker's bootstrap reads it to import the same image.
CHANGES=("LABEL code-interpreter.root-key=$key" "WORKDIR /workspace"
         "LABEL code-interpreter.agent=$AGENT_PATH code-interpreter.agent-wire=$AGENT_WIRE"
         "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8" 'CMD ["/bin/bash"]')
printf '%s\n' "${CHANGES[@]}" >"$tarball.changes.tmp" && mv "$tarball.changes.tmp" "$tarball.changes"
if [ $ROOT_ONLY = 1 ]; then
  echo "$tarball"
  exit 0
fi
start=$(date +%s)
change_args=()
for c in "${CHANGES[@]}"; do change_args+=(--change "$c"); done
"$DOCKER" import "${change_args[@]}" "$tarball" "$IMAGE" >&2
echo "imported $IMAGE in $(( $(date +%s) - start )) s (root key $key)" >&2
