"""`code-interpreter doctor`: every section is reported and a healthy test host has no FAIL."""
import re
import subprocess
import unittest

from harness import Config

SECTIONS = ["privileges", "namespaces", "user namespace settings", "cgroups", "seccomp",
            "sandbox root filesystem", "sandbox", "docker", "kubernetes", "deployment mode"]


class DoctorTest(unittest.TestCase):
    def setUp(self):
        if not Config.bin_path:
            self.skipTest("no --bin (--url or --image mode): the doctor needs the binary")

    def doctor(self, *args):
        return subprocess.run([Config.bin_path, "doctor", *args], capture_output=True, text=True,
                              timeout=60)

    def test_every_section_and_exit_0_without_fail(self):
        r = self.doctor()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for s in SECTIONS:
            self.assertRegex(r.stdout, r"(?m)^== " + re.escape(s), s)
        # Each check line is OK/WARN/FAIL, and the summary counts them.
        self.assertNotRegex(r.stdout, r"(?m)^  FAIL ")
        self.assertRegex(r.stdout, r"(?m)^\d+ OK, \d+ WARN, 0 FAIL$")
        self.assertRegex(r.stdout, r"(?m)^  OK    sandbox start .*printed 1; \d+ ms")
        for name in ["user", "pid", "mount", "net", "ipc", "uts", "cgroup"]:
            self.assertRegex(r.stdout, r"(?m)^  (OK|WARN|FAIL) +%s namespace: " % name)
        self.assertRegex(r.stdout,
                         r"(?m)^  (OK|WARN) +deployment mode: (host|docker|dood|dind|kubernetes) ")

    def test_a_failed_check_is_exit_1_with_the_fix(self):
        # A rootfs without python3: the rootfs checks and the sandbox start FAIL, each with a fix.
        r = subprocess.run([Config.bin_path, "doctor"], capture_output=True, text=True, timeout=60,
                           env={"SANDBOX_ROOTFS": "/nonexistent-rootfs", "PATH": "/usr/bin:/bin"})
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"(?m)^  FAIL  python3 in the rootfs: ")
        self.assertIn("fix: ", r.stdout)

    def test_arguments_are_a_usage_error(self):
        self.assertEqual(self.doctor("--bogus").returncode, 2)
