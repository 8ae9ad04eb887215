#!/usr/bin/env python3
"""check_coroutines.py finds braced temporaries in co_await expressions, and only those."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_coroutines  # noqa: E402


class CheckCoroutinesTest(unittest.TestCase):
    def found(self, code):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "src"))
            with open(os.path.join(root, "src", "x.cc"), "w") as f:
                f.write(code)
            return check_coroutines.check(root)

    def test_braced_temporaries_are_found(self):
        for code in ("co_await ex.Respond(HttpResponse{204, \"\"});",
                     "auto r = co_await sessions.Create({}, 5, client);",
                     "co_await f(a,\n    {1, 2});",
                     "co_await api.Exec(argv, ExecStdin{true, std::nullopt});",
                     "co_await g(std::vector<int>{1});"):
            self.assertEqual(len(self.found(code)), 1, code)

    def test_conditional_operators_are_found(self):
        for code in ("Result<Frame> r = ok ? co_await Read(sd) : sent;",
                     "co_await ex.Respond(streaming ? StreamError(c) : Error(c));",
                     "co_await Wait(closed ? kBackoff : std::chrono::seconds(1));"):
            self.assertEqual(len(self.found(code)), 1, code)

    def test_named_values_strings_and_comments_pass(self):
        for code in ("HttpResponse r{204};\nco_await ex.Respond(std::move(r));",
                     "co_await ex.Respond(ErrorBody(400, \"use {x} or (, {y})\"));",
                     "co_await f(x);  // not f(X{1})\nint y{2};",
                     "if (auto f = co_await c.Start(req)) { return; }",
                     "if (auto f = co_await c.Start(req)) { return f ? 1 : 2; }",
                     "co_await ex.Respond(ErrorBody(400, \"why? because\"));"):
            self.assertEqual(self.found(code), [], code)


if __name__ == "__main__":
    unittest.main()
