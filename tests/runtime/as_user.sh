#!/bin/sh
# as_user.sh USER COMMAND [ARGS...]: runs a test binary as an unprivileged USER (the rootless
# runtime suite), from root. No supplementary groups, the environment kept (CI_TEST_SHIM), and
# CI_TEST_ROOTLESS=1 so the fixture knows. Meson's --gtest_output=xml:PATH points into the
# root-owned build directory, which USER cannot write: it is redirected to a directory USER owns
# and copied back afterwards.
set -u
user=$1
shift
if [ "$(id -u)" != 0 ]; then
  echo "as_user.sh: must start as root to switch to $user" >&2
  exit 1
fi
group=$(id -gn "$user") || exit 1
tmp=$(mktemp -d /tmp/ci-as-user-XXXXXX) || exit 1
chown "$user:$group" "$tmp"
xml=
n=$#
i=0
while [ $i -lt $n ]; do
  arg=$1
  shift
  case $arg in
    --gtest_output=xml:*) xml=${arg#--gtest_output=xml:}; arg="--gtest_output=xml:$tmp/out.xml" ;;
  esac
  set -- "$@" "$arg"
  i=$((i + 1))
done
cd "$tmp" || exit 1
CI_TEST_ROOTLESS=1 TMPDIR=/tmp setpriv --reuid="$user" --regid="$group" --clear-groups -- "$@"
rc=$?
if [ -n "$xml" ] && [ -f "$tmp/out.xml" ]; then cp "$tmp/out.xml" "$xml"; fi
rm -rf "$tmp"
exit $rc
