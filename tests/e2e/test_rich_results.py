"""Rich results on the daemon's own fronts (docs/api.md "Rich results"): /v1/execute, its SSE
stream and session calls carry `results`, MIME bundles as a notebook makes them (matplotlib's
figures as PNG, display() calls, a last value with an HTML form), with the onyx fields as they
were. Runs on every backend."""

import base64
import json

from harness import E2ETestCase

# matplotlib and pandas take a second to import on an idle machine: the default 2 s is too short
# for a loaded one.
SLOW = 30000

PNG = b"\x89PNG\r\n\x1a\n"
CHART = ("import matplotlib.pyplot as plt\n"
         "plt.plot([1, 3, 2])\n"
         "plt.show()\n"
         "plt.figure()\n"
         "plt.bar([1], [2])\n")


class RichResultsTest(E2ETestCase):
    def execute(self, code, **fields):
        return super().execute(code, timeout_ms=SLOW, **fields)

    def assertPng(self, result):
        self.assertEqual(base64.b64decode(result["png"])[:8], PNG, result.get("text"))

    def test_figures_display_and_the_last_value(self):
        res = self.execute(CHART + "import pandas as pd\n"
                           "display(pd.DataFrame({'a': [1]}))\n"
                           "print('out')\n"
                           "pd.DataFrame({'b': [2]})")
        # The onyx fields are as before: the last value's repr is printed.
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"], res["files"]),
                         ("out\n   b\n0  2\n", "", 0, []), res)
        shown, table, last, drawn = res["results"]
        self.assertPng(shown)  # at plt.show()
        self.assertEqual((table["is_main_result"], table["text"]), (False, "   a\n0  1"))
        self.assertIn("<table", table["html"])
        self.assertEqual((last["is_main_result"], last["text"]), (True, "   b\n0  2"))
        self.assertIn("<table", last["html"])
        self.assertPng(drawn)  # still open at the end
        self.assertFalse(shown["is_main_result"] or drawn["is_main_result"])

    def test_plain_programs_have_none_and_subprocesses_keep_their_backend(self):
        res = self.execute("import subprocess, sys\n"
                           "subprocess.run([sys.executable, '-c', 'import matplotlib.pyplot as p; "
                           "p.figure(); print(p.get_backend())'])\n"
                           "1 + 1")
        self.assertEqual((res["stdout"], res["results"]), ("agg\n2\n", []), res)

    def test_a_program_that_forges_its_results_file_only_fools_itself(self):
        # Lines that are not result objects (not JSON, nested too deep, not UTF-8, without a
        # format) are dropped; the file is never an output file.
        res = self.execute("open('.ci-results.jsonl', 'a').write("
                           "'not json\\n[1]\\n{\"png\": 5}\\n{\"text\": \"mine\"}\\n"
                           "' + '[' * 100000 + '\\n')\n"
                           "open('.ci-results.jsonl', 'ab').write(b'{\"text\": \"\\xff\"}\\n')\n"
                           "open('kept.txt', 'w').write('x')")
        self.assertEqual(res["results"], [{"is_main_result": False, "text": "mine"}], res)
        self.assertEqual([f["path"] for f in res["files"]], ["kept.txt"], res)

    def test_the_sse_result_event_carries_them(self):
        res = self.client.sse("/v1/execute/stream", {"code": "display(3)\nprint(1)",
                                                       "timeout_ms": SLOW})
        self.assertEqual(res.status, 200, res.body)
        name, result, _ = res.events[-1]
        self.assertEqual(name, "result")
        self.assertEqual(result["results"], [{"is_main_result": False, "text": "3"}], result)

    def test_session_calls_carry_their_own(self):
        r = self.client.post_json("/v1/sessions", {})
        self.assertEqual(r.status, 201, r)
        sid = r.json["session_id"]
        self.addCleanup(lambda: self.client.delete(f"/v1/sessions/{sid}"))
        path = f"/v1/sessions/{sid}/execute"
        res = self.execute(CHART + "class Html:\n"
                           "    def _repr_html_(self):\n"
                           "        return '<b>hi</b>'\n"
                           "Html()", path=path)
        self.assertEqual(len(res["results"]), 3, res)
        self.assertPng(res["results"][0])
        self.assertEqual((res["results"][1]["is_main_result"], res["results"][1]["html"]),
                         (True, "<b>hi</b>"))
        self.assertPng(res["results"][2])
        # The next call has only its own, and the results file is never a session file.
        res = self.execute("import os\nsorted(os.listdir('.'))", path=path)
        self.assertEqual((res["stdout"], res["results"], res["files"]), ("[]\n", [], []), res)
        files = self.client.get(f"/v1/sessions/{sid}/files")
        self.assertEqual(json.loads(files.body)["files"], [], files)
        stream = self.client.sse(path + "/stream", {"code": "display(4)", "timeout_ms": SLOW})
        self.assertEqual(stream.events[-1][1]["results"],
                         [{"is_main_result": False, "text": "4"}], stream.body)
