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


class Server:
    """One interpreter on its channel, with a temporary directory as its workspace."""

    def __init__(self):
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
        self.process = subprocess.Popen([sys.executable, "-c", prelude + source],
                                        pass_fds=(theirs.fileno(),))
        theirs.close()

    def close(self):
        """The server's exit status once its channel is closed."""
        self.channel.close()
        try:
            return self.process.wait(timeout=10)
        finally:
            self.workspace.cleanup()

    def send(self, request, stdin=b""):
        """(status, flags, stdout, stderr) of one call."""
        request = json.dumps(request).encode()
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
            if not chunk:
                raise AssertionError("the server closed its channel")
            answer += chunk
        with out, err:
            out.seek(0)
            err.seek(0)
            return (int.from_bytes(answer[:4], "little", signed=True), answer[4],
                    out.read().decode(), err.read().decode())


class SessionServerTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()
        self.workspace = self.server.workspace

    def tearDown(self):
        self.assertEqual(self.server.close(), 0, "the server did not end with its channel")

    def call(self, code, stdin=b"", last_line_interactive=True, timeout_ms=5000, server=None):
        """(status, flags, stdout, stderr) of one cell."""
        return (server or self.server).send(
            {"code": code, "last_line_interactive": last_line_interactive,
             "timeout_ms": timeout_ms}, stdin)

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


try:
    import numpy
except ImportError:
    numpy = None
try:
    import dill
except ImportError:
    dill = None


