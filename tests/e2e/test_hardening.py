"""Downgrades and STRICT_HARDENING: what the daemon says it enforces, and refusing to start when a
measure cannot be enforced."""
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import unittest
import urllib.request

from harness import Config


class StrictHardeningTest(unittest.TestCase):
    def setUp(self):
        if not Config.bin_path:
            self.skipTest("no --bin (--url or --image mode): starts its own daemons")
        self.dir = tempfile.mkdtemp(prefix="ci-hardening-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def start(self, env, as_user=None):
        full = dict(os.environ, HOST="127.0.0.1", PORT="0", EXECUTOR_BACKEND="local",
                    FILE_STORAGE_DIR=os.path.join(self.dir, "files"), **env)
        argv = [Config.bin_path, "serve"]
        if as_user:
            pw = pwd.getpwnam(as_user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            argv = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
                    *argv]
        return subprocess.Popen(argv, env=full, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    def expect_refusal(self, proc, *needles):
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.fail("the daemon started although a measure is downgraded")
        self.assertEqual(proc.returncode, 2, err)
        for n in ("STRICT_HARDENING", *needles):
            self.assertIn(n, err)

    def test_log_only_seccomp_is_a_downgrade_strict_refuses(self):
        proc = self.start({"STRICT_HARDENING": "true", "SECCOMP_LOG_DENIED": "true"})
        self.expect_refusal(proc, "seccomp (default profile)", "SECCOMP_LOG_DENIED")

    def test_rootless_without_cgroups_strict_refuses(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to start the daemon as another user")
        proc = self.start({"STRICT_HARDENING": "true", "CPU_QUOTA_PERCENT": "50"},
                          as_user="nobody")
        self.expect_refusal(proc, "memory limit (cgroup)", "CPU cap 50% (cgroup)", "Fix:")

    def test_root_strict_starts_and_reports_everything_enforced(self):
        proc = self.start({"STRICT_HARDENING": "true", "CPU_QUOTA_PERCENT": "30"})
        try:
            port = None
            for line in proc.stderr:
                m = re.search(r"listening on (\S+):(\d+)", line)
                if m:
                    port = int(m.group(2))
                    break
            self.assertIsNotNone(port, "the daemon did not start")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
                health = json.load(r)
            self.assertEqual(health["hardening"]["downgrades"], [], health)
            enforced = health["hardening"]["enforced"]
            # Each measure once, as the local backend derives it from the sandbox's plan (what
            # each line means inside a sandbox: tests/runtime/enforcement_test.cc).
            self.assertEqual(len(enforced), len(set(enforced)), enforced)
            self.assertEqual([e for e in enforced if e.startswith("seccomp")],
                             ["seccomp (default profile)"])
            self.assertTrue(any(re.fullmatch(r"CPU cap 30% \(cgroup v[12]\)", e)
                                for e in enforced), enforced)
            self.assertTrue(any(re.fullmatch(r"memory limit \d+ MiB \(cgroup v[12]\)", e)
                                for e in enforced), enforced)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0)
