"""The one-shot CLI: `code-interpreter run` and `version` (no daemon, same sandbox)."""
import os
import subprocess
import tempfile
import unittest

from harness import Config


class CliTest(unittest.TestCase):
    def setUp(self):
        if not Config.bin_path:
            self.skipTest("no --bin (--url or --image mode): the CLI needs the binary")

    def run_cli(self, *args, stdin=None):
        return subprocess.run([Config.bin_path, *args], input=stdin, capture_output=True,
                              text=True, timeout=60)

    def test_version(self):
        r = self.run_cli("version")
        self.assertEqual(r.returncode, 0, r)
        self.assertRegex(r.stdout, r"^code-interpreter \d+\.\d+\.\d+\n$")

    def test_run_code_prints_output_and_last_expression(self):
        r = self.run_cli("run", "-c", "import os\nprint(os.getuid())\n6 * 7")
        self.assertEqual((r.returncode, r.stdout), (0, "65532\n42\n"), r)

    def test_run_file_with_stdin(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("print(input().upper())\n")
        try:
            r = self.run_cli("run", f.name, stdin="hello\n")
        finally:
            os.unlink(f.name)
        self.assertEqual((r.returncode, r.stdout), (0, "HELLO\n"), r)

    def test_exit_code_and_stderr_pass_through(self):
        r = self.run_cli("run", "-c", "import sys\nprint('oops', file=sys.stderr)\nsys.exit(7)")
        self.assertEqual(r.returncode, 7, r)
        self.assertEqual(r.stderr, "oops\n")

    def test_uncaught_exception_is_exit_1(self):
        r = self.run_cli("run", "-c", "1/0")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("ZeroDivisionError", r.stderr)

    def test_timeout_is_124(self):
        r = self.run_cli("run", "--language", "bash", "--timeout-ms", "300", "-c", "sleep 30")
        self.assertEqual(r.returncode, 124, r)
        self.assertIn("timed out", r.stderr)

    def test_usage_errors_are_exit_2(self):
        self.assertEqual(self.run_cli("run").returncode, 2)
        self.assertEqual(self.run_cli("run", "--language", "cobol", "-c", "x").returncode, 2)
        self.assertEqual(self.run_cli("frobnicate").returncode, 2)