class SavedStateTest(unittest.TestCase):
    """The ops dump and load: the state saved by one interpreter, restored in a new one (as the
    daemon moves a session to a new sandbox)."""

    def setUp(self):
        self.first, self.second = Server(), Server()
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "state")

    def tearDown(self):
        self.assertEqual(self.first.close(), 0)
        self.assertEqual(self.second.close(), 0)
        self.dir.cleanup()

    def cell(self, server, code):
        status, _, out, err = server.send({"code": code, "last_line_interactive": True,
                                           "timeout_ms": 5000})
        self.assertEqual(status, 0, err)
        return out

    def op(self, server, op, timeout_ms=5000, path=None):
        """(status, flags, the answer's one JSON line)."""
        status, flags, out, err = server.send({"op": op, "path": path or self.path,
                                               "timeout_ms": timeout_ms})
        self.assertEqual(len(out.splitlines()), 1, (out, err))
        return status, flags, json.loads(out)

    def move(self, code):
        """The dump report of `code`'s names and the load report of the second interpreter."""
        self.cell(self.first, code)
        status, flags, dumped = self.op(self.first, "dump")
        self.assertEqual((status, flags), (0, 0), dumped)
        self.assertEqual(os.path.getsize(self.path), dumped["bytes"])
        status, flags, loaded = self.op(self.second, "load")
        self.assertEqual((status, flags), (0, 0), loaded)
        self.assertFalse(os.path.exists(self.path), "load leaves the file")
        return dumped, loaded

    def test_plain_values_come_back_with_their_shared_references(self):
        dumped, loaded = self.move("a = [1, 2]\nb = {'a': a, 's': 'h\u00e9'}\nc = (a, a)\n"
                                   "n = 2 ** 70\nx = globals()")
        self.assertEqual(dumped["kept"], ["a", "b", "c", "n", "x"])
        self.assertEqual((dumped["lost"], loaded), ([], {"kept": dumped["kept"], "lost": []}))
        self.assertEqual(self.cell(self.second, "a.append(3)\nb, c[0] is a is c[1], n, "
                                                "x is globals()"),
                         "({'a': [1, 2, 3], 's': 'h\u00e9'}, True, 1180591620717411303424, True)\n")

    def test_the_file_is_private_and_written_whole_under_its_name(self):
        self.cell(self.first, "v = 1")
        self.assertEqual(self.op(self.first, "dump")[0], 0)
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)
        self.assertEqual(os.listdir(self.dir.name), ["state"])
        status, flags, answer = self.op(self.first, "dump", path="state")
        self.assertEqual((status, answer), (1, {"error": "the path must be absolute"}))
        status, _, answer = self.op(self.first, "dump", path=self.dir.name + "/no/such/dir")
        self.assertEqual(status, 1)
        self.assertIn("No such file or directory", answer["error"])
        self.assertEqual(os.listdir(self.dir.name), ["state"])

    def test_a_dump_past_its_timeout_is_interrupted_and_writes_nothing(self):
        self.cell(self.first, "import time\nclass Slow:\n    def __reduce__(self):\n"
                              "        time.sleep(5)\nslow = Slow()")
        status, flags, answer = self.op(self.first, "dump", timeout_ms=200)
        self.assertEqual((status, flags), (1, 1))
        self.assertIn("timeout", answer["error"])
        self.assertEqual(os.listdir(self.dir.name), [])
        self.assertEqual(self.cell(self.first, "type(slow).__name__"), "'Slow'\n")

    @unittest.skipIf(numpy is None, "numpy is not importable by this python3")
    def test_numpy_arrays_come_back_writable_and_numpy_by_import(self):
        dumped, loaded = self.move(
            "import numpy as np\nx = np.arange(1_000_000, dtype=np.float64)\nsame = x\n"
            "strided = x[::3]\nf = np.asfortranarray(np.arange(12).reshape(3, 4))\n"
            "ro = np.ones(5)\nro.flags.writeable = False")
        self.assertEqual(loaded["kept"], ["np", "x", "same", "strided", "f", "ro"])
        self.assertEqual(loaded["lost"], [])
        out = self.cell(self.second, "import sys\nx[0] = 7\n(np is sys.modules['numpy'], "
                                     "same is x, float(x.sum()), float(strided[1]), "
                                     "f.flags.f_contiguous, f[2, 3], ro.flags.writeable)")
        self.assertEqual(out, "(True, True, 499999500007.0, 3.0, True, 11, False)\n")

    @unittest.skipIf(dill is None, "dill is not importable by this python3")
    def test_functions_lambdas_and_classes_of_cells_come_back_working(self):
        dumped, loaded = self.move(
            "factor = 3\ndef scale(v):\n    return v * factor\nsquare = lambda v: v * v\n"
            "class Point:\n    def __init__(self, x):\n        self.x = x\n"
            "    def norm(self):\n        return abs(self.x) * factor\np = Point(-2)")
        self.assertEqual(loaded, {"kept": ["factor", "scale", "square", "Point", "p"],
                                  "lost": []})
        # The restored functions read the new interpreter's globals, not a copy of the old ones.
        self.assertEqual(self.cell(self.second, "factor = 10\nscale(2), square(4), p.norm(), "
                                                "type(p) is Point, Point(1).norm()"),
                         "(20, 16, 20, True, 10)\n")

    def test_modules_come_back_by_import(self):
        dumped, loaded = self.move("import os.path\nimport json as j\nfrom os.path import join")
        self.assertEqual(loaded, {"kept": ["os", "j", "join"], "lost": []})
        self.assertEqual(self.cell(self.second, "import sys\nj is sys.modules['json'], "
                                                "os.path.join('a', 'b'), join('c', 'd')"),
                         "(True, 'a/b', 'c/d')\n")

    def test_live_values_are_lost_by_name_and_the_rest_kept(self):
        self.cell(self.first, "import socket, threading\nkeep = 5\ns = socket.socket()\n"
                              "f = open('x.txt', 'w')\ngen = (i for i in range(3))\n"
                              "t = threading.Thread(target=print)\nholder = {'sock': s}\n"
                              "bad = [[7], s]\ngood = bad[0]\nafter = [good]")
        status, _, dumped = self.op(self.first, "dump")
        self.assertEqual(status, 0)
        self.assertEqual(dumped["kept"], ["socket", "threading", "keep", "good", "after"])
        lost = {x["name"]: x["why"] for x in dumped["lost"]}
        self.assertEqual(sorted(lost), ["bad", "f", "gen", "holder", "s", "t"])
        self.assertIn("cannot pickle 'socket' object", lost["s"])
        self.assertIn("open file", lost["f"])
        self.assertIn("generator", lost["gen"])
        self.assertIn("thread", lost["t"])
        # good's list was first met inside bad, whose failed attempt was rolled back.
        self.assertEqual(self.op(self.second, "load")[0], 0)
        self.assertEqual(self.cell(self.second, "keep, good, after[0] is good, "
                                                "'s' in globals(), socket.socket.__name__"),
                         "(5, [7], True, False, 'socket')\n")

    def test_a_name_that_does_not_load_is_lost_and_the_rest_restored(self):
        # A class of the first workspace's module, which the second interpreter does not have.
        with open(os.path.join(self.first.workspace.name, "mine.py"), "w") as f:
            f.write("class Thing:\n    pass\n")
        self.cell(self.first, "import mine\nother = [1]\nt = mine.Thing()\nshares = [t, other]\n"
                              "also = [other]")
        self.assertEqual(self.op(self.first, "dump")[2]["lost"], [])
        status, _, loaded = self.op(self.second, "load")
        self.assertEqual(status, 0)
        self.assertEqual(loaded["kept"], ["other", "also"])
        lost = {x["name"]: x["why"] for x in loaded["lost"]}
        self.assertEqual(lost, {"mine": "No module named 'mine'", "t": "No module named 'mine'",
                                "shares": "shares objects with t, which did not load"})
        self.assertEqual(self.cell(self.second, "also[0] is other, other, 't' in globals()"),
                         "(True, [1], False)\n")

    def test_without_dill_what_pickles_is_kept(self):
        self.cell(self.first, "import sys\nsys.modules['dill'] = None\nn = {'k': (1, 2)}\n"
                              "def f():\n    pass\nx = globals()")
        status, _, dumped = self.op(self.first, "dump")
        self.assertEqual(status, 0)
        self.assertEqual(dumped["kept"], ["sys", "n", "x"])
        self.assertEqual([x["name"] for x in dumped["lost"]], ["f"])
        self.assertEqual(self.op(self.second, "load")[2], {"kept": ["sys", "n", "x"], "lost": []})
        self.assertEqual(self.cell(self.second, "n, x is globals()"), "({'k': (1, 2)}, True)\n")

    def assert_refused(self, content, error):
        """A bad file: status 1, its error, the file left, the interpreter's names untouched."""
        with open(self.path, "wb") as f:
            f.write(content)
        self.cell(self.second, "earlier = 'intact'\nv = 'mine'")
        status, flags, answer = self.op(self.second, "load")
        self.assertEqual((status, flags, list(answer)), (1, 0, ["error"]))
        self.assertIn(error, answer["error"])
        self.assertTrue(os.path.exists(self.path))
        self.assertEqual(self.cell(self.second, "earlier, v, 'w' in globals()"),
                         "('intact', 'mine', False)\n")

    def dumped_file(self):
        self.cell(self.first, "v = list(range(1000))\nw = 'theirs'")
        self.assertEqual(self.op(self.first, "dump")[0], 0)
        with open(self.path, "rb") as f:
            return f.read()

    def test_a_truncated_file_is_refused_and_kept(self):
        whole = self.dumped_file()
        self.assert_refused(whole[:len(whole) // 2], "truncated")
        self.assert_refused(whole[:-1], "truncated")
        self.assert_refused(whole[:5], "truncated")

    def test_a_corrupt_or_garbage_file_is_refused_and_kept(self):
        whole = bytearray(self.dumped_file())
        whole[len(whole) // 2] ^= 1
        self.assert_refused(bytes(whole), "corrupt")
        self.assert_refused(os.urandom(4096), "not a saved Python state")
        self.assert_refused(b"", "not a saved Python state")
        start = whole.index(b"{")
        self.assert_refused(bytes(whole[:start]) + b"[" + bytes(whole[start + 1:]),
                            "header is not that of a saved Python state")

    def test_the_answers_are_one_json_line_each(self):
        self.cell(self.first, "import socket\nv = 1\ns = socket.socket()")
        status, _, out, _ = self.first.send({"op": "dump", "path": self.path, "timeout_ms": 5000})
        self.assertEqual((status, out.count("\n"), out[-1]), (0, 1, "\n"))
        answer = json.loads(out)
        self.assertEqual(sorted(answer), ["bytes", "kept", "lost"])
        self.assertEqual(answer["kept"], ["socket", "v"])
        self.assertEqual(answer["lost"], [{"name": "s", "why": answer["lost"][0]["why"]}])
        self.assertIsInstance(answer["bytes"], int)
        status, _, out, _ = self.second.send({"op": "load", "path": self.path,
                                              "timeout_ms": 5000})
        self.assertEqual((status, out.count("\n")), (0, 1))
        self.assertEqual(json.loads(out), {"kept": ["socket", "v"], "lost": []})


if __name__ == "__main__":
    unittest.main()
