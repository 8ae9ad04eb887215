"""Docker-in-Docker (docs/deployment.md "Docker-in-Docker"): the default image, started by that
section's command, runs its own dockerd, hardened as policies/ say, and supervises it. Runs with
--readme-command "Docker-in-Docker" (meson: e2e-dind), where every daemon is such a container.

What /health says of the nested dockerd is compared with what its process really has, read
from the container's /proc; a crashed dockerd is restarted and executions go on; SIGTERM stops
dockerd cleanly after the daemon's own containers."""

import json
import os
import re
import subprocess

from harness import Config, E2ETestCase, wait_until

POLICIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "policies")
NESTED_SOCKET = "/run/code-interpreter/dockerd/docker.sock"


def dropped_capabilities():
    with open(os.path.join(POLICIES, "dockerd-capabilities.json")) as f:
        return [c["name"] for c in json.load(f)["drop"]]


def capability_numbers():
    """CAP_* name -> number, from the kernel headers' order as /usr/include/linux/capability.h
    defines it."""
    with open("/usr/include/linux/capability.h") as f:
        return {m.group(1): int(m.group(2))
                for m in re.finditer(r"^#define (CAP_[A-Z_]+)\s+(\d+)$", f.read(), re.M)}


class DindCase(E2ETestCase):
    def setUp(self):
        super().setUp()
        if not Config.image:
            self.skipTest("needs the default image as the daemon (--readme-command "
                          "\"Docker-in-Docker\")")

    def in_container(self, *argv):
        r = subprocess.run(["docker", "exec", self.daemon.cid, *argv],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"{argv}: {r.stderr}")
        return r.stdout

    def nested(self):
        h = self.client.get("/health").json
        self.assertEqual(h["deployment"]["mode"], "dind", h["deployment"])
        return h["deployment"]["nested_dockerd"]


class DindTest(DindCase):
    def test_health_names_the_mode_and_the_nested_dockerds_hardening(self):
        n = self.nested()
        self.assertGreater(n["pid"], 0, n)
        self.assertEqual(n["seccomp_mode"], 2, n)  # a filter
        self.assertEqual(n["dropped_capabilities"], dropped_capabilities())
        numbers = capability_numbers()
        bounding, effective = int(n["cap_bounding"], 16), int(n["cap_effective"], 16)
        for name in n["dropped_capabilities"]:
            self.assertFalse((bounding >> numbers[name]) & 1, f"{name} in the bounding set")
            self.assertFalse((effective >> numbers[name]) & 1, f"{name} in the effective set")
        for name in ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SETUID", "CAP_MKNOD"):
            self.assertTrue((effective >> numbers[name]) & 1, f"dockerd needs {name}")

    def test_the_nested_dockerds_process_has_what_health_says(self):
        n = self.nested()
        status = self.in_container("cat", f"/proc/{n['pid']}/status")
        field = lambda k: re.search(rf"^{k}:\s*(\S+)$", status, re.M).group(1)  # noqa: E731
        self.assertEqual(field("Seccomp"), "2")
        self.assertEqual(field("Seccomp_filters"), "1")  # ours alone (the image's PID 1 has none)
        self.assertEqual(field("NoNewPrivs"), "0")  # runc must still change AppArmor profiles
        self.assertEqual(int(field("CapBnd"), 16), int(n["cap_bounding"], 16))
        self.assertEqual(int(field("CapEff"), 16), int(n["cap_effective"], 16))
        cmdline = self.in_container("cat", f"/proc/{n['pid']}/cmdline").split("\0")
        self.assertEqual(cmdline[1:3], ["--config-file", "/run/code-interpreter/dockerd/daemon.json"])
        config = json.loads(self.in_container("cat", "/run/code-interpreter/dockerd/daemon.json"))
        self.assertTrue(config["no-new-privileges"])
        self.assertEqual(config["bridge"], "none")
        self.assertFalse(config["iptables"])
        self.assertFalse(config["userland-proxy"])
        self.assertEqual(config["hosts"], ["unix://" + NESTED_SOCKET])
        profile = json.loads(self.in_container("cat", config["seccomp-profile"]))
        with open(os.path.join(POLICIES, "seccomp-executor.json")) as f:
            self.assertEqual(profile, json.load(f))
        # The socket is the daemon's alone.
        self.assertEqual(self.in_container("stat", "-c", "%a", os.path.dirname(NESTED_SOCKET))
                         .strip(), "700")

    def test_without_userns_remap_the_downgrade_is_named(self):
        d = self.client.get("/health").json["deployment"]
        self.assertFalse(d["engine"]["userns_remap"], d)
        self.assertIn("user-namespace remapping of the nested dockerd's containers",
                      [x["measure"] for x in d["downgrades"]], d)

    def test_executors_are_containers_of_the_nested_dockerd(self):
        sid = self.client.post_json("/v1/sessions", {}).json["session_id"]
        try:
            ours = self.in_container("docker", "-H", "unix://" + NESTED_SOCKET, "ps", "-q",
                                     "--filter", "label=app=code-interpreter").split()
            self.assertTrue(ours, "no executor container in the nested dockerd")
            host = subprocess.run(["docker", "ps", "-q", "--no-trunc"], capture_output=True,
                                  text=True, timeout=30).stdout
            for cid in ours:
                self.assertNotIn(cid, host)
        finally:
            self.client.delete(f"/v1/sessions/{sid}")


