#!/usr/bin/env bash
# Builds the daemon's own images without any registry, as packaging/executor-image/build.sh
# builds the executor image: a Debian 12 minbase root made by mmdebstrap, then `docker import`
# with the image configuration given as --change lines.
#
#   packaging/image/build.sh [default|slim|all]      (default: all)
#   packaging/image/build.sh roots                   only the two roots (no binary needed)
#
#   code-interpreter:slim     the binary and the libraries it links, nothing else: for
#                             Docker-out-of-Docker (a mounted Engine socket) and Kubernetes. Runs
#                             as uid/gid 65532 (code-interpreter).
#   code-interpreter:latest   the slim root plus Debian's docker.io (dockerd, containerd, runc) and
#                             the executor image's root at /usr/share/code-interpreter/
#                             executor-image.tar, for Docker-in-Docker (--privileged). Runs as
#                             root; the nested dockerd's data root is the volume
#                             /var/lib/code-interpreter/docker.
#
# The root's packages are RUNTIME_PACKAGES below, declared so the roots can be made while the
# binary compiles (`roots`); the image build checks them against `ldd BINARY` and `dpkg -S`, and
# stops naming any library the binary links that they do not ship. Each root (without the
# binary) is cached as a tarball under $CACHE_DIR keyed by its package list and this recipe's
# version; the binary, policies/ and (for the default image) the executor root are appended as a
# last tar stream while the import reads, so a rebuild after only the binary changed re-reads
# the cached tarballs and copies nothing.
# An image whose build-key label (root, binary, policies, executor root, this script) is already
# current is left alone.
#
# Env: BINARY (build/code-interpreter, the project's one build), CACHE_DIR
#      (/var/cache/code-interpreter), DEBIAN_MIRROR (http://deb.debian.org/debian), FORCE=1
#      (rebuild the roots and reimport), DOCKER (/usr/bin/docker), SLIM_IMAGE
#      (code-interpreter:slim), DEFAULT_IMAGE (code-interpreter:latest).
set -euo pipefail
SCRIPT="$(readlink -f "$0")"
[ -z "${BINARY:-}" ] || BINARY="$(readlink -f "$BINARY")"  # relative to where it was given
cd "$(dirname "$SCRIPT")/../.."
BINARY="${BINARY:-$PWD/build/code-interpreter}"

WHICH="${1:-all}"
case "$WHICH" in default | slim | all | roots) ;; *)
  echo "usage: $0 [default|slim|all|roots]" >&2
  exit 2
  ;;
esac
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_DIR="${CACHE_DIR:-/var/cache/code-interpreter}"
DOCKER="${DOCKER:-/usr/bin/docker}"
SLIM_IMAGE="${SLIM_IMAGE:-code-interpreter:slim}"
DEFAULT_IMAGE="${DEFAULT_IMAGE:-code-interpreter:latest}"
RECIPE="image-recipe-v2"
# The daemon's user in both images (the slim one runs as it); the executor image's sandbox uid
# is the same number, which is harmless: they never share a kernel user namespace mapping.
RUN_ID=65532
# Kubernetes API servers outside the cluster may present a public CA (kubeconfig without
# certificate-authority-data): the system trust store. No tzdata: the daemon logs in UTC.
EXTRA_SLIM=(ca-certificates)
# dockerd, containerd and runc (docker.io's dependencies bring iptables, which the nested dockerd
# does not use: it runs without a bridge and with iptables off).
EXTRA_DEFAULT=(docker.io)
# The Debian packages of the libraries the binary links, in `sort` order (the roots' cache key).
RUNTIME_PACKAGES=(libc6 libcap2 libfmt9 libgcc-s1 libnl-3-200 libnl-route-3-200 libseccomp2
  libspdlog1.10 libssl3 libstdc++6 libyaml-0-2)

[ "$WHICH" = roots ] || [ -x "$BINARY" ] ||
  { echo "no binary at $BINARY (scripts/build.sh, or BINARY=...)" >&2; exit 1; }
command -v dpkg >/dev/null || { echo "dpkg is needed to map libraries to packages" >&2; exit 1; }
mkdir -p "$CACHE_DIR"

# The Debian package that ships $1, trying the merged-/usr spellings of the same file.
package_of() {
  local f="$1" real candidates c
  real="$(readlink -f "$f")"
  candidates=("$f" "/usr$f" "${f#/usr}" "$real" "/usr$real" "${real#/usr}")
  for c in "${candidates[@]}"; do
    # "pkg:arch: path" (or "pkg1, pkg2: path"); diversion notes are not owners.
    dpkg -S "$c" 2>/dev/null | grep -v '^diversion ' | head -n1 | sed 's/[:,].*//' | grep . &&
      return 0
  done
  echo "no Debian package ships $f (a library built by hand cannot go into the image)" >&2
  return 1
}

