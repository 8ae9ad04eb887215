#!/usr/bin/python3
"""Docker-in-Docker on a pure cgroup v2 kernel: the test VM (vm.py).

  test_dind.py --source DIR --build DIR [-k PATTERN]

docs/deployment.md's section "Docker-in-Docker" with cheap parts, since the default image (1.9
GB, with the executor root) takes over 10 minutes to load under emulation: the VM's system dockerd
(no bridge, no iptables: nothing here needs them) runs the section's `docker run -d` flags
(`--privileged`, so a cgroup namespace of its own on v2, `--network host`, the data root
volume) on an image with the default image's configuration and an empty root
(tests/vm/dind-parts.sh), with the VM's /usr pieces (dockerd, containerd, runc, the daemon's
libraries) and the build's binary (the worktree shared over 9p) bind-mounted read-only, and a
32 MB executor root (small_executor_root.py --no-python) at the default image's executor-image.tar path.

Through an ssh tunnel to the daemon's 127.0.0.1:8000: /health says dind with the nested dockerd
answering on cgroup v2 and no limit downgraded; from the VM's side, the daemon moved its
processes into `init/` of its container's cgroup and enabled memory and pids for the children,
a running sandbox's cgroup is below the container's with the memory and pids limits, the nested
dockerd has the seccomp filter and the reduced bounding set; memory and fork bombs get their
verdicts. Then the same flags plus --cgroupns=host: the daemon nests in its container's own
cgroup just the same (dockerd's default parent would be the top of the VM's hierarchy). Output
is unittest's; the last line is "N passed, N failed".
"""

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from daemon_http import (Tunnel, check_cgroup_limits, check_limits_enforced,  # noqa: E402
                         docker_env_flags, running_sandbox)
from vm import RECIPE_DIR, Recipe, Vm, run_tests  # noqa: E402

OPTS = None
VM = None
DAEMON = None  # the Tunnel to the daemon
CID = None  # the DinD container's id in the VM's dockerd
TITLE = "Docker-in-Docker"
README_IMAGE = "code-interpreter:latest"
IMAGE = "code-interpreter:vm-dind"  # dind-parts.sh's stand-in for README_IMAGE
PARTS = "/var/tmp/dind"
NESTED_CONFIG = "/run/code-interpreter/dockerd/daemon.json"
TIMEOUT_MS = 60000  # a container start alone is seconds under emulation
# What dind-parts.sh's IMAGE leaves empty, from the VM: read-only, as in the default image.
VM_MOUNTS = ["/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64"]


def binary():
    return os.path.join(OPTS.build, "code-interpreter")


def readme_run_flags():
    """The section's `docker run -d` flags, parsed as the e2e harness parses them."""
    sys.path.insert(0, os.path.join(OPTS.source, "tests", "e2e"))
    from run import readme_command
    image, flags = readme_command(TITLE)
    assert image == README_IMAGE, image
    return flags


def timed(what, command, **kw):
    start = time.monotonic()
    r = VM.ssh(command, **kw)
    print(f"# {what}: {time.monotonic() - start:.1f} s", file=sys.stderr)
    return r


def parts_recipe():
    """What does not depend on the build (its binary is bind-mounted at `docker run`), kept in a
    saved state derived from the VM's booted one (vm.Recipe, made again when a step's text,
    dind-parts.sh or small_executor_root.py changes): the system dockerd without a bridge or
    rules (its start is a minute less under emulation) started while the parts are made, the
    image imported into it once it answers."""
    return Recipe("dind", [
        ("the VM's dockerd started and the parts made", "root",
         "mkdir -p /etc/docker && echo '{\"bridge\": \"none\", \"iptables\": false}' "
         ">/etc/docker/daemon.json && { systemctl start docker & "
         f"{RECIPE_DIR}/dind-parts.sh {PARTS} {IMAGE} && wait $!; }}"),
    ], files=[os.path.join(HERE, "dind-parts.sh"), os.path.join(HERE, "small_executor_root.py")])


def setUpModule():
    global VM, DAEMON, CID
    shares = {"source": OPTS.source}
    if not os.path.realpath(OPTS.build).startswith(os.path.realpath(OPTS.source) + os.sep):
        shares["build"] = OPTS.build
    VM = Vm(shares=shares, recipe=parts_recipe()).boot()
    print(f"# VM up in {VM.boot_seconds:.1f} s ({'restored' if VM.restored else 'cold'})",
          file=sys.stderr)
    VM.mount_shares()
    # The VM's dockerd from the saved state, its clock set forward: it answers, with the image.
    timed("VM dockerd answering with the stand-in image",
          f"docker image inspect {IMAGE} >/dev/null")
    CID = start_dind("dind", readme_run_flags())
    DAEMON = Tunnel(VM)
    start = time.monotonic()
    DAEMON.wait_ready(timeout=600)
    print(f"# daemon healthy after {time.monotonic() - start:.1f} s", file=sys.stderr)


