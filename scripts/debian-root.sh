#!/usr/bin/env bash
# Makes a Debian minbase root in an empty or missing directory: the one way the executor image's,
# the daemon images' and the test VM's roots are made (mmdebstrap: one apt run, several times
# cheaper in CPU than debootstrap here).
#
#   scripts/debian-root.sh SUITE MIRROR DIR PACKAGE[,PACKAGE...] [MMDEBSTRAP_OPTION...]
#
# Merged /usr as debootstrap makes it (directory links and usr-is-merged, mmdebstrap's merged-usr
# hook), not usrmerge's conversion, which would bring perl into the root.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 SUITE MIRROR DIR PACKAGES [MMDEBSTRAP_OPTION...]" >&2; exit 2; }
suite="$1" mirror="$2" dir="$3" include="$4"
shift 4
command -v mmdebstrap >/dev/null ||
  { echo "mmdebstrap is not installed (scripts/install-deps.sh docker)" >&2; exit 1; }
exec mmdebstrap --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="$include" "$@" "$suite" "$dir" "$mirror"
