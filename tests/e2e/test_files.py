"""The file store API and files staged into / collected from executions."""

import os
import re
import uuid

from harness import E2ETestCase

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def not_found(file_id):
    return f"File with ID '{file_id}' not found"


class FilesApiTest(E2ETestCase):
    def test_upload_list_download_delete(self):
        data = b"col\n1\n2\n"
        r = self.client.upload("data.csv", data)
        self.assertEqual(r.status, 201, r)
        body = r.json
        self.assertEqual(set(body), {"file_id", "filename", "size_bytes"}, body)
        self.assertRegex(body["file_id"], UUID4)
        self.assertEqual((body["filename"], body["size_bytes"]), ("data.csv", len(data)))
        fid = body["file_id"]

        r = self.client.get("/v1/files")
        self.assertEqual(r.status, 200, r)
        entries = [f for f in r.json["files"] if f["file_id"] == fid]
        self.assertEqual(len(entries), 1, r.json)
        e = entries[0]
        self.assertEqual((e["filename"], e["size_bytes"]), ("data.csv", len(data)))
        self.assertIn("upload_time", e)
        self.assertIsNotNone(e["upload_time"])

        r = self.download(fid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, data)
        self.assertEqual(r.header("Content-Type"), "application/octet-stream")
        self.assertEqual(r.header("Content-Disposition"), 'attachment; filename="data.csv"')

        r = self.client.delete(f"/v1/files/{fid}")
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        self.assertDetail(self.download(fid), 404, not_found(fid))
        self.assertDetail(self.client.delete(f"/v1/files/{fid}"), 404, not_found(fid))
        r = self.client.get("/v1/files")
        self.assertNotIn(fid, [f["file_id"] for f in r.json["files"]])

    def test_binary_round_trip(self):
        # Bytes that look like multipart framing must survive the parser.
        data = bytes(range(256)) * 64 + b"\r\n--e2eBoundary\r\n\r\n--\r\n" + b"\x00" * 100
        fid = self.upload_ok("blob.bin", data)
        r = self.download(fid)
        self.assertEqual(r.body, data)

    def test_empty_file(self):
        r = self.client.upload("empty.txt", b"")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["size_bytes"], 0)
        self.assertEqual(self.download(r.json["file_id"]).body, b"")

    def test_unknown_and_non_uuid_ids(self):
        fid = str(uuid.uuid4())
        self.assertDetail(self.download(fid), 404, not_found(fid))
        self.assertDetail(self.client.delete(f"/v1/files/{fid}"), 404, not_found(fid))
        self.assertDetail(self.download("abc"), 404, not_found("abc"))
        self.assertDetail(self.client.delete("/v1/files/abc"), 404, not_found("abc"))
        for bad in ("..%2F..%2Fetc%2Fpasswd", "%2E%2E", "..", fid.upper() + "x"):
            with self.subTest(file_id=bad):
                r = self.download(bad)
                self.assertEqual(r.status, 404, r)
                self.assertNotIn(b"root:", r.body)

    def test_extra_form_fields_ignored(self):
        r = self.client.upload("a.txt", b"A", extra_parts=[("purpose", None, b"x", None)])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["filename"], "a.txt")

    def test_missing_file_field(self):
        r = self.client.upload("a.txt", b"A", field="other")
        self.assertDetail(r, 422, "A 'file' form field is required.")

    def test_not_multipart(self):
        r = self.client.post_json("/v1/files", {"file": "x"})
        self.assertDetail(r, 422)

    def test_empty_filename_is_unnamed(self):
        r = self.client.upload("", b"x")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["filename"], "unnamed")

    def test_filename_with_quote(self):
        r = self.client.upload(None, b"q", disposition='filename="we\\"ird.txt"')
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["filename"], 'we"ird.txt')
        head = self._raw_download_head(r.json["file_id"])
        cd = self._header_line(head, "content-disposition")
        self.assertEqual(cd, 'attachment; filename="we\\"ird.txt"')

    def test_filename_with_newline(self):
        # A raw CR/LF cannot travel in a multipart header; RFC 5987/2231 `filename*` can.
        r = self.client.upload(None, b"n", disposition="filename=\"new line.txt\"; "
                                                      "filename*=UTF-8''new%0Aline%22.txt")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["filename"], 'new\nline".txt',
                         "the filename* parameter (RFC 7578 4.2 / RFC 5987) was not honoured")
        head = self._raw_download_head(r.json["file_id"])
        cd = self._header_line(head, "content-disposition")
        self.assertTrue(cd.startswith('attachment; filename="'), cd)
        self.assertNotIn("\n", cd)
        self.assertIn('\\"', cd, "the quote must be escaped")
        self.assertFalse(any(ord(c) < 0x20 for c in cd), f"control character in {cd!r}")
        fid = r.json["file_id"]
        listing = self.client.get("/v1/files").json["files"]
        self.assertEqual([f["filename"] for f in listing if f["file_id"] == fid],
                         ['new\nline".txt'])

    def test_filename_with_dot_dot(self):
        name = f"e2e-{uuid.uuid4().hex}.txt"
        r = self.client.upload(f"../../{name}", b"escape")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["filename"], f"../../{name}")
        self.assertEqual(self.download(r.json["file_id"]).body, b"escape")
        if self.daemon:
            d = self.daemon.store_dir
            for parent in (d, os.path.dirname(d), os.path.dirname(os.path.dirname(d)), "/"):
                self.assertFalse(os.path.exists(os.path.join(parent, name)),
                                 f"the upload's filename was used as a path: {parent}/{name}")

    def _raw_download_head(self, file_id):
        r, note = self.client.raw_request(
            f"GET /v1/files/{file_id} HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\r\n"
            .encode())
        self.assertIsNotNone(r, note)
        self.assertEqual(r.status, 200, r)
        return r

    def _header_line(self, resp, name):
        # headers as received; http.client keeps raw values in _headers
        values = [v for k, v in resp.headers.items() if k.lower() == name]
        self.assertEqual(len(values), 1, f"{name} headers: {values} (a raw newline splits one "
                                         f"header into two); all: {resp.headers.items()}")
        self.assertFalse(resp.headers.defects, f"malformed headers: {resp.headers.defects}")
        return values[0]


