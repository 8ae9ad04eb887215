"""The file store API and files staged into / collected from executions."""

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import threading
import uuid

from harness import Client, Config, Daemon, E2ETestCase, wait_until

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
            f"GET /v1/files/{file_id} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
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
        head = (f"POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        r, note = self.client.raw_request(head, (body[i:i + 65536]
                                                 for i in range(0, len(body), 65536)))
        self.assertIsNotNone(r, f"no answer to a 2 MB upload ({note})")
        self.assertDetail(r, 413, "File size exceeds maximum of 1 MB")
        after = self.client.get("/v1/files").json["files"]
        self.assertEqual(after, before, "the refused upload is listed")
        if self.daemon:
            leftovers = store_files(self.daemon.store_dir)
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

    def test_paths_that_clash_are_422(self):
        """Issue #30 item 8: paths of one request that cannot all be files (they were 500s)."""
        fid = self.upload_ok("p.txt", b"p")
        cases = [
            (["a", "a"], "File path 'a' is given twice."),
            (["a", "./a"], "File path 'a' is given twice."),
            (["a", "a/b"], "File path 'a/b' is below 'a', which is a file."),
            (["d/e/f", "d/e"], "File path 'd/e/f' is below 'd/e', which is a file."),
            (["__main__.py/x"],
             "File path '__main__.py/x' is below '__main__.py', which is a file (the execution "
             "entrypoint)."),
        ]
        for paths, detail in cases:
            with self.subTest(paths=paths):
                r = self.client.post_json("/v1/execute", {
                    "code": "print(1)", "files": [{"path": p, "file_id": fid} for p in paths]})
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


def store_disk_bytes(store_dir):
    """What the file store really occupies on disk (allocated blocks, holes excluded)."""
    total = 0
    for dp, _, names in os.walk(store_dir):
        for name in names:
            try:
                total += os.lstat(os.path.join(dp, name)).st_blocks * 512
            except FileNotFoundError:
                pass  # a temp file that went away meanwhile
    return total


def store_files(store_dir):
    """Every file in the store, except each live daemon's lock (`.tmp/proc-<hex>.lock`)."""
    tmp = os.path.join(store_dir, ".tmp")
    return [os.path.join(dp, f) for dp, _, fs in os.walk(store_dir) for f in fs
            if not (dp == tmp and f.endswith(".lock"))]


def store_temp_files(store_dir):
    tmp = os.path.join(store_dir, ".tmp") + os.sep
    return [p for p in store_files(store_dir) if p.startswith(tmp)]


class SparseOutputsTest(E2ETestCase):
    """A sparse file costs the sandbox nothing; it must cost the host's disk nothing either."""

    def test_sparse_outputs_do_not_fill_the_host_disk(self):
        self.require_spawned("looks at the daemon's file store on disk")
        before = store_disk_bytes(self.daemon.store_dir)
        code = ("for i in range(3):\n"
                "    with open(f'big{i}.bin', 'wb') as f:\n"
                "        f.write(b'x')\n"
                "        f.truncate(30 << 20)\n"
                "print('ok')")
        ids = []
        for _ in range(3):  # three small requests: 270 MB apparent
            res = self.execute(code)
            self.assertEqual(res["stdout"], "ok\n", res)
            self.assertEqual(sorted(f["path"] for f in res["files"]),
                             ["big0.bin", "big1.bin", "big2.bin"], res)
            self.assertFalse(res["files_truncated"], res)
            ids += [f["file_id"] for f in res["files"]]
        grown = store_disk_bytes(self.daemon.store_dir) - before
        self.assertLess(grown, 2 << 20, f"270 MB of sparse outputs took {grown} bytes of disk")
        sizes = {f["file_id"]: f["size_bytes"] for f in self.client.get("/v1/files").json["files"]}
        for fid in ids:
            self.assertEqual(sizes.get(fid), 30 << 20, "the stored file lost its apparent size")
        body = self.download(ids[0]).body
        self.assertEqual(len(body), 30 << 20)
        self.assertTrue(body[:1] == b"x" and body.count(0) == len(body) - 1, "contents differ")
        for fid in ids:
            self.client.delete(f"/v1/files/{fid}")