linked_packages() {
  local libs lib
  libs="$(ldd "$BINARY" | grep -o '/[^ ]*' | sort -u)"
  for lib in $libs; do package_of "$lib" || return 1; done | sort -u
}

# Makes (or reuses) the root tarball for a package list; prints its path. Alongside it,
# $tarball.end holds the byte offset where its end-of-archive blocks start, so the import can
# stream its members followed by the last layer's.
root_tarball() {
  local flavor="$1"
  shift
  local key tarball root include start
  key="$(printf '%s\n' "$SUITE" "$flavor" "$@" "$RECIPE" | sha256sum | cut -c1-16)"
  tarball="$CACHE_DIR/image-root-$flavor-$key.tar"
  # One build of a root at a time (scripts/test.sh makes them in the background while the
  # binary compiles; the image build then waits for them here).
  exec 8>"$CACHE_DIR/.image-root-$flavor.lock"
  flock 8
  if [ -s "$tarball" ] && [ -s "$tarball.end" ] && [ "${FORCE:-0}" != 1 ]; then
    echo "$tarball"
    return 0
  fi
  root="$(mktemp -d /var/tmp/image-root.XXXXXX)"
  start=$(date +%s)
  include="$(IFS=,; echo "$*")"
  echo "bootstrapping the $flavor root ($SUITE minbase) with: $*" >&2
  if ! scripts/debian-root.sh "$SUITE" "$MIRROR" "$root" "$include" >&2; then
    rm -rf "$root"
    return 1
  fi
  grep -q "^code-interpreter:" "$root/etc/passwd" ||
    echo "code-interpreter:x:$RUN_ID:$RUN_ID:code-interpreter:/var/lib/code-interpreter:/usr/sbin/nologin" \
      >>"$root/etc/passwd"
  grep -q "^code-interpreter:" "$root/etc/group" || echo "code-interpreter:x:$RUN_ID:" >>"$root/etc/group"
  # The file store, writable by the slim image's user; the nested dockerd's data root (the
  # default image's volume, root's).
  install -d -m 0750 -o "$RUN_ID" -g "$RUN_ID" "$root/var/lib/code-interpreter" \
    "$root/var/lib/code-interpreter/files"
  install -d -m 0710 "$root/var/lib/code-interpreter/docker"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
         "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  # -b 1: 512-byte records, so the archive ends exactly after its two zero blocks, no padding.
  tar --numeric-owner -b 1 -C "$root" -cf "$tarball.tmp" .
  rm -rf "$root"
  local blocks
  blocks="$(tar -tR -b 1 -f "$tarball.tmp" | tail -n1 | sed -n 's/^block \([0-9]*\): \*\* Block of NULs \*\*$/\1/p')"
  [ -n "$blocks" ] || { echo "cannot find the end of $tarball.tmp" >&2; return 1; }
  echo $((blocks * 512)) >"$tarball.end"
  mv "$tarball.tmp" "$tarball"
  echo "$flavor root built in $(($(date +%s) - start)) s: $tarball ($(du -h "$tarball" | cut -f1))" >&2
  echo "$tarball"
}

# import IMAGE ROOT_TARBALL BUILD_KEY STAGE_DIR --change...: the root's members, then the stage
# directory's new files (not its parent folders, whose modes the root keeps), as one archive on
# the import's stdin.
import_image() {
  local image="$1" tarball="$2" key="$3" stage="$4"
  shift 4
  local end start old
  end="$(cat "$tarball.end")"
  old="$("$DOCKER" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  start=$(date +%s)
  # -h: the stage holds a symlink to the cached executor root, stored as the file it names.
  { head -c "$end" "$tarball"
    tar -C "$stage" -h --numeric-owner --owner=0 --group=0 -b 1 -cf - \
      ./usr/local/bin/code-interpreter ./usr/share/code-interpreter
  } | "$DOCKER" import --change "LABEL code-interpreter.build-key=$key" "$@" - "$image" >&2
  echo "imported $image in $(($(date +%s) - start)) s (build key $key)" >&2
  # The image it replaced, untagged now: gone unless a container still uses it (each rebuild
  # would otherwise leave up to 1.9 GB behind).
  if [ -n "$old" ] && [ "$old" != "$("$DOCKER" image inspect --format '{{.Id}}' "$image")" ]; then
    "$DOCKER" rmi "$old" >/dev/null 2>&1 || true
  fi
}

