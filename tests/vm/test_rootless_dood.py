#!/usr/bin/python3
"""Docker-out-of-Docker with a rootless socket, on cgroup v2: the test VM (vm.py).

  test_rootless_dood.py --source DIR [-k PATTERN]

As the VM's test user, exactly as docs/deployment.md's section "Docker-out-of-Docker with a
rootless socket" says: its setup line starts the rootless dockerd (rootlesskit, slirp4netns, the
user's systemd unit) and an executor image is imported into it (small_executor_root.py's root,
made in the VM from its own Python and shell, since the full image's import alone takes ~10
minutes under emulation; the full image's contents are tested on the host's dockerd). Neither
depends on the build, so both are done once and kept in a saved state derived from the VM's
booted one (engine_recipe, vm.Recipe: made again from the booted state, the setup line run again,
whenever the line's text, the recipe or small_executor_root.py changes). Each run restores it,
checks the user's Engine answers with the executor image, loads the build's image (`docker save
code-interpreter:slim` from the host) and runs it with the section's `docker run -d` flags
(parsed by tests/e2e/run.py's readme_command). Through an ssh tunnel to the published
127.0.0.1:8000: /health says dood on a rootless cgroup v2 Engine with no limit downgraded,
memory and fork bombs get their verdicts, the executor container's cgroup is the user's with the
limits set, and a small named e2e subset passes. Output is unittest's; the last line is
"N passed, N failed".
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from daemon_http import (Tunnel, check_cgroup_limits, check_limits_enforced,  # noqa: E402
                         docker_env_flags, running_sandbox)
from vm import RECIPE_DIR, TEST_USER, Recipe, Vm, run_tests  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
from harness import Client  # noqa: E402

OPTS = None
VM = None
TUNNEL = None  # to the daemon's published port
WORK = None
TITLE = "Docker-out-of-Docker with a rootless socket"
SLIM_IMAGE = "code-interpreter:slim"
EXECUTOR_IMAGE = "code-interpreter-executor:latest"  # the daemon's default EXECUTOR_IMAGE
# Every command as the user runs with the rootless socket, as the section exports it.
AS_USER = "export DOCKER_HOST=unix://$XDG_RUNTIME_DIR/docker.sock; "
# docker.service is Type=simple: started is not yet answering on the socket.
WAIT_ENGINE = (AS_USER + "for i in $(seq 180); do docker info >/dev/null 2>&1 && exit 0; "
               "sleep 1; done; systemctl --user status docker; "
               "journalctl --user -u docker -n 40; exit 1")
# The e2e subset: each sandbox start is seconds under emulation, so a few named tests: the files
# API and a session's state. Left out: tests that run on the default 2 s timeout, too short for a
# Python start in a container under emulation (the tests below cover output, stderr, the exit
# code and files in and out with a long timeout), and timings of the machine.
E2E_TESTS = [
    "test_api.HealthTest.test_health",
    "test_files.FilesApiTest.test_upload_list_download_delete",
    "test_sessions.SessionPythonTest.test_state_survives_between_calls",
]


def readme_lines():
    """The lines of the fenced block of docs/deployment.md's section TITLE, continuations
    joined."""
    with open(os.path.join(OPTS.source, "docs/deployment.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## " + TITLE + "\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def readme_run_flags():
    """The section's `docker run -d` flags, parsed as the e2e harness parses them."""
    sys.path.insert(0, os.path.join(OPTS.source, "tests", "e2e"))
    from run import readme_command
    image, flags = readme_command(TITLE)
    assert image == SLIM_IMAGE, image
    return flags


def prepare_share():
    """A directory for the VM with the slim image saved from the host's dockerd: readable by the
    test user (the 9p share keeps the host's modes)."""
    work = tempfile.mkdtemp(prefix="ci-rootless-", dir="/var/tmp")
    os.chmod(work, 0o755)
    start = time.monotonic()
    subprocess.run(["docker", "save", "-o", f"{work}/slim.tar", SLIM_IMAGE], check=True)
    os.chmod(f"{work}/slim.tar", 0o644)
    print(f"# host images saved in {time.monotonic() - start:.1f} s", file=sys.stderr)
    return work


