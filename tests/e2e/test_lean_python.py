"""Lean interpreters (docs/performance.md "Lean interpreters"): with WARM_IMPORTS set, a Python
program whose imports are only of the standard library and name none of them runs in a sandbox
of its own pool whose interpreter has none of them loaded; any other runs with them, as before.
Runs with the local backend (the only one that keeps the two kinds apart)."""

from harness import E2ETestCase

WARM = ("csv", "this")  # `import this` prints: a program must not see it
LOADED = "import sys\nprint(sorted(m for m in ('csv', 'this', 'numpy') if m in sys.modules))"


class LeanInterpreterTest(E2ETestCase):
    daemon_env = {"WARM_POOL_SIZE": "2", "WARM_IMPORTS": ",".join(WARM)}

    def full(self, name):
        """Until a pool is full again: without the fork server (rootless) a sandbox made for a
        request that found it empty imports nothing ahead."""
        self.wait_for_pool(name, 2)

    def test_a_program_of_the_standard_library_alone_runs_without_the_warm_imports(self):
        res = self.execute(LOADED)
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"]), ("[]\n", "", 0), res)
        fid = self.upload_ok("helper.py", b"import csv\n")
        for code, files in (("import csv\n", []), ("from csv import reader\n", []),
                            # Not of the standard library: may import a warm one itself.
                            ("import helper\n", [{"path": "helper.py", "file_id": fid}]),
                            ("m = __import__('sys')\n", [])):  # an import the scan cannot see
            self.full("python")
            res = self.execute(code + LOADED, files=files)
            self.assertEqual((res["stdout"], res["stderr"]), ("['csv', 'this']\n", ""), res)

    def test_each_kind_has_its_pool_and_takes_from_it(self):
        self.full("python")
        self.full("python-lean")
        before = {p: self.pool_metric(p, "hits_total") for p in ("python", "python-lean")}
        self.assertEqual(self.execute("print(1)")["stdout"], "1\n")
        self.assertEqual(self.pool_metric("python-lean", "hits_total"), before["python-lean"] + 1)
        self.full("python")
        self.assertEqual(self.execute("import csv\nprint(2)")["stdout"], "2\n")
        self.assertEqual(self.pool_metric("python", "hits_total"), before["python"] + 1)

    def test_a_lean_program_still_imports_what_it_asks_for(self):
        """An import the source does not show (through the C API here) loads the module then,
        as Python does: slower than a warm one, never missing."""
        res = self.execute("import ctypes\n"
                           "load = ctypes.pythonapi.PyImport_ImportModule\n"
                           "load.restype = ctypes.py_object\n"
                           "print(load(b'csv').__name__)\n" + LOADED)
        self.assertEqual((res["stdout"], res["exit_code"]), ("csv\n['csv']\n", 0), res)