class DindRestartTest(DindCase):
    daemon_env = {"WARM_POOL_SIZE": "1"}  # a daemon of its own: its dockerd is killed

    def test_a_crashed_nested_dockerd_is_restarted_and_executions_go_on(self):
        before = self.nested()
        self.in_container("sh", "-c", f"kill -9 {before['pid']}")
        self.assertTrue(before["answering"], before)
        # /health says so at once (its cached backend check may predate the crash) ...
        self.assertTrue(wait_until(lambda: not self.nested()["answering"], 10), self.nested())
        self.assertEqual(self.client.get("/health").json["status"], "error")
        # ... until the restarted dockerd answers.
        self.assertTrue(wait_until(lambda: self.nested()["restarts"] == 1 and
                                   self.nested()["answering"], 60), self.nested())
        self.assertNotEqual(self.nested()["pid"], before["pid"])
        self.assertEqual(self.client.get("/health").json["status"], "ok")
        after = self.nested()
        self.assertIn("killed by signal", after["last_exit"])
        self.assertEqual(after["seccomp_mode"], 2)  # the restart is hardened as the start
        self.assertEqual(after["cap_bounding"], before["cap_bounding"])
        # The pooled container died with the old dockerd: the run takes another.
        r = self.client.post_json("/v1/execute", {"code": "print(6 * 7)"}, timeout=120)
        self.assertEqual((r.status, r.json and r.json.get("stdout")), (200, "42\n"), r)


class DindShutdownTest(DindCase):
    daemon_env = {"SHUTDOWN_GRACE_SEC": "5"}  # a daemon of its own: it is stopped here

    def test_sigterm_stops_the_nested_dockerd_after_the_daemon(self):
        self.nested()
        rc, _ = Config.pool.stop(self.daemon_env)
        log = self.daemon.log_since(0)
        self.assertEqual(rc, 0, log[-3000:])
        self.assertRegex(log, r"nested dockerd \(pid \d+\) exited with status 0")
        self.assertLess(log.index("stopping the nested dockerd"), log.index("shutdown complete"))


class DindUsernsRemapTest(DindCase):
    daemon_env = {"DIND_USERNS_REMAP": "true"}

    def test_executors_run_in_a_user_namespace_of_the_nested_dockerd(self):
        d = self.client.get("/health").json["deployment"]
        self.assertTrue(d["engine"]["userns_remap"], d)
        self.assertNotIn("user-namespace remapping of the nested dockerd's containers",
                         [x["measure"] for x in d["downgrades"]], d)
        r = self.client.post_json("/v1/execute",
                                  {"code": "print(open('/proc/self/uid_map').read())"})
        inside, outside, count = r.json["stdout"].split()[:3]
        # uid 0 of the container is an unprivileged id of the DinD container's namespace.
        self.assertEqual((inside, count), ("0", "65536"), r.json)
        self.assertNotEqual(outside, "0", r.json)