current_key() {
  "$DOCKER" image inspect --format '{{index .Config.Labels "code-interpreter.build-key"}}' "$1" \
    2>/dev/null || true
}

if [ "$WHICH" = roots ]; then
  root_tarball slim "${RUNTIME_PACKAGES[@]}" "${EXTRA_SLIM[@]}" >/dev/null
  root_tarball default "${RUNTIME_PACKAGES[@]}" "${EXTRA_SLIM[@]}" "${EXTRA_DEFAULT[@]}" >/dev/null
  exit 0
fi

linked="$(linked_packages)"
mapfile -t packages <<<"$linked"
[ ${#packages[@]} -gt 0 ] || { echo "ldd found no libraries in $BINARY" >&2; exit 1; }
echo "the binary links libraries of: ${packages[*]}" >&2
for p in "${packages[@]}"; do
  [[ " ${RUNTIME_PACKAGES[*]} " == *" $p "* ]] || {
    echo "$BINARY links a library of $p, which RUNTIME_PACKAGES in $SCRIPT does not name:" \
      "add it" >&2
    exit 1
  }
done
packages=("${RUNTIME_PACKAGES[@]}")

stage="$(mktemp -d /var/tmp/image-stage.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$BINARY" "$stage/usr/local/bin/code-interpreter"
# The binary embeds policies/; the copy is for administrators (e.g. the executor profile to
# install on Kubernetes nodes, src/k8s/README.md).
install -d "$stage/usr/share/code-interpreter/policies"
install -m 0644 policies/* "$stage/usr/share/code-interpreter/policies/"
# What the last layer and the image configuration are made of: the staged files and this script.
content_key="$( (cd "$stage" && find . -type f -print0 | sort -z | xargs -0 sha256sum) |
  cat - "$SCRIPT" | sha256sum | cut -c1-16)"

COMMON=(
  --change 'ENTRYPOINT ["/usr/local/bin/code-interpreter"]'
  --change 'CMD ["serve"]'
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8"
  --change "ENV EXECUTOR_BACKEND=auto HOST=0.0.0.0 PORT=8000"
  --change "ENV FILE_STORAGE_DIR=/var/lib/code-interpreter/files"
  --change "WORKDIR /var/lib/code-interpreter"
  --change "EXPOSE 8000"
  --change "LABEL org.opencontainers.image.title=code-interpreter"
)

if [ "$WHICH" = slim ] || [ "$WHICH" = all ]; then
  root="$(root_tarball slim "${packages[@]}" "${EXTRA_SLIM[@]}")"
  key="$(printf '%s\n' "$root" "$content_key" | sha256sum | cut -c1-16)"
  if [ "$(current_key "$SLIM_IMAGE")" = "$key" ] && [ "${FORCE:-0}" != 1 ]; then
    echo "$SLIM_IMAGE is up to date (build key $key)" >&2
  else
    import_image "$SLIM_IMAGE" "$root" "$key" "$stage" "${COMMON[@]}" \
      --change "USER $RUN_ID:$RUN_ID"
  fi
fi

if [ "$WHICH" = default ] || [ "$WHICH" = all ]; then
  executor_root="$(packaging/executor-image/build.sh --root-tarball)"
  root="$(root_tarball default "${packages[@]}" "${EXTRA_SLIM[@]}" "${EXTRA_DEFAULT[@]}")"
  key="$(printf '%s\n' "$root" "$content_key" "$executor_root" | sha256sum | cut -c1-16)"
  if [ "$(current_key "$DEFAULT_IMAGE")" = "$key" ] && [ "${FORCE:-0}" != 1 ]; then
    echo "$DEFAULT_IMAGE is up to date (build key $key)" >&2
  else
    ln -s "$executor_root" "$stage/usr/share/code-interpreter/executor-image.tar"
    cp "$executor_root.changes" "$stage/usr/share/code-interpreter/executor-image.tar.changes"
    # The key of the executor root inside, for the bootstrap to compare with the nested
    # dockerd's executor image (its code-interpreter.root-key label, executor-image/build.sh).
    executor_key="$(basename "$executor_root" .tar)"
    import_image "$DEFAULT_IMAGE" "$root" "$key" "$stage" "${COMMON[@]}" \
      --change "LABEL code-interpreter.executor-root-key=${executor_key#executor-root-}" \
      --change "USER 0:0" \
      --change "VOLUME /var/lib/code-interpreter/docker"
    rm "$stage/usr/share/code-interpreter/executor-image.tar"{,.changes}
  fi
fi
