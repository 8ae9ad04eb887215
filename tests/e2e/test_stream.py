"""POST /v1/execute/stream: Server-Sent Events, parsed line by line like the onyx client."""

import uuid

from harness import E2ETestCase

PATH = "/v1/execute/stream"


class StreamTest(E2ETestCase):
    def stream(self, code, **fields):
        body = {"code": code}
        body.update(fields)
        res = self.client.sse(PATH, body)
        self.assertEqual(res.status, 200, f"{res.status} {res.body!r}")
        self.assertEqual(res.unknown_lines, [], "lines that are neither event: nor data:")
        self.assertIsNone(res.unterminated, "the last frame was not terminated by a blank line")
        self.assertTrue(res.events, "no events at all")
        names = [e for e, _, _ in res.events]
        self.assertEqual(names[-1], "result", f"last event must be result: {names}")
        self.assertEqual(names.count("result"), 1, names)
        self.assertTrue(all(n == "output" for n in names[:-1]), names)
        for _, d, _ in res.events[:-1]:
            self.assertEqual(set(d), {"stream", "data"}, d)
            self.assertIn(d["stream"], ("stdout", "stderr"))
            self.assertIsInstance(d["data"], str)
        return res, res.events[-1][1]

    def test_headers_and_framing(self):
        res = self.client.sse(PATH, {"code": "print('hi')"})
        self.assertEqual(res.status, 200)
        h = res.headers
        self.assertEqual(h.get("Content-Type"), "text/event-stream; charset=utf-8")
        self.assertEqual(h.get("Cache-Control"), "no-cache")
        self.assertEqual(h.get("X-Accel-Buffering"), "no")
        # event: <name>\ndata: <json>\n\n exactly
        lines = [line.rstrip("\n") for line in res.raw_lines]
        self.assertEqual(len(lines) % 3, 0, lines)
        for i in range(0, len(lines), 3):
            self.assertRegex(lines[i], r"^event: (output|result)$")
            self.assertTrue(lines[i + 1].startswith("data: {"), lines[i + 1])
            self.assertEqual(lines[i + 2], "")

    def test_output_then_result(self):
        res, result = self.stream("import sys\nprint('a')\nprint('b', file=sys.stderr)\n"
                                  "print('c')")
        self.assertEqual(res.text("stdout"), "a\nc\n")
        self.assertEqual(res.text("stderr"), "b\n")
        for k in ("exit_code", "timed_out", "duration_ms", "files"):
            self.assertIn(k, result)
        self.assertEqual(result["exit_code"], 0)
        self.assertIs(result["timed_out"], False)
        self.assertIsInstance(result["duration_ms"], int)
        self.assertEqual(result["files"], [])
        self.assertEqual(result.get("verdict"), "ok")
        self.assertNotIn("stdout", result, "the result event does not repeat the output")

    def test_order_across_streams(self):
        code = ("import sys, time\n"
                "for i in range(3):\n"
                "    print(f'o{i}', flush=True)\n"
                "    time.sleep(0.05)\n"
                "    print(f'e{i}', file=sys.stderr, flush=True)\n"
                "    time.sleep(0.05)\n")
        res, _ = self.stream(code)
        seq = "".join(d["data"] for d in res.outputs())
        self.assertEqual(seq, "o0\ne0\no1\ne1\no2\ne2\n")

    def test_really_streams(self):
        res, _ = self.stream("import time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')")
        first = next(t for e, d, t in res.events if e == "output")
        last = res.events[-1][2]
        self.assertEqual(res.text("stdout"), "a\nb\n")
        self.assertGreaterEqual(last - first, 0.7, f"first output at {first:.2f} s, result at "
                                                   f"{last:.2f} s: output was buffered")

    def test_timeout(self):
        res, result = self.stream("import time\nprint('x', flush=True)\ntime.sleep(10)",
                                  timeout_ms=1000)
        self.assertIs(result["timed_out"], True)
        self.assertIsNone(result["exit_code"])
        self.assertEqual(result.get("verdict"), "timed_out")
        self.assertEqual(res.text("stdout"), "x\n")
        self.assertLess(res.elapsed, 3.0)

    def test_files_in_result(self):
        fid = self.upload_ok("in.txt", b"abc")
        res, result = self.stream("open('out.txt','w').write(open('in.txt').read().upper())",
                                  files=[{"path": "in.txt", "file_id": fid}])
        self.assertEqual([f["path"] for f in result["files"]], ["out.txt"], result)
        self.assertEqual(result["files"][0]["kind"], "file")
        self.assertEqual(self.download(result["files"][0]["file_id"]).body, b"ABC")

    def test_no_output_only_result(self):
        res, result = self.stream("x = 1")
        self.assertEqual(len(res.events), 1, res.events)
        self.assertEqual(result["exit_code"], 0)

    def test_syntax_error(self):
        res, result = self.stream("def foo(")
        self.assertIn("SyntaxError", res.text("stderr"))
        self.assertEqual(res.text("stdout"), "")
        self.assertEqual(result["exit_code"], 1)
        self.assertEqual(result.get("verdict"), "error")

    def test_last_line_interactive_and_stdin(self):
        res, result = self.stream("x = input()\nx.upper()", stdin="hello\n")
        self.assertEqual(res.text("stdout"), "'HELLO'\n")
        self.assertEqual(result["exit_code"], 0)

    def test_unicode_chunks_never_split(self):
        # Multi-byte characters written one byte at a time: the daemon holds back partial
        # sequences, so every data string is valid text and the whole is exact.
        code = ("import sys, time\n"
                "for b in 'é✓日\\U0001F600'.encode():\n"
                "    sys.stdout.buffer.write(bytes([b])); sys.stdout.flush(); time.sleep(0.01)\n")
        res, _ = self.stream(code)
        self.assertEqual(res.text("stdout"), "é✓日\U0001F600")
        self.assertNotIn("\ufffd", res.text("stdout"))

    def test_validation_error_is_plain_json(self):
        res = self.client.sse(PATH, {"timeout_ms": 0})
        self.assertEqual(res.status, 422)
        self.assertTrue((res.headers.get("Content-Type") or "").startswith("application/json"))
        self.assertEqual(res.json, {"detail": "Field 'code' is required."})
        res = self.client.sse(PATH, b"{not json")
        self.assertEqual(res.status, 422)
        self.assertTrue(res.json["detail"].startswith("Invalid request body: "), res.json)

    def test_unknown_file_is_plain_404(self):
        fid = str(uuid.uuid4())
        res = self.client.sse(PATH, {"code": "1", "files": [{"path": "a", "file_id": fid}]})
        self.assertEqual(res.status, 404)
        self.assertEqual(res.json, {"detail": f"File with ID '{fid}' not found for path 'a'."})

    def test_bad_path_is_plain_422(self):
        fid = self.upload_ok("p.txt", b"p")
        res = self.client.sse(PATH, {"code": "1", "files": [{"path": "../p", "file_id": fid}]})
        self.assertEqual(res.status, 422)
        self.assertEqual(res.json, {"detail": "File paths must not contain '..'."})


class StreamTruncationTest(E2ETestCase):
    daemon_env = {"MAX_OUTPUT_BYTES": "1000"}

    def test_stream_capped_without_marker(self):
        res = self.client.sse(PATH, {"code": "import sys\nprint('x'*5000)\n"
                                             "sys.stderr.write('e'*3000)"})
        self.assertEqual(res.status, 200)
        self.assertEqual(res.text("stdout"), "x" * 1000)
        self.assertEqual(res.text("stderr"), "e" * 1000)
        result = res.events[-1][1]
        self.assertEqual(res.events[-1][0], "result")
        self.assertEqual(result["exit_code"], 0)
        self.assertEqual(result.get("verdict"), "output_limit")