def engine_recipe():
    """What does not depend on the build, kept in a saved state derived from the VM's booted one
    (vm.Recipe, made again when a step's text or small_executor_root.py changes): the section's
    setup line run as the test user (its text is part of the state's key), the user's Engine
    answering, the executor image made and imported into it."""
    lines = readme_lines()
    # The section's first line: the setup tool writes and starts the user's docker.service.
    assert lines[0].startswith("PATH=/usr/share/docker.io/contrib"), lines[0]
    tar = "/var/tmp/executor-root.tar"
    changes = (f"args=(); while IFS= read -r l; do args+=(--change \"$l\"); done "
               f"<{tar}.changes; ")
    return Recipe("rootless-dood", [
        ("the section's setup line: the rootless dockerd set up", TEST_USER, lines[0]),
        ("the rootless dockerd answering", TEST_USER, WAIT_ENGINE),
        ("the executor root made", "root",
         f"python3 {RECIPE_DIR}/small_executor_root.py {tar} && chmod 644 {tar} {tar}.changes"),
        ("the executor image imported", TEST_USER, AS_USER + changes +
         f"docker import \"${{args[@]}}\" {tar} {EXECUTOR_IMAGE} >/dev/null"),
        ("the executor root removed", "root", f"rm {tar} {tar}.changes"),
    ], files=[os.path.join(HERE, "small_executor_root.py")])


def timed(what, command, **kw):
    start = time.monotonic()
    r = VM.ssh(command, user=TEST_USER, **kw)
    print(f"# {what}: {time.monotonic() - start:.1f} s", file=sys.stderr)
    return r


def setUpModule():
    global VM, TUNNEL, WORK
    WORK = prepare_share()
    VM = Vm(shares={"images": WORK}, recipe=engine_recipe()).boot()
    print(f"# VM up in {VM.boot_seconds:.1f} s ({'restored' if VM.restored else 'cold'})",
          file=sys.stderr)
    VM.mount_shares()
    # The user's Engine from the saved state, its clock set forward and its sockets as they were:
    # it answers, with the executor image the recipe imported.
    timed("rootless dockerd answering", WAIT_ENGINE, timeout=300)
    timed("executor image there", AS_USER + f"docker image inspect {EXECUTOR_IMAGE} >/dev/null")
    # The build's slim image into the user's Engine.
    timed(f"{SLIM_IMAGE} loaded", AS_USER + f"docker load -q -i {WORK}/slim.tar", timeout=900)
    # The section's docker run, with a name for the test to find it by and the VM's settings.
    flags = f"{readme_run_flags()} {docker_env_flags()}"
    timed("daemon container started",
          AS_USER + f"docker run -d --name rootless-dood {flags} {SLIM_IMAGE}", timeout=300)
    # The port is published on the VM's loopback (the section): reach it through ssh, not qemu's
    # NIC.
    TUNNEL = Tunnel(VM, 8000)
    start = time.monotonic()
    TUNNEL.wait_ready()
    print(f"# daemon healthy after {time.monotonic() - start:.1f} s", file=sys.stderr)


def tearDownModule():
    if VM and os.environ.get("KEEP_LOGS") != "0":
        r = VM.ssh(AS_USER + "docker logs rootless-dood 2>&1 | tail -40", user=TEST_USER,
                   check=False)
        print("# daemon log (tail):\n" + r.stdout, file=sys.stderr)
    if TUNNEL:
        TUNNEL.close()
    if VM:
        VM.shutdown()
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)


