#!/usr/bin/env bash
# Builds the executor image without any registry: debootstrap a Debian 12 minbase root with the
# sandbox's language stack, then import it into the local dockerd (`docker import`). The root
# tarball is cached under $CACHE_DIR keyed by the package list and suite, so a rerun only imports
# (or does nothing when the image already carries the same key).
#
#   packaging/executor-image/build.sh [IMAGE]      (default code-interpreter-executor:latest)
#   packaging/executor-image/build.sh --root-tarball   builds (or reuses) the cached root only and
#                                                  prints its path; no dockerd needed (the default
#                                                  image of packaging/image/ ships it, and the
#                                                  image's configuration in <path>.changes)
#
# Env: CACHE_DIR (/var/cache/code-interpreter), DEBIAN_MIRROR (http://deb.debian.org/debian),
#      FORCE=1 rebuilds the root even when cached, DOCKER (/usr/bin/docker, Debian's docker.io
#      client: a `docker` earlier in PATH may be another one). The same root, unpacked, serves the local
#      runtime's SANDBOX_ROOTFS=<dir> mode (ROOT_DIR=<dir> keeps the unpacked copy there).
set -euo pipefail

ROOT_ONLY=0
if [ "${1:-}" = "--root-tarball" ]; then ROOT_ONLY=1; shift; fi
IMAGE="${1:-code-interpreter-executor:latest}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_DIR="${CACHE_DIR:-/var/cache/code-interpreter}"
PACKAGES=(python3 python3-numpy python3-pandas python3-matplotlib python3-openpyxl
          bash tar coreutils)
# 65532 is the sandbox uid/gid (SandboxSpec); the image does not need a passwd entry for it, but
# tools that print the user name are friendlier with one.
SANDBOX_ID=65532
DOCKER="${DOCKER:-/usr/bin/docker}"

key="$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" "recipe-v1" | sha256sum | cut -c1-16)"
tarball="$CACHE_DIR/executor-root-$key.tar"
mkdir -p "$CACHE_DIR"

if [ $ROOT_ONLY = 0 ] &&
   "$DOCKER" image inspect --format '{{index .Config.Labels "code-interpreter.root-key"}}' "$IMAGE" \
     2>/dev/null | grep -qx "$key" && [ "${FORCE:-0}" != 1 ]; then
  echo "executor image $IMAGE is up to date (root key $key)" >&2
  exit 0
fi

if [ ! -s "$tarball" ] || [ "${FORCE:-0}" = 1 ]; then
  command -v debootstrap >/dev/null || { echo "debootstrap is not installed" >&2; exit 1; }
  root="$(mktemp -d /var/tmp/executor-root.XXXXXX)"
  trap 'rm -rf "$root"' EXIT
  start=$(date +%s)
  echo "debootstrapping $SUITE minbase with: ${PACKAGES[*]}" >&2
  include="$(IFS=,; echo "${PACKAGES[*]}")"
  debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" >&2
  mkdir -p "$root/workspace"
  chmod 0755 "$root/workspace"
  grep -q "^sandbox:" "$root/etc/passwd" ||
    echo "sandbox:x:$SANDBOX_ID:$SANDBOX_ID:sandbox:/tmp:/usr/sbin/nologin" >>"$root/etc/passwd"
  grep -q "^sandbox:" "$root/etc/group" || echo "sandbox:x:$SANDBOX_ID:" >>"$root/etc/group"
  # Trim what a sandbox never needs: apt lists, caches, docs, man pages.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
         "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  echo "root built in $(( $(date +%s) - start )) s: $tarball ($(du -h "$tarball" | cut -f1))" >&2
  if [ -n "${ROOT_DIR:-}" ]; then
    rm -rf "$ROOT_DIR" && mkdir -p "$ROOT_DIR" && tar -C "$ROOT_DIR" -xf "$tarball"
  fi
fi

# The image's configuration, one Dockerfile instruction a line; also kept next to the tarball
# ($tarball.changes), where Docker-in-Docker's bootstrap reads it to import the same image.
CHANGES=("LABEL code-interpreter.root-key=$key" "WORKDIR /workspace"
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
