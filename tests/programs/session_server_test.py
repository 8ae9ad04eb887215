#!/usr/bin/env python3
"""The session's interpreter (src/daemon/sessions/session_server.py) on its local channel, outside
any sandbox: the real program, run by python3 with a socket as fd 3 as init gives it, and each
call sent as init sends it ([u32 length][request JSON] with the call's stdin, stdout and stderr
attached). Only its workspace, /workspace in a sandbox, is a temporary directory here. What the
sandbox adds (limits, the kill at the grace) is tested by the runtime and e2e suites."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "daemon")
SERVER = os.path.join(SRC, "sessions", "session_server.py")
RICH = os.path.join(SRC, "service", "rich_results.py")


class SessionServerTest(unittest.TestCase):
    def setUp(self):
        self.workspace = tempfile.TemporaryDirectory()
        with open(SERVER) as f, open(RICH) as rich:
            # As the daemon runs it (python_program.h WithRichResults), its results file in the
            # temporary workspace.
            source = f.read().replace("None  # @rich_results.py@", repr(rich.read())).replace(
                "'/workspace/.ci-results.jsonl'", repr(self.workspace.name + "/.ci-results.jsonl"))
        ours, theirs = socket.socketpair()
        # Before the server's own first line: its channel becomes fd 3, and its chdir to
        # /workspace goes to the temporary one.
        prelude = (f"import os as _os\n_os.dup2({theirs.fileno()}, 3)\n"
                   f"_os.close({theirs.fileno()})\n_chdir = _os.chdir\n"
                   f"_os.chdir = lambda p: _chdir({self.workspace.name!r} if p == '/workspace' "
                   "else p)\n")
        self.channel = ours
        self.server = subprocess.Popen([sys.executable, "-c", prelude + source],
                                       pass_fds=(theirs.fileno(),))
        theirs.close()

    def tearDown(self):
        self.channel.close()
        self.assertEqual(self.server.wait(timeout=10), 0, "the server did not end with its channel")
        self.workspace.cleanup()

    def call(self, code, stdin=b"", last_line_interactive=True, timeout_ms=5000):
        """(status, flags, stdout, stderr) of one cell."""
        request = json.dumps({"code": code, "last_line_interactive": last_line_interactive,
                              "timeout_ms": timeout_ms}).encode()
        in_r, in_w = os.pipe()
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        os.write(in_w, stdin)
        os.close(in_w)
        socket.send_fds(self.channel, [len(request).to_bytes(4, "little") + request],
                        [in_r, out.fileno(), err.fileno()])
        os.close(in_r)
        answer = b""
        while len(answer) < 5:
            chunk = self.channel.recv(5 - len(answer))
            self.assertTrue(chunk, "the server closed its channel")
            answer += chunk
        with out, err:
            out.seek(0)
            err.seek(0)
            return (int.from_bytes(answer[:4], "little", signed=True), answer[4],
                    out.read().decode(), err.read().decode())

    def test_names_live_across_calls_and_the_last_expression_is_shown(self):
        self.assertEqual(self.call("x = 41"), (0, 0, "", ""))
        self.assertEqual(self.call("x + 1"), (0, 0, "42\n", ""))
        self.assertEqual(self.call("x + 1", last_line_interactive=False), (0, 0, "", ""))

    def test_each_call_gets_its_own_stdin_and_runs_in_the_workspace(self):
        status, _, out, _ = self.call("import os\nprint(input().upper(), os.getcwd())",
                                      stdin=b"hi\n")
        self.assertEqual((status, out), (0, f"HI {self.workspace.name}\n"))

    def test_exit_statuses_are_those_of_a_script(self):
        self.assertEqual(self.call("raise SystemExit(3)")[0], 3)
        self.assertEqual(self.call("raise SystemExit")[0], 0)
        status, _, _, err = self.call("import sys\nsys.exit('bad input')")
        self.assertEqual((status, err), (1, "bad input\n"))

    def test_a_traceback_shows_the_cell_and_none_of_the_server(self):
        status, _, _, err = self.call("def f():\n    1 / 0\nf()")
        self.assertEqual(status, 1)
        self.assertIn('File "<cell 1>", line 2, in f', err)
        self.assertIn("ZeroDivisionError", err)
        self.assertNotIn("<string>", err)
        status, _, _, err = self.call("def (:")
        self.assertEqual(status, 1)
        self.assertIn("SyntaxError", err)

    def test_a_cell_past_its_timeout_is_interrupted_and_the_state_kept(self):
        self.call("kept = 'yes'")
        status, flags, _, err = self.call("while True:\n    pass", timeout_ms=200)
        self.assertEqual((status, flags), (1, 1))
        self.assertIn("KeyboardInterrupt", err)
        self.assertEqual(self.call("kept")[2], "'yes'\n")


if __name__ == "__main__":
    unittest.main()
