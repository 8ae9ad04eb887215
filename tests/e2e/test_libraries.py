"""The data-science stack the onyx agent relies on: matplotlib, pandas, openpyxl."""

from harness import E2ETestCase

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class LibrariesTest(E2ETestCase):
    def require_modules(self, *modules):
        code = ("import importlib.util\n"
                f"print([m for m in {list(modules)!r} if importlib.util.find_spec(m) is None])")
        res = self.execute(code, timeout_ms=10000)
        self.assertEqual(res["exit_code"], 0, res)
        missing = res["stdout"].strip()
        if missing != "[]":
            self.skip_or_fail(f"not installed in the sandbox's Python: {missing}")

    def test_matplotlib_png(self):
        self.require_modules("matplotlib")
        res = self.execute("import matplotlib\nmatplotlib.use('Agg')\n"
                           "import matplotlib.pyplot as plt\nplt.plot([1,2,3])\n"
                           "plt.savefig('plot.png')", timeout_ms=30000)
        self.assertEqual(res["exit_code"], 0, res["stderr"])
        files = {f["path"]: f["file_id"] for f in res["files"]}
        self.assertIn("plot.png", files, res["files"])
        self.assertEqual(list(files), ["plot.png"], "only the plot: no matplotlib cache files")
        r = self.download(files["plot.png"])
        self.assertEqual(r.status, 200)
        self.assertTrue(r.body.startswith(PNG_SIGNATURE), r.body[:16])

    def test_pandas_openpyxl_round_trip(self):
        self.require_modules("pandas", "openpyxl")
        code = ("import pandas as pd\n"
                "df = pd.DataFrame({'name': ['a', 'b'], 'value': [1.5, 42]})\n"
                "df.to_excel('out.xlsx', index=False, engine='openpyxl')\n"
                "back = pd.read_excel('out.xlsx', engine='openpyxl')\n"
                "print(back.loc[1, 'value'])\n"
                "back")
        res = self.execute(code, timeout_ms=30000)
        self.assertEqual(res["exit_code"], 0, res["stderr"])
        self.assertTrue(res["stdout"].startswith("42.0\n"), res["stdout"])
        self.assertIn("name", res["stdout"], "the last expression's DataFrame repr")
        files = {f["path"]: f["file_id"] for f in res["files"]}
        self.assertEqual(list(files), ["out.xlsx"], res["files"])
        body = self.download(files["out.xlsx"]).body
        self.assertTrue(body.startswith(b"PK\x03\x04"), "an xlsx is a zip file")