class RootlessDoodTest(unittest.TestCase):
    def test_health_is_dood_on_a_rootless_cgroup_v2_engine(self):
        health = TUNNEL.json("/health")
        deployment = health["deployment"]
        self.assertEqual(deployment["mode"], "dood", deployment)
        self.assertIs(deployment["engine"]["rootless"], True, deployment)
        self.assertEqual(deployment["engine"]["cgroup_version"], "2", deployment)
        self.assertNotIn("rootless Docker Engine",
                         [d["measure"] for d in deployment["downgrades"]])
        # Delegation works: the Engine applies the limits, so none is a downgrade.
        check_limits_enforced(self, health)

    def test_daemon_and_engine_are_not_root_on_the_host(self):
        # The Engine is the user's (rootlesskit's child), and so is the daemon's container.
        owner = VM.ssh("ps -o user= -C dockerd").stdout.split()
        self.assertEqual(set(owner), {TEST_USER})
        pid = VM.ssh(AS_USER + "docker inspect -f '{{.State.Pid}}' rootless-dood",
                     user=TEST_USER).stdout.strip()
        uid = VM.ssh(f"awk '/^Uid:/ {{print $2}}' /proc/{pid}/status").stdout.strip()
        self.assertGreaterEqual(int(uid), 100000, "not a subordinate uid of the user")

    def test_print(self):
        # Every run gets a long timeout: a container start alone is seconds under emulation.
        res = TUNNEL.json("/v1/execute", {"code": "print(1)", "timeout_ms": 60000})
        self.assertEqual((res["verdict"], res["stdout"], res["exit_code"]), ("ok", "1\n", 0), res)

    def test_stderr_and_exit_code(self):
        code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"
        res = TUNNEL.json("/v1/execute", {"code": code, "timeout_ms": 60000})
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"], res["verdict"]),
                         ("out\n", "err\n", 3, "error"), res)

    def test_files_in_and_out(self):
        # A staged input is read; new files in subfolders come back; the input stays as it was.
        client = Client("127.0.0.1", TUNNEL.port)
        up = client.upload("data.csv", b"a,b\n1,2\n")
        self.assertEqual(up.status, 201, up)
        code = ("import os\nprint(open('data.csv').read(), end='')\nos.makedirs('out/deep')\n"
                "n = open('out/deep/r.txt', 'w').write('x')")
        r = client.post_json("/v1/execute", {
            "code": code, "timeout_ms": 60000,
            "files": [{"path": "data.csv", "file_id": up.json["file_id"]}]}, timeout=180)
        self.assertEqual((r.status, r.json["stdout"], r.json["exit_code"]), (200, "a,b\n1,2\n", 0),
                         r)
        self.assertEqual([f["path"] for f in r.json["files"]], ["out/deep/r.txt"], r)
        self.assertEqual(client.get(f"/v1/files/{r.json['files'][0]['file_id']}").body, b"x")

    def test_memory_bomb_is_memory_limit(self):
        res = TUNNEL.json("/v1/execute",
                        {"code": "x = bytearray(1 << 30)\nprint(len(x))", "timeout_ms": 60000})
        self.assertEqual(res["verdict"], "memory_limit", res)
        self.assertEqual(res["stdout"], "")

    def test_fork_bomb_is_pids_limit(self):
        res = TUNNEL.json("/v1/execute",
                        {"code": "import os\nwhile True:\n    os.fork()", "timeout_ms": 60000})
        self.assertEqual(res["verdict"], "pids_limit", res)

    def test_executor_cgroup_is_the_users_with_the_limits(self):
        start = lambda code: TUNNEL.json("/v1/execute", {"code": code, "language": "bash",
                                                         "timeout_ms": 60000})
        with running_sandbox(VM, start) as cgroup:
            uid = VM.ssh(f"id -u {TEST_USER}").stdout.strip()
            subtree = f"0::/user.slice/user-{uid}.slice/user@{uid}.service/"
            self.assertTrue(cgroup.startswith(subtree), cgroup)
            self.assertIn("docker-", cgroup)
            check_cgroup_limits(self, VM, cgroup)

    def test_e2e_subset(self):
        run_py = os.path.join(OPTS.source, "tests/e2e/run.py")
        args = [sys.executable, run_py, "--url", f"http://127.0.0.1:{TUNNEL.port}"]
        for test_id in E2E_TESTS:
            args += ["-k", test_id]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=1200)
        print("\n".join(r.stdout.splitlines()[-2:]), file=sys.stderr)
        self.assertEqual(r.returncode, 0, r.stdout[-6000:])
        self.assertNotIn(" 0 passed", r.stdout.splitlines()[-1])


def main():
    global OPTS
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("-k", action="append", default=[], help="only tests matching")
    OPTS = ap.parse_args()
    OPTS.source = os.path.abspath(OPTS.source)
    missing = [t for t in ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "mke2fs", "ssh",
                           "docker") if not shutil.which(t)]
    if not missing and subprocess.run(["docker", "image", "inspect", SLIM_IMAGE],
                                      stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL).returncode != 0:
        missing.append(f"{SLIM_IMAGE} on the host's dockerd (packaging/image/build.sh slim)")
    return run_tests(missing, OPTS.k)


if __name__ == "__main__":
    sys.exit(main())