class CollectionLimitsTest(E2ETestCase):
    """What does not fit is left out, the rest still comes, and the response says so."""

    def test_file_over_the_byte_limit_does_not_hide_small_ones(self):
        # 50 GiB sparse files between small ones: whatever order the walk takes, one comes
        # before a small file.
        code = ("for i in range(3):\n"
                "    open(f'small{i}.txt', 'w').write(str(i))\n"
                "    if i < 2:\n"
                "        with open(f'huge{i}.bin', 'wb') as f:\n"
                "            f.truncate(50 << 30)\n"
                "print('ok')")
        res = self.execute(code)
        self.assertEqual(res["stdout"], "ok\n", res)
        self.assertEqual(sorted(f["path"] for f in res["files"]),
                         ["small0.txt", "small1.txt", "small2.txt"], res)
        self.assertTrue(res["files_truncated"], "files were left out but files_truncated is false")
        for f in res["files"]:
            self.client.delete(f"/v1/files/{f['file_id']}")

    def test_deeply_nested_file_is_returned_or_reported(self):
        deep = "/".join(["d"] * 70) + "/deep.txt"
        res = self.execute(f"import os\nos.makedirs(os.path.dirname({deep!r}))\n"
                           f"open({deep!r}, 'w').write('deep')\n"
                           "open('top.txt', 'w').write('top')")
        paths = {f["path"] for f in res["files"]}
        self.assertIn("top.txt", paths, res)
        self.assertTrue(deep in paths or res["files_truncated"],
                        f"a file 70 directories deep was dropped silently: {res}")
        for f in res["files"]:
            self.client.delete(f"/v1/files/{f['file_id']}")


class StoreQuotaTest(E2ETestCase):
    """FILE_STORAGE_MAX_MB caps the store: what does not fit is refused whole, with a reason."""
    daemon_env = {"FILE_STORAGE_MAX_MB": "4"}

    def setUp(self):
        super().setUp()
        for f in self.client.get("/v1/files").json["files"]:
            self.client.delete(f"/v1/files/{f['file_id']}")

    def assertNothingHalfWritten(self, expect_ids):
        listed = sorted(f["file_id"] for f in self.client.get("/v1/files").json["files"])
        self.assertEqual(listed, sorted(expect_ids), "the store lists what it refused")
        if self.daemon:
            self.assertEqual(store_temp_files(self.daemon.store_dir), [],
                             "a refused file was left in the store's temp directory")

    def test_upload_over_the_quota_is_507_and_leaves_nothing(self):
        first = self.upload_ok("a.bin", os.urandom(3 << 20))
        r = self.client.upload("b.bin", os.urandom(2 << 20))
        self.assertDetail(r, 507, contains="FILE_STORAGE_MAX_MB")
        self.assertNothingHalfWritten([first])
        # Room again once a file is deleted.
        self.assertEqual(self.client.delete(f"/v1/files/{first}").status, 204)
        second = self.upload_ok("b.bin", os.urandom(2 << 20))
        self.assertNothingHalfWritten([second])

    def test_outputs_over_the_quota_are_left_out_and_reported(self):
        first = self.upload_ok("a.bin", os.urandom(3 << 20))
        res = self.execute("import os\nopen('small.txt', 'w').write('s')\n"
                           "open('out.bin', 'wb').write(os.urandom(2 << 20))\nprint('ok')")
        self.assertEqual(res["stdout"], "ok\n", res)
        self.assertEqual([f["path"] for f in res["files"]], ["small.txt"], res)
        self.assertTrue(res["files_truncated"], "an output was left out but not reported")
        self.assertNothingHalfWritten([first, res["files"][0]["file_id"]])


