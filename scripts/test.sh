#!/usr/bin/env bash
# One command: install what is needed, build, run every test suite, print where the time went
# (scripts/ci_times.py) and "N passed, N failed, N skipped" as the last line. Extra arguments go
# to `meson test` (e.g. --suite unit). Work that waits on the network or on one core (images,
# the VM's disk, Go's standard library, npm) runs while the compiler runs; each such job's log is
# in $CI_LOGS (default /tmp/code-interpreter-ci).
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${CI_LOGS:-${TMPDIR:-/tmp}/code-interpreter-ci}"
rm -rf "$logs" && mkdir -p "$logs"
phases="$logs/phases.tsv"

# phase NAME CMD...: runs CMD and appends "NAME, start, end, exit status, the machine's CPU
# counters (/proc/stat) at the start and at the end" to $phases.
phase() {
  local name="$1" start cpu rc
  shift
  start=$(date +%s.%N)
  cpu=$(head -n1 /proc/stat)
  "$@"
  rc=$?
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s.%N)" "$rc" "$cpu" \
    "$(head -n1 /proc/stat)" >>"$phases"
  return $rc
}
# background NAME CMD...: a phase in the background, its output in $logs/NAME.log; await NAME
# waits for it and says where its log is when it failed.
declare -A jobs
background() {
  local name="$1"
  shift
  phase "$name" "$@" >"$logs/$name.log" 2>&1 &
  jobs[$name]=$!
}
await() {
  wait "${jobs[$1]}" && return 0
  echo "warning: $1 failed; the end of its log ($logs/$1.log):" >&2
  tail -n 20 "$logs/$1.log" >&2
  return 1
}
fail() {
  echo "$1" >&2
  python3 scripts/ci_times.py "$logs" build/meson-logs
  echo "0 passed, 1 failed"
  exit 1
}

# The machine's CPU counters every 5 s, for each test's busy share in the time table.
while sleep 5; do printf '%s\t%s\n' "$(date +%s.%N)" "$(head -n1 /proc/stat)"; done >"$logs/cpu.tsv" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

phase packages scripts/install-deps.sh --packages-only tests || fail "installing packages failed"
# Go's standard library and the MCP SDK client (install-deps.sh again: the packages are there now).
background go-std-and-npm scripts/install-deps.sh tests
if [ $# -eq 0 ]; then  # every suite: what the VM and Docker lanes need, cached after
  # The VM's disk and its saved booted state (a cold boot under emulation: a minute of CPU).
  background vm-image /usr/bin/python3 tests/vm/vm.py prepare
  # The images' roots (mmdebstrap), one after the other: the executor image's (the image itself
  # needs the agent, built below), then the daemon images' (their packages are declared).
  roots() {
    phase executor-root packaging/executor-image/build.sh --base-tarball
    phase image-roots packaging/image/build.sh roots
  }
  background roots roots
fi
phase build scripts/build.sh || fail "the build failed"

# dockerd and the executor image (start-dockerd.sh), then the daemon's own images
# (packaging/image/build.sh: code-interpreter:slim and :latest) for Docker-out-of-Docker,
# Docker-in-Docker and the VM's rootless Docker. Without them those tests skip, except under
# CI=true where they fail (so CI never skips them silently). A failed image build removes the
# images: an older one would test an older binary.
docker_images() {
  if ! phase dockerd-and-executor-image tests/docker/start-dockerd.sh; then
    echo "warning: no dockerd or executor image; Docker tests will skip (fail when CI=true)" >&2
  elif ! phase daemon-images packaging/image/build.sh all; then
    echo "warning: the daemon's images were not built; the container tests will skip (fail" \
      "when CI=true)" >&2
    /usr/bin/docker rmi -f code-interpreter:slim code-interpreter:latest >/dev/null 2>&1 || true
  fi
  touch "$logs/images.done"
}

rm -f build/meson-logs/lane-* build/meson-logs/testlog.*  # an earlier run's, not this one's
await go-std-and-npm || echo "warning: Go's standard library or an SDK client (tests/mcp, tests/e2b) is missing" >&2
if [ $# -gt 0 ]; then  # the suites asked for (the VM tests build their image if it is missing)
  docker_images
  phase meson-test meson test -C build --print-errorlogs --no-rebuild "$@"
  status=$?
  python3 scripts/ci_times.py "$logs" build/meson-logs
  python3 scripts/summarize_tests.py build/meson-logs/testlog.junit.xml || exit 1
  exit $status
fi

# The suites run in two lanes side by side, each a `meson test` of its own (logs
# build/meson-logs/lane-NAME.*): the Docker lane once dockerd and the images are ready; the local
# lane at once (every test in no other lane: none is left out), then the VM lane. Within a lane,
# meson runs two tests at once unless one is marked is_parallel: false.
# The agent-sandbox and hostile Kubernetes suites, k8s-executor, k8s-fake-apiserver and the
# rootless pair need no Docker: they run in the Docker lane because the local lane is followed by
# the VM lane, and so the two sides end at about the same time.
docker_lane=(docker docker-session docker-exec-path e2e-docker hostile-docker e2e-dood hostile-dood
  e2e-dind hostile-dind hostile-kubernetes e2e-kubernetes-agent-sandbox
  hostile-kubernetes-agent-sandbox k8s-executor k8s-fake-apiserver e2e-rootless hostile-rootless)
vm_lane=(vm-systemd vm-rootless-dood vm-dind)
mapfile -t all_tests < <(meson test -C build --no-rebuild --list 2>/dev/null | sed -n 's|.* / ||p')
local_lane=()
for t in "${all_tests[@]}"; do
  [[ " ${docker_lane[*]} ${vm_lane[*]} " == *" $t "* ]] || local_lane+=("$t")
done
lane() {
  local name="$1"
  shift
  phase "$name-lane" meson test -C build --print-errorlogs --no-rebuild --logbase "lane-$name" "$@"
}

docker_side() {
  docker_images
  lane docker "${docker_lane[@]}"
}
docker_side >"$logs/docker-lane.log" 2>&1 &
docker_side_pid=$!

lane local "${local_lane[@]}"
local_status=$?
# The VM's rootless Docker test loads code-interpreter:slim; the VM image's build (started above)
# holds a lock the VM tests wait on.
while [ ! -e "$logs/images.done" ] && kill -0 "$docker_side_pid" 2>/dev/null; do sleep 5; done
lane vm "${vm_lane[@]}"
vm_status=$?
wait "$docker_side_pid"
docker_status=$?
cat "$logs/docker-lane.log"
wait "${jobs[vm-image]}" "${jobs[roots]}"  # their phases are recorded when they end

python3 scripts/ci_times.py "$logs" build/meson-logs
python3 scripts/summarize_tests.py build/meson-logs/lane-*.junit.xml
summary=$?
[ $local_status -eq 0 ] && [ $vm_status -eq 0 ] && [ $docker_status -eq 0 ] && [ $summary -eq 0 ]