def start_dind(name, flags):
    """`docker run -d` of the stand-in image with `flags`, the VM's daemon settings and the VM's
    parts mounted; its id."""
    mounts = [f"-v {p}:{p}:ro" for p in VM_MOUNTS]
    mounts += [f"-v {shlex.quote(binary())}:/usr/local/bin/code-interpreter:ro",
               f"-v {PARTS}/share:/usr/share/code-interpreter:ro"]
    return timed(f"DinD container {name} started",
                 f"docker run -d --name {name} {flags} {docker_env_flags()} {' '.join(mounts)} "
                 f"{IMAGE}",
                 timeout=300).stdout.strip()


def tearDownModule():
    if VM and os.environ.get("KEEP_LOGS") != "0":
        r = VM.ssh("docker logs $(docker ps -lq) 2>&1 | tail -60", check=False)
        print("# daemon log (tail):\n" + r.stdout, file=sys.stderr)
    if DAEMON:
        DAEMON.close()
    if VM:
        VM.shutdown()


def vm_read(path):
    return VM.ssh(f"cat {path}").stdout


def container_cgroup(cid):
    """A DinD container's cgroup in the VM (systemd's driver: a scope per container)."""
    return f"/system.slice/docker-{cid}.scope"


def check_daemon_in_init(test, cid):
    """The daemon moved its processes into init/ of its container's cgroup, which is left with
    none (the rule that lets it have controllers for its children) and gives them memory and
    pids."""
    pid = VM.ssh(f"docker inspect -f '{{{{.State.Pid}}}}' {cid}").stdout.strip()
    test.assertEqual(vm_read(f"/proc/{pid}/cgroup").strip(), f"0::{container_cgroup(cid)}/init")
    root = "/sys/fs/cgroup" + container_cgroup(cid)
    test.assertEqual(vm_read(f"{root}/cgroup.procs"), "")
    enabled = vm_read(f"{root}/cgroup.subtree_control").split()
    for controller in ("memory", "pids"):
        test.assertIn(controller, enabled)


def check_sandbox_below(test, cid):
    """A running sandbox's cgroup, found from the VM by its process, is below the container's
    with the daemon's limits."""
    with running_sandbox(VM, execute) as cgroup:
        test.assertTrue(cgroup.startswith(f"0::{container_cgroup(cid)}/docker/"), cgroup)
        check_cgroup_limits(test, VM, cgroup)


def capability_numbers():
    """CAP_* name -> number, as /usr/include/linux/capability.h defines them."""
    with open("/usr/include/linux/capability.h") as f:
        return {m.group(1): int(m.group(2))
                for m in re.finditer(r"^#define (CAP_[A-Z_]+)\s+(\d+)$", f.read(), re.M)}


def dropped_capabilities():
    with open(os.path.join(OPTS.source, "policies", "dockerd-capabilities.json")) as f:
        return [c["name"] for c in json.load(f)["drop"]]


def execute(code, test=None):
    res = DAEMON.json("/v1/execute", {"code": code, "language": "bash", "timeout_ms": TIMEOUT_MS})
    if test:
        test.assertIn("verdict", res, res)  # an error's body says why
    return res