class DeleteRaceTest(E2ETestCase):
    """A file deleted while an execution stages it (or while it downloads): the request either
    sees it whole or answers 404, never 500."""

    def test_delete_during_staging_and_download(self):
        data = os.urandom(4 << 20)
        seen = {}
        for _ in range(20):
            fid = self.upload_ok("in.bin", data)
            out = {}

            def execute():
                out["exec"] = self.client.post_json("/v1/execute", {
                    "code": "import os\nprint(os.path.getsize('in.bin'))",
                    "files": [{"path": "in.bin", "file_id": fid}]})

            def download():
                out["get"] = self.download(fid)

            threads = [threading.Thread(target=execute), threading.Thread(target=download)]
            for t in threads:
                t.start()
            self.client.delete(f"/v1/files/{fid}")
            for t in threads:
                t.join()
            r = out["exec"]
            self.assertIn(r.status, (200, 404), f"execute racing a delete: {r!r}")
            if r.status == 200:
                self.assertEqual(r.json["stdout"], f"{len(data)}\n", r)
            g = out["get"]
            self.assertIn(g.status, (200, 404), f"download racing a delete: {g!r}")
            if g.status == 200:
                self.assertTrue(g.body == data, "a download racing a delete got other bytes")
            seen[(r.status, g.status)] = seen.get((r.status, g.status), 0) + 1
        self.assertHealthy()


# Debian's interpreter, where apt's python3-httpx lives (scripts/install-deps.sh): the test
# runner itself may be another Python.
DEBIAN_PYTHON = "/usr/bin/python3"

HTTPX_POST = """
import httpx, json, sys
url, kind, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    if kind == "upload":
        r = httpx.post(url + "/v1/files", files={"file": ("big.bin", b"\\0" * (mb << 20))},
                       timeout=120)
    else:
        body = b'{"code": "' + b"#" * (mb << 20) + b'"}'
        r = httpx.post(url + "/v1/execute", content=body,
                       headers={"content-type": "application/json"}, timeout=120)
    print(json.dumps({"status": r.status_code, "body": r.text}))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
"""


