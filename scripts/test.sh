#!/usr/bin/env bash
# One command: install what is needed, build, run every test suite, and print
# "N passed, N failed" as the last line. Extra arguments go to `meson test` (e.g. --suite unit).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }
# The systemd tests' VM image (tests/vm/, cached after the first time): debootstrap waits on the
# network more than on the CPU, so on a fresh machine it runs while the code compiles.
vm_image_log="${TMPDIR:-/tmp}/code-interpreter-vm-image.log"
tests/vm/build-image.sh >"$vm_image_log" 2>&1 &
vm_image=$!
scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }
# A release build (-O3, NDEBUG) of the binary too, warnings still errors: optimisation brings
# warnings (and assert-only variables) that the debugoptimized build never shows.
scripts/build.sh --release || { echo "0 passed, 1 failed"; exit 1; }
# dockerd and the executor image for the docker, e2e-docker and hostile-docker tests. Without
# them those tests skip, except under CI=true where they fail (so CI never skips them silently).
tests/docker/start-dockerd.sh || echo "warning: no dockerd or executor image; Docker tests will" \
  "skip (fail when CI=true)" >&2
wait "$vm_image" || echo "warning: the VM image did not build ($vm_image_log); the vm suite" \
  "will try again" >&2
# The daemon's own images (code-interpreter:slim and :latest, packaging/image/build.sh) from the
# release binary, for e2e-dood (and Docker-in-Docker). A failed build removes them (an older
# image would test an older binary): those tests then skip, or fail under CI=true.
if ! packaging/image/build.sh all; then
  echo "warning: the daemon's images were not built; the container tests will skip (fail" \
    "when CI=true)" >&2
  /usr/bin/docker rmi -f code-interpreter:slim code-interpreter:latest >/dev/null 2>&1 || true
fi
rm -f build/meson-logs/testlog.junit.xml
meson test -C build --print-errorlogs --no-rebuild "$@"
status=$?
python3 scripts/summarize_tests.py build/meson-logs/testlog.junit.xml
summary=$?
[ $status -eq 0 ] && [ $summary -eq 0 ]