class DindCgroupV2Test(unittest.TestCase):
    def test_health_is_dind_on_cgroup_v2_with_no_limit_downgraded(self):
        health = DAEMON.json("/health")
        deployment = health["deployment"]
        self.assertEqual(deployment["mode"], "dind", deployment)
        self.assertTrue(deployment["nested_dockerd"]["answering"], deployment)
        self.assertEqual(deployment["engine"]["cgroup_version"], "2", deployment)
        # The data root is the documented volume (ext4 in the VM), so overlay2 works.
        print(f"# nested dockerd storage: {deployment['nested_dockerd']['storage_driver']}",
              file=sys.stderr)
        self.assertEqual(deployment["nested_dockerd"]["storage_driver"], "overlay2")
        measures = [d["measure"] for d in deployment["downgrades"]]
        self.assertNotIn("cgroup limits of executors in the nested dockerd", measures, deployment)
        check_limits_enforced(self, health)

    def test_the_daemon_moved_itself_to_init_and_enabled_the_controllers(self):
        check_daemon_in_init(self, CID)

    def test_a_sandbox_is_below_the_dind_container_with_the_limits(self):
        check_sandbox_below(self, CID)

    def test_print(self):
        res = execute("echo hello from the nested dockerd", self)
        self.assertEqual((res["verdict"], res["stdout"]),
                         ("ok", "hello from the nested dockerd\n"), res)

    def test_memory_bomb_is_memory_limit(self):
        # One read into a 1 GiB buffer: the fastest way to touch the memory from bash.
        res = execute("dd if=/dev/zero of=/dev/null bs=1G count=1", self)
        print(f"# memory bomb: {res.get('usage')}", file=sys.stderr)
        self.assertEqual(res["verdict"], "memory_limit", res)

    def test_fork_bomb_is_pids_limit(self):
        # Forks until the pids limit refuses one; bash retries for 15 s, then fails. (A bomb
        # whose first shell returns, `b() { b | b & }; b`, ends as "ok": its run is over and
        # the wrapper kills the rest.)
        res = execute("while :; do sleep 30 & done", self)
        self.assertEqual(res["verdict"], "pids_limit", res)

    def test_the_nested_dockerd_has_the_seccomp_filter_and_the_reduced_bounding_set(self):
        nested = DAEMON.json("/health")["deployment"]["nested_dockerd"]
        pid = VM.ssh(f"pgrep -f -x '/usr/s?bin/dockerd --config-file {NESTED_CONFIG}'"
                     ).stdout.split()
        self.assertEqual(len(pid), 1, pid)
        status = vm_read(f"/proc/{pid[0]}/status")
        field = lambda k: re.search(rf"^{k}:\s*(.+)$", status, re.M).group(1)  # noqa: E731
        # The same process /health names (its pid in the container's namespace, NSpid's last).
        self.assertEqual(int(field("NSpid").split()[-1]), nested["pid"])
        self.assertEqual(field("Seccomp"), "2")
        bounding = int(field("CapBnd"), 16)
        self.assertEqual(bounding, int(nested["cap_bounding"], 16))
        numbers = capability_numbers()
        for name in dropped_capabilities():
            self.assertFalse((bounding >> numbers[name]) & 1, f"{name} in the bounding set")
        for name in ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SETUID", "CAP_MKNOD"):
            self.assertTrue((bounding >> numbers[name]) & 1, f"dockerd needs {name}")


class DindHostCgroupnsTest(unittest.TestCase):
    """After DindCgroupV2Test (unittest runs the classes by name): the same flags plus
    --cgroupns=host, in place of the first container (the same port and volume). dockerd's
    default cgroup parent would then be the top of the VM's hierarchy; the daemon nests in its
    container's own cgroup instead."""

    @classmethod
    def setUpClass(cls):
        log = VM.ssh("docker logs dind 2>&1 | grep -v ' dockerd: ' | tail -40", check=False)
        print("# the first daemon's log (tail, without dockerd's):\n" + log.stdout, file=sys.stderr)
        VM.ssh("docker rm -f dind >/dev/null")
        cls.cid = start_dind("dind-host-cgroupns", readme_run_flags() + " --cgroupns=host")
        cls.health = DAEMON.wait_ready(timeout=600)

    def test_health_is_dind_with_no_cgroup_downgrade(self):
        deployment = self.health["deployment"]
        self.assertEqual(deployment["mode"], "dind", deployment)
        self.assertNotIn("cgroup limits of executors in the nested dockerd",
                         [d["measure"] for d in deployment["downgrades"]], deployment)

    def test_the_daemon_moved_itself_to_init_of_its_containers_cgroup(self):
        check_daemon_in_init(self, self.cid)

    def test_a_sandbox_is_below_the_dind_container_not_at_the_top(self):
        check_sandbox_below(self, self.cid)
        self.assertFalse(VM.ssh("test -e /sys/fs/cgroup/docker", check=False).returncode == 0,
                         "the nested dockerd made cgroups at the top of the VM's hierarchy")


def main():
    global OPTS
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("-k", action="append", default=[], help="only tests matching")
    OPTS = ap.parse_args()
    OPTS.source = os.path.abspath(OPTS.source)
    OPTS.build = os.path.abspath(OPTS.build)
    missing = [t for t in ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "mke2fs", "ssh")
               if not shutil.which(t)]
    if not os.access(binary(), os.X_OK):
        missing.append(f"the daemon's binary at {binary()}")
    if not os.path.exists("/usr/include/linux/capability.h"):
        missing.append("/usr/include/linux/capability.h (linux-libc-dev)")
    return run_tests(missing, OPTS.k)


if __name__ == "__main__":
    sys.exit(main())
