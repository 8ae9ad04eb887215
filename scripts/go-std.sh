#!/usr/bin/env bash
# Compiles Go's standard library once, without cgo, into the directory that Go programs in a
# sandbox build against (`go build -pkgdir`, src/daemon/service/languages.cc): a sandbox starts
# with an empty build cache of its own (in its /tmp), and with this directory a hello world
# compiles only its own package and links, instead of the whole standard library (a minute of
# CPU). Debian's precompiled library (GOROOT/pkg) is built with cgo, which would need a C
# compiler in the sandbox.
#
#   scripts/go-std.sh [DIR]     (default /usr/local/lib/code-interpreter/go-std)
#
# DIR must be inside the sandboxes' root: under /usr for the local backend's host root, the same
# path in an image's root. Idempotent: DIR/go-version names the toolchain it was built with, and a
# different `go version` rebuilds it. GO (default: go on PATH) is the toolchain to build with.
set -euo pipefail

DIR="${1:-/usr/local/lib/code-interpreter/go-std}"
GO="${GO:-$(command -v go || true)}"
[ -n "$GO" ] || { echo "go-std: no go toolchain (apt-get install golang-go)" >&2; exit 1; }
version="$("$GO" version)"
if [ "$(cat "$DIR/go-version" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
echo "go-std: compiling the Go standard library into $DIR ($version; about a minute)" >&2
mkdir -p "$(dirname "$DIR")"
tmp="$(mktemp -d "$(dirname "$DIR")/.go-std.XXXXXX")"
cache="$(mktemp -d)"
trap 'rm -rf "$tmp" "$cache"' EXIT
# The same settings as the sandbox's build (languages.cc): any difference makes these stale there.
env -u GOFLAGS GOCACHE="$cache" CGO_ENABLED=0 GOPROXY=off GOENV=off \
  "$GO" install -pkgdir="$tmp/pkg" std
echo "$version" >"$tmp/go-version"
chmod -R a+rX,go-w "$tmp"
rm -rf "$DIR.old"
[ -e "$DIR" ] && mv "$DIR" "$DIR.old"
mv "$tmp" "$DIR"
rm -rf "$DIR.old"