class FileSizeLimitTest(E2ETestCase):
    daemon_env = {"MAX_FILE_SIZE_MB": "1"}

    def test_too_big_upload_413(self):
        before = self.client.get("/v1/files").json["files"]
        ctype, body = self.client.multipart([("file", "big.bin", b"\xab" * (2 * 1024 * 1024),
                                              None)])
        head = (f"POST /v1/files HTTP/1.1\r\nHost: e2e\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        r, note = self.client.raw_request(head, (body[i:i + 65536]
                                                 for i in range(0, len(body), 65536)))
        self.assertIsNotNone(r, f"no answer to a 2 MB upload ({note})")
        self.assertDetail(r, 413, "File size exceeds maximum of 1 MB")
        after = self.client.get("/v1/files").json["files"]
        self.assertEqual(after, before, "the refused upload is listed")
        if self.daemon:
            leftovers = [os.path.join(dp, f) for dp, _, fs in os.walk(self.daemon.store_dir)
                         for f in fs]
            self.assertEqual(leftovers, [], "the refused upload left files in the store")
        self.assertTrue(self.client.health_ok())

    def test_under_limit_ok(self):
        r = self.client.upload("ok.bin", b"\x01" * 1000000)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["size_bytes"], 1000000)


class StagedFilesTest(E2ETestCase):
    def test_staged_file_read(self):
        fid = self.upload_ok("data.csv", b"a,b\n1,2\n")
        res = self.execute("print(open('data.csv').read())",
                           files=[{"path": "data.csv", "file_id": fid}])
        self.assertEqual(res["stdout"], "a,b\n1,2\n\n")
        self.assertEqual(res["files"], [], "an unmodified staged input must not be returned")

    def test_staged_into_subfolder_and_normalised(self):
        fid = self.upload_ok("x.txt", b"X")
        res = self.execute("import os\nprint(open('in/deep/x.txt').read())\n"
                           "print(oct(os.stat('in/deep/x.txt').st_uid))",
                           files=[{"path": "./in//deep/./x.txt", "file_id": fid}])
        self.assertEqual(res["stdout"].split("\n")[0], "X", res)
        self.assertEqual(res["files"], [])

    def test_staged_file_owned_by_sandbox_user(self):
        fid = self.upload_ok("o.txt", b"O")
        res = self.execute("import os\nst = os.stat('o.txt')\nprint(st.st_uid, st.st_gid)\n"
                           "open('o.txt', 'a').close()\nprint('writable')",
                           files=[{"path": "o.txt", "file_id": fid}])
        self.assertEqual(res["stdout"], "65532 65532\nwritable\n", res)

    def test_edited_staged_file_returned_with_new_id(self):
        fid = self.upload_ok("log.txt", b"one\n")
        res = self.execute("open('log.txt', 'a').write('two\\n')",
                           files=[{"path": "log.txt", "file_id": fid}])
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(len(res["files"]), 1, res["files"])
        f = res["files"][0]
        self.assertEqual((f["path"], f["kind"]), ("log.txt", "file"))
        self.assertNotEqual(f["file_id"], fid)
        self.assertRegex(f["file_id"], UUID4)
        self.assertEqual(self.download(f["file_id"]).body, b"one\ntwo\n")
        self.assertEqual(self.download(fid).body, b"one\n", "the input file was changed")

    def test_new_files_in_subfolders(self):
        res = self.execute("import os\nos.makedirs('out/deep')\n"
                           "open('out/deep/r.txt','w').write('x')\n"
                           "open('top.txt','w').write('t')")
        got = {f["path"]: f for f in res["files"]}
        self.assertEqual(set(got), {"out/deep/r.txt", "top.txt"}, res["files"])
        for f in res["files"]:
            self.assertEqual(set(f), {"path", "kind", "file_id"}, f)
            self.assertEqual(f["kind"], "file")
        r = self.download(got["out/deep/r.txt"]["file_id"])
        self.assertEqual(r.body, b"x")
        self.assertEqual(r.header("Content-Disposition"), 'attachment; filename="out/deep/r.txt"')
        listing = {f["file_id"]: f for f in self.client.get("/v1/files").json["files"]}
        self.assertEqual(listing[got["top.txt"]["file_id"]]["filename"], "top.txt")

    def test_hidden_file_keeps_its_dot(self):
        res = self.execute("open('.env','w').write('K=V')\nimport os\nos.mkdir('.cfg')\n"
                           "open('.cfg/.x','w').write('y')")
        paths = sorted(f["path"] for f in res["files"])
        self.assertEqual(paths, [".cfg/.x", ".env"])

    def test_tmp_files_not_returned(self):
        res = self.execute("open('/tmp/scratch.txt','w').write('x')\nprint('ok')")
        self.assertEqual(res["stdout"], "ok\n", res)
        self.assertEqual(res["files"], [])

    def test_symlinks_not_followed(self):
        res = self.execute("import os\nos.symlink('/etc/passwd', 'passwd')\n"
                           "os.symlink('/etc', 'etcdir')\nos.symlink('missing', 'dangling')\n"
                           "os.mkfifo('fifo')\nprint('ok')")
        self.assertEqual(res["stdout"], "ok\n", res)
        self.assertEqual(res["files"], [], "symlinks/fifos must be skipped, never followed")

    def test_binary_output_file(self):
        res = self.execute("open('b.bin','wb').write(bytes(range(256)) * 4)")
        self.assertEqual(len(res["files"]), 1, res)
        self.assertEqual(self.download(res["files"][0]["file_id"]).body, bytes(range(256)) * 4)

    def test_main_py_not_collected(self):
        res = self.execute("open('other.py','w').write('x = 1')")
        self.assertEqual([f["path"] for f in res["files"]], ["other.py"])

    def test_unknown_file_id_404(self):
        fid = str(uuid.uuid4())
        r = self.client.post_json("/v1/execute", {"code": "print(1)",
                                                  "files": [{"path": "in.txt", "file_id": fid}]})
        self.assertDetail(r, 404, f"File with ID '{fid}' not found for path 'in.txt'.")

    def test_file_ids_resolved_in_order_before_paths(self):
        good = self.upload_ok("g.txt", b"g")
        missing = str(uuid.uuid4())
        r = self.client.post_json("/v1/execute", {"code": "1", "files": [
            {"path": "/abs", "file_id": good},
            {"path": "../x", "file_id": missing}]})
        self.assertDetail(r, 404, f"File with ID '{missing}' not found for path '../x'.")

    def test_illegal_paths_422(self):
        fid = self.upload_ok("p.txt", b"p")
        cases = [
            ("/abs", "File paths must be relative."),
            ("/etc/passwd", "File paths must be relative."),
            ("../x", "File paths must not contain '..'."),
            ("a/../../x", "File paths must not contain '..'."),
            (".", "File path must not be empty."),
            ("", "File path must not be empty."),
            ("./", "File path must not be empty."),
            ("__main__.py", "File path '__main__.py' is reserved for the execution entrypoint."),
            ("./__main__.py",
             "File path '__main__.py' is reserved for the execution entrypoint."),
        ]
        for path, detail in cases:
            with self.subTest(path=path):
                r = self.client.post_json("/v1/execute", {
                    "code": "print(1)", "files": [{"path": path, "file_id": fid}]})
                self.assertDetail(r, 422, detail)

    def test_main_py_in_subfolder_allowed(self):
        fid = self.upload_ok("m.py", b"print('sub')")
        res = self.execute("print(open('pkg/__main__.py').read())",
                           files=[{"path": "pkg/__main__.py", "file_id": fid}])
        self.assertEqual(res["stdout"], "print('sub')\n")

    def test_same_file_staged_twice(self):
        fid = self.upload_ok("t.txt", b"T")
        res = self.execute("print(open('a.txt').read() + open('b/a.txt').read())",
                           files=[{"path": "a.txt", "file_id": fid},
                                  {"path": "b/a.txt", "file_id": fid}])
        self.assertEqual(res["stdout"], "TT\n")
        self.assertEqual(res["files"], [])

    def test_file_id_traversal(self):
        r = self.client.post_json("/v1/execute", {
            "code": "print(1)", "files": [{"path": "x", "file_id": "../../etc/passwd"}]})
        self.assertDetail(r, 404, "File with ID '../../etc/passwd' not found for path 'x'.")