class RealClientLimitsTest(E2ETestCase):
    """Over-limit bodies from a client that sends the whole body before reading the answer
    (httpx, requests): the answer must reach it, not a broken pipe."""

    def post_with_httpx(self, kind, mb):
        probe = subprocess.run([DEBIAN_PYTHON, "-c", "import httpx"], capture_output=True)
        if probe.returncode != 0:
            self.skip_or_fail(f"{DEBIAN_PYTHON} has no httpx (apt install python3-httpx)")
        out = subprocess.run([DEBIAN_PYTHON, "-c", HTTPX_POST, f"http://{self.host}:{self.port}",
                              kind, str(mb)], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertNotIn("error", got, f"httpx got no answer to a {mb} MB {kind}")
        return got

    def test_101mb_upload_gets_413_with_detail(self):
        # The onyx suite's test_upload_file_size_limit, against the default 100 MB limit.
        got = self.post_with_httpx("upload", 101)
        self.assertEqual(got["status"], 413, got)
        self.assertEqual(json.loads(got["body"]), {"detail": "File size exceeds maximum of 100 MB"})
        self.assertHealthy()

    def test_json_body_over_the_limit_gets_413_with_detail(self):
        got = self.post_with_httpx("json", 20)  # MAX_REQUEST_BODY_MB is 16 by default
        self.assertEqual(got["status"], 413, got)
        self.assertIn("detail", json.loads(got["body"]), got)
        self.assertHealthy()


class SharedStoreTest(E2ETestCase):
    """Replicas sharing one FILE_STORAGE_DIR (a ReadWriteMany volume): a file uploaded through
    one is served and staged by the other, a delete through either is seen by both, and the
    quota counts what both stored."""

    def shared_store(self):
        self.require_host_daemon("starts daemons of its own on one directory")
        shared = tempfile.mkdtemp(prefix="ci-e2e-shared-")
        self.addCleanup(shutil.rmtree, shared, True)
        store = os.path.join(shared, "store")
        os.mkdir(store)
        if Config.as_user:
            pw = pwd.getpwnam(Config.as_user)
            for d in (shared, store):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        return store

    def start_replica(self, store):
        d = Daemon({"FILE_STORAGE_DIR": store, "FILE_STORAGE_MAX_MB": "4", "WARM_POOL_SIZE": "0"})
        self.addCleanup(d.cleanup)
        self.addCleanup(d.stop)  # cleanups run last-in first: stopped, then removed
        d.start()
        return d, Client(d.host, d.port, self._exchanges)

    def test_two_daemons_share_one_store(self):
        store = self.shared_store()
        (da, a), (db, b) = self.start_replica(store), self.start_replica(store)
        daemons = [da, db]

        data = os.urandom(3 << 20)
        r = a.upload("a.bin", data)
        self.assertEqual(r.status, 201, r)
        fid = r.json["file_id"]
        r = b.get(f"/v1/files/{fid}")
        self.assertEqual(r.status, 200, f"a file uploaded through one replica: {r!r}")
        self.assertTrue(r.body == data, "the other replica served other bytes")
        self.assertEqual([f["file_id"] for f in b.get("/v1/files").json["files"]], [fid])
        r = b.post_json("/v1/execute", {"code": "import os\nprint(os.path.getsize('in.bin'))",
                                        "files": [{"path": "in.bin", "file_id": fid}]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["stdout"], f"{len(data)}\n", r.json)

        # 3 of 4 MB are used through a: 2 MB more do not fit through b.
        r = b.upload("b.bin", os.urandom(2 << 20))
        self.assertDetail(r, 507, contains="FILE_STORAGE_MAX_MB")
        # Deleted through b: gone through a, and room again there.
        self.assertEqual(b.delete(f"/v1/files/{fid}").status, 204)
        self.assertEqual(a.get(f"/v1/files/{fid}").status, 404)
        self.assertEqual(a.get("/v1/files").json["files"], [])
        r = a.upload("c.bin", os.urandom(2 << 20))
        self.assertEqual(r.status, 201, f"the room freed through the other replica: {r!r}")
        self.assertEqual(b.delete(f"/v1/files/{r.json['file_id']}").status, 204)

        for d in daemons:
            rc, _ = d.stop()
            self.assertEqual(rc, 0, d.log_since(0, tail=40))
        self.assertEqual(os.listdir(os.path.join(store, ".tmp")), [],
                         "a stopped replica left its temp directory or lock")

    def test_a_starting_replica_leaves_an_upload_in_progress_alone(self):
        store = self.shared_store()
        _, a = self.start_replica(store)
        data = os.urandom(2 << 20)
        ctype, body = a.multipart([("file", "slow.bin", data, None)])
        head = (f"POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        resume = threading.Event()

        def chunks():  # half the body, then a pause while the other replica starts
            half = len(body) // 2
            for i in range(0, half, 65536):
                yield body[i:min(i + 65536, half)]
            resume.wait(60)
            for i in range(half, len(body), 65536):
                yield body[i:i + 65536]

        out = {}
        sender = threading.Thread(target=lambda: out.update(r=a.raw_request(head, chunks())))
        sender.start()
        self.addCleanup(sender.join)
        self.addCleanup(resume.set)
        uploading = wait_until(lambda: [p for p in store_temp_files(store)
                                        if os.path.basename(p).startswith("upload-") and
                                        os.path.getsize(p) > 0], 30)
        self.assertTrue(uploading, "the upload's temp file never appeared")
        _, b = self.start_replica(store)  # its startup cleans up after dead replicas only
        self.assertTrue(os.path.exists(uploading[0]), "a starting replica deleted a live upload")
        resume.set()
        sender.join(60)
        r, note = out["r"]
        self.assertIsNotNone(r, note)
        self.assertEqual(r.status, 201, r)
        got = b.get(f"/v1/files/{r.json['file_id']}")
        self.assertEqual(got.status, 200, got)
        self.assertTrue(got.body == data, "the upload lost bytes")
