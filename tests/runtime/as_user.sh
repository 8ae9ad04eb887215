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
# Subordinate ids, as an administrator gives a rootless daemon's user (docs/security.md "Rootless").
"$(dirname "$0")/../common/grant-subids.sh" "$user" || exit 1
tmp=$(mktemp -d /tmp/ci-as-user-XXXXXX) || exit 1
chmod 755 "$tmp"
# The checkout may live where USER cannot reach it (a 0700 home, say): run copies of the test
# binary, the shim and the policies from a folder USER can read.
mkdir "$tmp/bin" "$tmp/work" && cp "$1" "$tmp/bin/" && cp "$CI_TEST_SHIM" "$tmp/bin/" || exit 1
cp -r "$(dirname "$0")/../../policies" "$tmp/policies" || exit 1
CI_TEST_SHIM="$tmp/bin/$(basename "$CI_TEST_SHIM")"
CI_POLICIES_DIR="$tmp/policies"
export CI_TEST_SHIM CI_POLICIES_DIR
test_binary="$tmp/bin/$(basename "$1")"
shift
set -- "$test_binary" "$@"
chown -R "$user:$group" "$tmp/work"
xml=
n=$#
i=0
while [ $i -lt $n ]; do
  arg=$1
  shift
  case $arg in
    --gtest_output=xml:*) xml=${arg#--gtest_output=xml:}; arg="--gtest_output=xml:$tmp/work/out.xml" ;;
  esac
  set -- "$@" "$arg"
  i=$((i + 1))
done
cd "$tmp/work" || exit 1
CI_TEST_ROOTLESS=1 TMPDIR=/tmp setpriv --reuid="$user" --regid="$group" --clear-groups -- "$@"
rc=$?
if [ -n "$xml" ] && [ -f "$tmp/work/out.xml" ]; then cp "$tmp/work/out.xml" "$xml"; fi
rm -rf "$tmp"
exit $rc
