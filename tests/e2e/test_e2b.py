"""The E2B front (docs/e2b.md) through E2B's official JS SDK, pinned in tests/e2b (installed by
`npm ci` there, which scripts/install-deps.sh runs) and run as tests/e2b/e2b_client.mjs with
E2B_API_URL and E2B_SANDBOX_URL pointing at the daemon: the control plane's create, info, list
by metadata and by page, set timeout, connect, kill, a sandbox's own end at its timeout, the
options refused by name, and another key seeing none of it. What the SDK cannot send (bad JSON,
wrong types, unknown paths, no key) is checked with raw HTTP.

Without Node.js or the SDK the SDK's cases skip, and fail under CI_E2E_NO_SKIP=1."""

import json
import os
import subprocess
import threading
import time
import uuid

from harness import Client, Config, Daemon, E2ETestCase
from test_auth import ALICE, BOB, KEYS_FILE  # the same keys, so the same daemon as test_auth

E2B_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2b")
SDK_CLIENT = os.path.join(E2B_TESTS, "e2b_client.mjs")
SDK_PACKAGE = os.path.join(E2B_TESTS, "node_modules", "e2b", "package.json")
SDK_TIMEOUT_S = 180


class E2bCase(E2ETestCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE}

    def base_url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def sdk(self, scenario, *args, key=ALICE):
        """The steps e2b_client.mjs printed for `scenario`, by name ("end" once it finished)."""
        self.require_node_client("the E2B SDK", SDK_PACKAGE)
        env = dict(os.environ, E2B_API_URL=self.base_url(), E2B_SANDBOX_URL=self.base_url(),
                   E2B_API_KEY=key)
        proc = subprocess.run(["node", SDK_CLIENT, scenario, *args], capture_output=True,
                              text=True, timeout=SDK_TIMEOUT_S, stdin=subprocess.DEVNULL, env=env)
        self._exchanges.append(f"e2b_client.mjs {scenario} {' '.join(args)}\n  -> exit "
                               f"{proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
        steps = {}
        for line in proc.stdout.splitlines():
            o = json.loads(line)
            o.pop("took_ms", None)  # for the log above, when a step is slow
            steps["end" if o.get("end") else o["step"]] = o
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("end", steps, proc.stdout + proc.stderr)
        return steps

    def api(self, key=ALICE):
        return Client(self.host, self.port, headers={"X-API-KEY": key} if key else {})


class E2bControlPlaneTest(E2bCase):
    def test_a_sandbox_lives_is_found_extended_and_killed(self):
        tag = uuid.uuid4().hex
        s = self.sdk("lifecycle", tag)
        sid = s["create"]["sandboxId"]
        info = s["info"]
        self.assertEqual((info["sandboxId"], info["templateId"], info["state"]),
                         (sid, "base", "running"))
        self.assertEqual(info["metadata"], {"tag": tag, "a b": "c&d"})
        self.assertEqual(info["envdVersion"], "0.5.7")
        self.assertGreaterEqual(info["memoryMB"], 1)
        self.assertEqual(s["list"]["ids"], [sid])
        self.assertEqual(s["list_escaped"]["ids"], [sid])
        self.assertEqual(s["list_other_tag"]["ids"], [])
        # setTimeout(30 s) moved the end sooner; connect(60 s) only ever extends it.
        self.assertLess(s["set_timeout"]["endAt"], info["endAt"])
        self.assertEqual(s["connect"]["sandboxId"], sid)
        self.assertGreater(s["connect"]["endAt"], s["set_timeout"]["endAt"])
        self.assertEqual(s["kill"], {"step": "kill", "killed": True})
        self.assertEqual(s["kill_again"], {"step": "kill_again", "killed": False})
        self.assertEqual(s["info_after"]["error"], "SandboxNotFoundError")
        self.assertEqual(s["connect_after"]["error"], "SandboxNotFoundError")
        # The sandbox was a session of the key: gone there too.
        sessions = Client(self.host, self.port,
                          headers={"Authorization": f"Bearer {ALICE}"}).get("/v1/sessions")
        self.assertNotIn(sid, json.dumps(sessions.json))

    def test_a_sandbox_ends_at_its_timeout_with_nobody_calling(self):
        s = self.sdk("expires")
        self.assertIn("gone", s, s)
        self.assertEqual(s["gone"]["error"], "SandboxNotFoundError")
        self.assertGreaterEqual(s["gone"]["after_ms"], 2000)

    def test_what_cannot_be_honoured_is_refused_by_name(self):
        s = self.sdk("refused")
        for step, says in (("internet", "allow_internet_access"), ("template", "no-such-template"),
                           ("auto_pause", "autoPause"), ("too_long", "timeout")):
            self.assertEqual(s[step].get("error"), "SandboxError", s[step])
            self.assertIn("400: ", s[step]["message"])
            self.assertIn(says, s[step]["message"])

    def test_listing_pages(self):
        s = self.sdk("paging", uuid.uuid4().hex)
        made = s["create"]["ids"]
        self.assertEqual(s["pages"]["pages"], [made[:2], made[2:]])

    def test_another_key_sees_none_of_it(self):
        sid = self.sdk("keep", uuid.uuid4().hex)["create"]["sandboxId"]
        try:
            s = self.sdk("foreign", sid, key=BOB)
            for step in ("info", "connect", "set_timeout"):
                self.assertEqual(s[step].get("error"), "SandboxNotFoundError", s[step])
            self.assertNotIn(sid, s["list"]["ids"])
            self.assertEqual(s["kill"]["killed"], False)
            # Still alice's, still running.
            self.assertEqual(self.api().get(f"/sandboxes/{sid}").status, 200)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


def envelope(message, flags=0):
    """One Connect envelope: [flags u8][length u32 big-endian][message]."""
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    return bytes([flags]) + len(data).to_bytes(4, "big") + data


def envelopes(body):
    """A Connect stream's envelopes as (flags, JSON) pairs."""
    out = []
    while body:
        n = int.from_bytes(body[1:5], "big")
        out.append((body[0], json.loads(body[5:5 + n])))
        body = body[5 + n:]
    return out


class E2bSandboxPlaneTest(E2bCase):
    def test_health(self):
        s = self.sdk("sandbox_plane")
        self.assertEqual(s["running"].get("running"), True, s["running"])
        self.assertEqual(s["running_after_kill"].get("running"), False, s["running_after_kill"])
        self.assertEqual(s["read"].get("error"), "FileNotFoundError", s["read"])

    def test_the_token_is_the_key(self):
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 60})
        self.assertEqual(r.status, 201, r.body)
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        try:
            plane = Client(self.host, self.port)  # no API key: the token alone
            def call(method, path, token_header, body=None, ctype="application/json"):
                headers = {"E2b-Sandbox-Id": sid, "Content-Type": ctype, **token_header}
                return plane.request(method, path, body=body, headers=headers)
            self.assertEqual(call("GET", "/health", {"X-Access-Token": token}).status, 204)
            self.assertEqual(call("GET", "/health", {"E2B-Traffic-Access-Token": token}).status,
                             204)
            for wrong in ({}, {"X-Access-Token": token[:-1]}, {"X-Access-Token": token + "0"},
                          {"X-Access-Token": "0" * len(token)}):
                self.assertEqual(call("GET", "/health", wrong).status, 502, wrong)
                r = call("POST", "/process.Process/List", wrong, b"{}")
                self.assertEqual((r.status, r.json["code"]), (404, "not_found"), wrong)
            r = call("POST", "/process.Process/Start", {"X-Access-Token": token}, envelope({}),
                     "application/connect+json")
            # A streaming RPC's error is its stream's end: [0x02][u32 length][JSON].
            self.assertEqual(r.status, 200, r.body)
            [(flags, end)] = envelopes(r.body)
            self.assertEqual((flags, end["error"]["code"]), (2, "invalid_argument"), end)
            r = call("POST", "/process.Process/List", {"X-Access-Token": token}, b"{}")
            self.assertEqual((r.status, r.json), (200, {"processes": []}), r.body)
            r = call("GET", "/files?path=%2Fhome%2Fuser%2Fa", {"X-Access-Token": token})
            self.assertEqual((r.status, r.json["code"]), (404, 404), r.body)
            r = call("GET", "/frobnicate", {"X-Access-Token": token})
            self.assertEqual((r.status, r.json["code"]), (501, 501), r.body)
            self.assertIn("/frobnicate", r.json["message"])
            # Without the header, /health is the daemon's own.
            self.assertEqual(plane.get("/health").status, 200)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


class E2bProcessTest(E2bCase):
    """envd's process.Process: through the SDK, and what the SDK never sends."""

    def test_commands(self):
        s = self.sdk("commands")
        self.assertEqual(s["run"], {"step": "run", "exitCode": 0, "stderr": "err\n",
                                    "stdout": "out\n/home/user\nuser /home/user c m\n"})
        self.assertEqual(s["cwd"]["stdout"], "/tmp\nmade\n")
        self.assertEqual(s["relative_cwd"]["stdout"], "/home/user/sub\n")
        self.assertEqual((s["exit_code"]["error"], s["exit_code"]["exitCode"],
                          s["exit_code"]["stdout"]), ("CommandExitError", 3, "before\n"))
        self.assertEqual(s["no_cwd"]["error"], "InvalidArgumentError", s["no_cwd"])
        self.assertIn("/no/such/dir", s["no_cwd"]["message"])
        self.assertIn("permission_denied", s["root"]["message"])
        self.assertEqual((s["streams"]["out"], s["streams"]["err"]), (["1\n", "2\n", "3\n"],
                                                                        ["e\n"]))
        pid = s["background"]["pid"]
        self.assertEqual(s["list"]["processes"], [
            {"pid": pid, "cmd": "/bin/bash",
             "args": ["-l", "-c", "read line; echo got:$line; exec sleep 600"]}])
        self.assertEqual(s["stdin"]["stdout"], "got:abc\n")
        self.assertEqual(s["connect"], {"step": "connect", "pid": pid, "listed": [pid]})
        self.assertEqual(s["kill"]["killed"], True)
        self.assertEqual((s["killed"]["error"], s["killed"]["exitCode"]), ("CommandExitError", -1))
        self.assertEqual(s["kill_again"]["killed"], False)
        self.assertEqual(s["list_after"]["pids"], [])
        # Connect-Timeout-Ms is the process's lifetime: it is killed, and the client gives up.
        self.assertEqual(s["timeout"]["error"], "TimeoutError", s["timeout"])
        self.assertLess(s["timeout"]["ms"], 10_000)
        self.assertEqual(s["list_end"]["pids"], [])

    def plane(self, sid, token):
        plane = Client(self.host, self.port)

        def call(method, body, streaming=False):
            headers = {"E2b-Sandbox-Id": sid, "X-Access-Token": token,
                       "Content-Type": "application/connect+json" if streaming
                       else "application/json"}
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            return plane.request("POST", f"/process.Process/{method}", body=data,
                                 headers=headers)
        return call

    def test_a_process_outlives_session_calls_and_their_kills(self):
        s = self.sdk("keep_process")
        sid, pid = s["create"]["sandboxId"], s["create"]["pid"]
        token = self.api().get(f"/sandboxes/{sid}").json["envdAccessToken"]
        call = self.plane(sid, token)
        try:
            # The same sandbox as a session of the key: a call past its timeout kills what it
            # started, and spares the E2B process.
            onyx = Client(self.host, self.port, headers={"Authorization": f"Bearer {ALICE}"})
            r = onyx.post_json(f"/v1/sessions/{sid}/bash", {"cmd": "sleep 30 & sleep 30",
                                                            "timeout_ms": 500})
            self.assertEqual(r.status, 200, r.body)
            r = call("List", {})
            self.assertEqual([p["pid"] for p in r.json["processes"]], [pid], r.body)
            r = onyx.post_json(f"/v1/sessions/{sid}/bash", {"cmd": f"kill -0 {pid} && echo alive"})
            self.assertIn("alive", r.json["stdout"], r.body)
            r = call("SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGTERM"})
            self.assertEqual((r.status, r.json), (200, {}), r.body)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)

    def test_what_the_sdk_never_sends(self):
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 60})
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        call = self.plane(sid, token)
        start = {"process": {"cmd": "/bin/true"}}
        try:
            for body, says in ((envelope(start, flags=1), "compressed"),
                               (envelope(start)[:-1], "bytes"),
                               (envelope(start) * 2, "one message"),
                               (envelope(start, flags=2), "flags"),
                               (b"\0\0", "envelope"),
                               (envelope(b"{"), "not JSON"),
                               (envelope([1]), "object"),
                               (envelope({"process": {"cmd": 5}}), "process.cmd"),
                               (envelope({"process": {"cmd": "x", "args": "y"}}), "process.args"),
                               (envelope({"process": {"cmd": "x", "envs": {"A=B": "c"}}}), "A=B"),
                               (envelope({"process": {"cmd": "x"}, "pty": {}}), "PTY")):
                with self.subTest(says=says):
                    r = call("Start", body, streaming=True)
                    self.assertEqual(r.status, 200, r.body)
                    [(flags, end)] = envelopes(r.body)
                    self.assertEqual(flags, 2)
                    self.assertIn(says, end["error"]["message"])
            for method, body, status, code, says in (
                    ("List", b"{", 400, "invalid_argument", "not JSON"),
                    ("SendInput", {"process": {"pid": 999999}, "input": {"stdin": "eA=="}}, 404,
                     "not_found", "999999"),
                    ("SendInput", {"process": {"pid": 1}, "input": {"stdin": "%%%"}}, 400,
                     "invalid_argument", "base64"),
                    ("SendSignal", {"process": {"tag": "nope"}, "signal": "SIGNAL_SIGKILL"}, 404,
                     "not_found", "nope"),
                    ("SendSignal", {"process": {"pid": 2}, "signal": "SIGNAL_UNSPECIFIED"}, 400,
                     "invalid_argument", "signal"),
                    ("SendSignal", {"process": {}}, 400, "invalid_argument", "pid nor a tag"),
                    ("CloseStdin", {"process": {"pid": "x"}}, 400, "invalid_argument", "pid"),
                    ("Update", {}, 501, "unimplemented", "PTY"),
                    ("Frobnicate", {}, 501, "unimplemented", "Frobnicate")):
                with self.subTest(method=method, says=says):
                    r = call(method, body)
                    self.assertEqual((r.status, r.json["code"]), (status, code), r.body)
                    self.assertIn(says, r.json["message"])
            r = call("Connect", envelope({"process": {"pid": 999999}}), streaming=True)
            self.assertEqual(envelopes(r.body)[0][1]["error"]["code"], "not_found", r.body)
            # The stream of a quick process: its start, its output, its end, the end of stream.
            r = call("Start", envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "echo hi"]}}),
                     streaming=True)
            events = envelopes(r.body)
            self.assertEqual(events[-1], (2, {}), r.body)
            self.assertIn("start", events[0][1]["event"])
            self.assertEqual(events[1][1]["event"], {"data": {"stdout": "aGkK"}})
            self.assertEqual(events[-2][1]["event"]["end"],
                             {"exitCode": 0, "exited": True, "status": "exit status 0"})
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


class E2bFileTest(E2bCase):
    """envd's files: /files both ways and filesystem.Filesystem, through the SDK and raw."""

    def test_files_both_ways_and_the_filesystem(self):
        s = self.sdk("files")
        home = "/home/user"
        self.assertEqual(s["write"]["info"], {"path": f"{home}/notes/a.txt", "name": "a.txt",
                                              "type": "file"})
        self.assertEqual(s["read"]["text"], "hello\n")
        self.assertEqual(s["read_run"]["out"], "hello\nmine\n")  # the same file, the same user
        self.assertEqual((s["read_bytes"]["size"], s["read_bytes"]["same"]), (3 << 20, True))
        self.assertEqual(s["read_gzip"]["size"], 7000)
        self.assertEqual(s["read_stream"]["text"], "part 0\npart 1\npart 2\npart 3\n")
        self.assertEqual([i["path"] for i in s["write_many"]["infos"]],
                         [f"{home}/m/1.txt", "/tmp/2.txt"])
        self.assertEqual((s["read_empty"]["text"], s["read_empty"]["bytes"]), ("", 0))
        listed = {e["name"]: e for e in s["list"]["entries"]}
        self.assertEqual(sorted(listed), ["big.bin", "empty.txt", "m", "notes", "streamed.txt",
                                          "z.txt"])
        # The owner's name is the sandbox's passwd's: the fake Kubernetes API server's pods
        # have the host's, without `user`.
        self.assertIn(listed["big.bin"].pop("owner"), ("user", "65532"))
        self.assertEqual(listed["big.bin"], {"name": "big.bin", "type": "file",
                                             "path": f"{home}/big.bin", "size": 3 << 20,
                                             "permissions": "-rw-r--r--", "modified": True})
        self.assertEqual((listed["m"]["type"], listed["m"]["permissions"][0]), ("dir", "d"))
        self.assertIn(f"{home}/m/1.txt", s["list_depth"]["names"])
        self.assertEqual((s["info"]["path"], s["info"]["size"]), (f"{home}/notes/a.txt", 6))
        self.assertEqual((s["exists"]["yes"], s["exists"]["no"]), (True, False))
        self.assertEqual((s["make_dir"]["made"], s["make_dir"]["again"]), (True, False))
        self.assertEqual(s["rename"]["path"], f"{home}/moved/b.txt")
        self.assertEqual(s["remove"]["exists"], False)
        for step in ("read_missing", "list_missing", "remove_missing"):
            self.assertEqual(s[step].get("error"), "FileNotFoundError", s[step])
        self.assertEqual(s["read_dir"].get("error"), "InvalidArgumentError", s["read_dir"])
        self.assertEqual(s["write_over_dir"].get("error"), "InvalidArgumentError")
        # The root is read-only: the kernel says so, as the sandbox's user.
        self.assertIn("/etc/passwd: Read-only file system", s["write_outside"]["message"])
        self.assertIn("permission_denied", s["list_as_root"]["message"])
        events = {(e["name"], e["type"]) for e in s["watch"]["events"]}
        # An upload lands by a rename over the name: a create, as for a file moved in. Events in
        # a directory made a moment earlier may come before its watch (inotify's race, envd's
        # too): the recursive one checked is in a directory made long before.
        for seen in (("notes", "create"), ("big.bin", "create"), ("m", "create"),
                     ("d1", "create"), ("notes/a.txt", "rename"), ("d1", "remove")):
            self.assertIn(seen, events)
        self.assertFalse([e for e in events if ".upload-" in e[0]], events)

    def files_plane(self, sid, token):
        plane = Client(self.host, self.port)

        def call(method, path, body=b"", headers=None):
            h = {"E2b-Sandbox-Id": sid, "X-Access-Token": token, **(headers or {})}
            return plane.request(method, path, body=body, headers=h)
        return call

    def test_what_the_sdk_never_sends(self):
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 120})
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        call = self.files_plane(sid, token)
        octet = {"Content-Type": "application/octet-stream"}
        rpc = {"Content-Type": "application/json"}
        try:
            r = call("POST", "/files?path=keep.txt", b"kept", octet)
            self.assertEqual((r.status, r.json[0]["path"]), (200, "/home/user/keep.txt"), r.body)
            form = {"Content-Type": "multipart/form-data; boundary=XX"}
            for path, body, headers, status, says in (
                    ("/files?path=keep.txt", b"not gzip", {**octet, "Content-Encoding": "gzip"},
                     400, "gzip"),
                    ("/files?path=keep.txt", b"x", {**octet, "Content-Encoding": "br"}, 400, "br"),
                    ("/files?path=keep.txt", b"--XX\r\nContent-Disposition: form-data; "
                     b"name=\"file\"; filename=\"a\"\r\n\r\ncut", form, 400, "multipart"),
                    ("/files", b"--XX\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\n"
                     b"v\r\n--XX--\r\n", form, 400, "'file'"),
                    ("/files", b"x", octet, 400, "path"),
                    ("/files?path=keep.txt&username=root", b"x", octet, 401, "root"),
                    ("/files?path=%2Fusr%2Fbin%2Fx", b"x", octet, 403, "/usr/bin/x")):
                with self.subTest(says=says):
                    r = call("POST", path, body, headers)
                    self.assertEqual((r.status, r.json["code"]), (status, status), r.body)
                    self.assertIn(says, r.json["message"])
            # Nothing of the failed uploads landed: the file is whole, no temporary is left.
            r = call("GET", "/files?path=keep.txt")
            self.assertEqual((r.status, r.body), (200, b"kept"))
            r = call("POST", "/filesystem.Filesystem/ListDir", b'{"path": "/home/user"}', rpc)
            self.assertEqual([e["name"] for e in r.json["entries"]], ["keep.txt"], r.body)
            for path, status in (("/files", 400), ("/files?path=%2Fdev%2Fzero", 400),
                                 ("/files?path=%2Fproc%2Fself", 400),
                                 ("/files?path=%2Fnope", 404),
                                 ("/files?path=x&username=nobody", 401)):
                r = call("GET", path)
                self.assertEqual((r.status, r.json["code"]), (status, status), (path, r.body))
            for method, body, status, code, says in (
                    ("Stat", b"{", 400, "invalid_argument", "not JSON"),
                    ("Stat", b'{"path": 5}', 400, "invalid_argument", "path"),
                    ("Stat", b'{"path": "a\\u0000b"}', 400, "invalid_argument", "NUL"),
                    ("ListDir", b'{"path": "/", "depth": -1}', 400, "invalid_argument", "depth"),
                    ("ListDir", b'{"path": "keep.txt"}', 400, "invalid_argument", "directory"),
                    ("Move", b'{"source": "keep.txt"}', 400, "invalid_argument", "destination"),
                    ("Move", b'{"source": "nope", "destination": "x"}', 404, "not_found", "nope"),
                    ("MakeDir", b'{"path": "keep.txt"}', 400, "invalid_argument", "not a directory"),
                    ("Remove", b'{"path": "/etc"}', 403, "permission_denied", "/etc"),
                    ("CreateWatcher", b'{"path": "/"}', 501, "unimplemented", "WatchDir"),
                    ("Frobnicate", b"{}", 501, "unimplemented", "Frobnicate")):
                with self.subTest(method=method, says=says):
                    r = call("POST", f"/filesystem.Filesystem/{method}", body, rpc)
                    self.assertEqual((r.status, r.json["code"]), (status, code), r.body)
                    self.assertIn(says, r.json["message"])
            r = call("POST", "/filesystem.Filesystem/WatchDir", envelope({"path": "/nope"}),
                     {"Content-Type": "application/connect+json"})
            self.assertEqual(envelopes(r.body)[0][1]["error"]["code"], "not_found", r.body)
            # A full disk is 507, and the file written over stays as it was.
            self.fill_disk(sid, token)
            r = call("POST", "/files?path=keep.txt", b"y" * (2 << 20), octet)
            self.assertEqual((r.status, r.json["code"]), (507, 507), r.body)
            self.assertEqual(call("GET", "/files?path=keep.txt").body, b"kept")
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)

    def fill_disk(self, sid, token):
        """Fills the home's tmpfs (WORKSPACE_SIZE_MB) but for a few KiB, with a process."""
        plane = Client(self.host, self.port)
        headers = {"E2b-Sandbox-Id": sid, "X-Access-Token": token,
                   "Content-Type": "application/connect+json"}
        cmd = "head -c 2000000000 /dev/zero > /home/user/fill 2>/dev/null; true"
        r = plane.request("POST", "/process.Process/Start", headers=headers,
                          body=envelope({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}}))
        self.assertEqual(envelopes(r.body)[-1], (2, {}), r.body)
        return r


class E2bCodeTest(E2bCase):
    """The code interpreter (runCode, contexts) through @e2b/code-interpreter, and raw."""

    def test_run_code_with_state_rich_results_errors_and_contexts(self):
        s = self.sdk("code")
        self.assertEqual((s["state"]["text"], s["state"]["results"][0]["main"]), ("42", True))
        self.assertEqual(s["string"]["text"], "hi")
        frame = s["dataframe"]["results"][0]
        self.assertEqual(frame["formats"], ["html"])
        self.assertIn("<div>", frame["html"])
        self.assertEqual(s["figure"]["stdout"], ["drawn\n"])
        [figure] = s["figure"]["results"]
        self.assertEqual((figure["main"], figure["formats"], figure["png"]),
                         (False, ["png"], "iVBORw0KGgoA"))  # a PNG's signature, base64
        error = s["error"]["error"]
        self.assertEqual((error["name"], error["value"]), ("ZeroDivisionError", "division by zero"))
        self.assertIn('File "<cell', error["traceback"])
        self.assertIn("return 1 / 0", error["traceback"])
        self.assertNotIn("<string>", error["traceback"])  # the driver's frames are cut
        self.assertEqual(s["streams"], {"step": "streams", "out": "a\nsub\n", "err": "b\n",
                                        "results": ["7", "8"]})
        self.assertEqual((s["env"]["text"], s["env_after"]["results"]), ("v1", []))
        ctx = s["context"]
        self.assertEqual((ctx["cwd"], ctx["own"], ctx["listed"], ctx["restarted"], ctx["gone"]),
                         ("/tmp", "('/tmp', False)", True, "False", True))
        self.assertEqual(ctx["removed"]["error"], "NotFoundError")
        timeout = s["timeout"]
        self.assertEqual(timeout["timedOut"]["error"], "TimeoutError")
        self.assertEqual(timeout["after"]["text"], "41")  # interrupted, the context kept its state
        self.assertIn("400", s["language"]["message"])
        js = s["js"]
        self.assertEqual((js["value"]["text"], js["out"]), ("42", ["from node\n"]))
        self.assertEqual(js["error"]["error"]["name"], "TypeError")
        self.assertIn("at g (<cell 3>:1:", js["error"]["error"]["traceback"])
        self.assertNotIn("[eval]", js["error"]["error"]["traceback"])  # the kernel's frames
        self.assertEqual(js["python"]["text"], "False")  # one context per language
        self.assertEqual((js["own"]["text"], js["language"]), ("[ '/tmp', 'undefined' ]",
                                                               "javascript"))
        # A cell past its timeout is interrupted; the context keeps its state.
        self.assertEqual((js["timedOut"]["error"], js["kept"]["text"]), ("TimeoutError", "40"))
        bash = s["bash"]
        self.assertEqual(("".join(bash["state"]["stdout"]), bash["state"].get("error")),
                         ("6\n/home/user\n", None))
        self.assertEqual(bash["failed"]["stdout"], ["\n"])  # ONLY was the last cell's alone
        self.assertIn("/nope", "".join(bash["failed"]["stderr"]))
        self.assertEqual(bash["failed"]["error"], {"name": "ExitCode", "value": "2",
                                                   "traceback": ""})
        self.assertEqual((bash["timedOut"]["error"], bash["kept"]["stdout"]),
                         ("TimeoutError", ["6\n"]))

    def test_what_the_sdk_never_sends(self):
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 60})
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        plane = Client(self.host, self.port)
        base = {"E2b-Sandbox-Id": sid, "Content-Type": "application/json"}
        with_token = {**base, "X-Access-Token": token}
        try:
            for body, says in ((b"{", "not JSON"), (b"[]", "object"), (b"{}", "'code'"),
                               (b'{"code": 1}', "'code'"),
                               (b'{"code": "1", "context_id": "a", "language": "python"}',
                                "not both"),
                               (b'{"code": "1", "env_vars": {"A=B": "c"}}', "env_vars"),
                               (b'{"code": "1", "env_vars": {"A": 1}}', "env_vars"),
                               (b'{"code": "1", "language": "cobol"}', "cobol")):
                with self.subTest(says=says):
                    r = plane.request("POST", "/execute", body=body, headers=with_token)
                    self.assertEqual(r.status, 400, r.body)
                    self.assertIn(says, r.body.decode())
            r = plane.request("POST", "/execute", body=b'{"code": "1", "context_id": "nope"}',
                              headers=with_token)
            self.assertEqual((r.status, r.body), (404, b"Context nope not found"))
            # /execute needs the token; /contexts takes the sandbox id alone, as the SDK sends it,
            # and a token that is sent must be the sandbox's.
            r = plane.request("POST", "/execute", body=b'{"code": "1"}', headers=base)
            self.assertEqual(r.status, 404, r.body)
            r = plane.request("GET", "/contexts", headers=base)
            self.assertEqual((r.status, r.json), (200, []), r.body)
            r = plane.request("GET", "/contexts", headers={**base, "X-Access-Token": "0" * 32})
            self.assertEqual(r.status, 404, r.body)
            r = plane.request("GET", "/contexts", headers={**base, "E2b-Sandbox-Id": sid + "0"})
            self.assertEqual(r.status, 404, r.body)
            # The stream: one JSON object per line, no blank line, end_of_execution last.
            cell = json.dumps({"code": "print(1)\n2"}).encode()
            r = plane.request("POST", "/execute", body=cell, headers=with_token)
            lines = r.body.decode().split("\n")
            self.assertEqual(lines[-1], "")
            types = [json.loads(line)["type"] for line in lines[:-1]]
            self.assertEqual(types, ["number_of_executions", "stdout", "result",
                                     "end_of_execution"], r.body)
            # A cell that writes forged lines on every descriptor it has (the interpreter's own
            # among them) only fools itself: the cell still ends with its own end, a line that is
            # not JSON is dropped, and the next cell is served.
            forged = ('import os\nfor fd in range(1, 12):\n    try:\n        os.write(fd, b\'{"type": '
                      '"end_of_execution", "nonce": "x"}\\nnot json\\n\')\n    except OSError:\n'
                      '        pass\n3')
            r = plane.request("POST", "/execute", body=json.dumps({"code": forged}).encode(),
                              headers=with_token)
            self.assertIn(b'"text":"3"', r.body)
            r = plane.request("POST", "/execute", body=b'{"code": "4"}', headers=with_token)
            self.assertIn(b'"text":"4"', r.body)
            for method, path in (("POST", "/contexts/nope/restart"), ("DELETE", "/contexts/nope")):
                r = plane.request(method, path, headers=base)
                self.assertEqual((r.status, r.body), (404, b"Context nope not found"))
            r = plane.request("POST", "/contexts", body=b'{"cwd": "/no/such"}', headers=base)
            self.assertEqual(r.status, 400, r.body)
            self.assertIn(b"/no/such", r.body)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


    def test_a_context_restarted_under_a_writing_cell_ends_it_cleanly(self):
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 60})
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        plane = Client(self.host, self.port)
        headers = {"E2b-Sandbox-Id": sid, "Content-Type": "application/json",
                   "X-Access-Token": token}
        try:
            ctx = plane.request("POST", "/contexts", body=b"{}", headers=headers).json["id"]
            loud = json.dumps({"context_id": ctx, "code": "import time\nwhile True:\n"
                               "    print('x' * 1000)\n    time.sleep(0.001)"}).encode()
            got = []
            t = threading.Thread(target=lambda: got.append(plane.request(
                "POST", "/execute", body=loud, headers=headers, timeout=60)))
            t.start()
            time.sleep(1)
            r = plane.request("POST", f"/contexts/{ctx}/restart", headers=headers)
            self.assertEqual(r.status, 200, r.body)
            t.join(60)
            lines = [json.loads(line) for line in got[0].body.decode().splitlines()]
            self.assertEqual(lines[-1], {"type": "end_of_execution"})
            self.assertIn("ContextRestarted", [m.get("name") for m in lines])
            r = plane.request("POST", "/execute", headers=headers,
                              body=json.dumps({"context_id": ctx, "code": "1"}).encode())
            self.assertIn(b'"text":"1"', r.body)
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)

    def test_kernels_killed_by_their_cells_start_afresh(self):
        """A cell that kills its own context (the whole process group, or the Python host from
        a child kernel) ends as ContextDied; the next cell gets a fresh kernel, and the other
        languages' contexts are untouched."""
        r = self.api().post_json("/v2/sandboxes", {"templateID": "base", "timeout": 60})
        sid, token = r.json["sandboxID"], r.json["envdAccessToken"]
        plane = Client(self.host, self.port)
        headers = {"E2b-Sandbox-Id": sid, "Content-Type": "application/json",
                   "X-Access-Token": token}

        def cell(language, code):
            r = plane.request("POST", "/execute", headers=headers,
                              body=json.dumps({"language": language, "code": code}).encode())
            self.assertEqual(r.status, 200, r.body)
            return [json.loads(line) for line in r.body.decode().splitlines()][1:-1]

        try:
            self.assertEqual(cell("python", "kept = 1"), [])
            for language, setup, kill, check, fresh in (
                    ("bash", "x=1", "kill -9 0", "echo ${x-gone}", "gone\n"),
                    ("javascript", "globalThis.y = 2", "process.kill(process.ppid, 'SIGKILL')",
                     "console.log(typeof y)", "undefined\n")):
                with self.subTest(language=language):
                    cell(language, setup)
                    [died] = cell(language, kill)
                    self.assertEqual(died["name"], "ContextDied", died)
                    self.assertEqual([m.get("text") for m in cell(language, check)], [fresh])
            [kept] = cell("python", "kept")
            self.assertEqual(kept["text"], "1")
        finally:
            self.assertEqual(self.api().delete(f"/sandboxes/{sid}").status, 204)


class E2bWireTest(E2bCase):
    """What the SDK never sends: each a clear E2B error ({"code", "message"}), the daemon up."""

    def assert_error(self, r, status, says):
        self.assertEqual(r.status, status, r.body)
        body = r.json
        self.assertEqual(body["code"], status)
        self.assertIn(says, body["message"])

    def test_refusals(self):
        api = self.api()
        cases = [
            (self.api(key=None).post_json("/v2/sandboxes", {"templateID": "base"}), 401,
             "X-API-KEY"),
            (self.api(key="wrong-" + ALICE).get("/v2/sandboxes"), 401, "Invalid API key"),
            (api.request("POST", "/v2/sandboxes", body=b"{",
                         headers={"Content-Type": "application/json"}),
             400, "not JSON"),
            (api.post_json("/v2/sandboxes", [1]), 400, "object"),
            (api.post_json("/v2/sandboxes", {}), 400, "templateID"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "timeout": "5"}), 400,
             "timeout"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "metadata": {"a": 1}}), 400,
             "metadata.a"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "envVars": {"1x": "y"}}), 400,
             "variable name"),
            (api.post_json("/v2/sandboxes", {"templateID": "base", "volumeMounts": [{}]}), 400,
             "volumeMounts"),
            (api.request("POST", "/v2/sandboxes", body=b"{}",
                         headers={"Content-Type": "text/plain"}), 415,
             "application/json"),
            (api.get("/sandboxes/code-session-nope"), 404, "not found"),
            (api.post_json("/sandboxes/code-session-nope/timeout", {"timeout": 5}), 404,
             "not found"),
            (api.get("/v2/sandboxes?limit=0"), 400, "limit"),
            (api.get("/v2/sandboxes?state=frozen"), 400, "state"),
            (api.get("/v2/sandboxes?nextToken=nope"), 400, "nextToken"),
            (api.get("/sandboxes/x/y/z"), 404, "not part of the API"),
            (api.request("PUT", "/v2/sandboxes"), 405, "GET or POST"),
        ]
        for r, status, says in cases:
            with self.subTest(status=status, says=says):
                self.assert_error(r, status, says)
        self.assertEqual(api.get("/v2/sandboxes").status, 200)

    def test_timeout_and_pause_of_a_live_sandbox(self):
        api = self.api()
        r = api.post_json("/v2/sandboxes", {"templateID": "code-interpreter-v1", "timeout": 60})
        self.assertEqual(r.status, 201, r.body)
        sid = r.json["sandboxID"]
        try:
            self.assert_error(api.post_json(f"/sandboxes/{sid}/timeout", {}), 400, "timeout")
            self.assert_error(api.post_json(f"/sandboxes/{sid}/timeout", {"timeout": 86400}),
                              400, "at most")
            self.assertEqual(api.post_json(f"/sandboxes/{sid}/timeout", {"timeout": 30}).status,
                             204)
            self.assert_error(api.post_json(f"/sandboxes/{sid}/pause", {"memory": 1}), 400,
                              "memory")
            self.assert_error(api.post_json(f"/sandboxes/{sid}/fork", {"count": 17}), 400, "count")
            self.assert_error(api.post_json(f"/sandboxes/{sid}/snapshots", {"name": 7}), 400,
                              "name")
            # Without EGRESS_ALLOW_MAX a sandbox has no network, nor a policy to update.
            r = api.request("PUT", f"/sandboxes/{sid}/network", body=b'{"allowOut": []}',
                            headers={"Content-Type": "application/json"})
            self.assert_error(r, 409, "no network")
            self.assert_error(api.get(f"/sandboxes/{sid}/metrics"), 501, "metrics")
            self.assert_error(api.get("/sandboxes/code-session-nope/metrics"), 404, "not found")
            self.assert_error(api.post_json(f"/sandboxes/{sid}/resume", {}), 409, "running")
        finally:
            self.assertEqual(api.delete(f"/sandboxes/{sid}").status, 204)


class E2bPauseTest(E2bCase):
    def test_pause_resume_fork_and_snapshots_through_the_sdk(self):
        tag = uuid.uuid4().hex
        s = self.sdk("pause", tag)
        sid = s["create"]["sandboxId"]
        self.assertEqual(s["prepare"], {"step": "prepare"}, s)
        self.assertEqual(s["pause_memory"]["paused"], True, s)
        self.assertEqual(s["pause_again"]["paused"], False, "409: already paused")
        self.assertEqual(s["info_paused"]["state"], "paused", s)
        self.assertEqual(s["list_paused"]["ids"], [sid])
        self.assertEqual(s["list_running"]["ids"], [])
        # A pod, or a rootless daemon's sandbox without a cgroup, is snapshotted, not frozen: the
        # code context starts again (E2B's cold boot).
        frozen = Config.expected_backend != "kubernetes" and not Config.as_user
        self.assertEqual(s["connect"]["file"], "kept", s)
        if frozen:
            self.assertEqual(s["connect"]["text"], "41", s)
        else:
            self.assertIn("x", s["connect"]["error"], s)
        self.assertEqual(s["info_resumed"]["state"], "running", s)
        self.assertEqual(s["pause_files"]["paused"], True, s)
        self.assertEqual((s["connect_files"]["text"], s["connect_files"]["file"]), ("51", "kept"),
                         "files only: the sandbox's processes restart, its files stay")
        forks = s["fork"]["forks"]
        self.assertEqual(len(forks), 3, s)
        self.assertEqual(len({f["id"] for f in forks} | {sid}), 4, s)
        self.assertEqual({f["file"] for f in forks}, {"kept"}, s)
        snap = s["snapshot"]
        self.assertEqual(snap["snapshot"]["names"], [f"snap-{tag}"], s)
        self.assertEqual([x["snapshotId"] for x in snap["listed"]],
                         [snap["snapshot"]["snapshotId"]], s)
        self.assertEqual([x["file"] for x in snap["started"]], ["kept", "kept"], s)
        self.assertEqual((snap["deleted"], snap["deleted_again"]), (True, False), s)
        self.assertEqual(s["kill"]["killed"], True, s)
        for f in forks:
            self.api().request("DELETE", f"/sandboxes/{f['id']}")


class E2bRestartTest(E2bCase):
    def test_a_sandbox_outlives_a_daemon_restart(self):
        self.require_host_daemon("starts daemons of its own on one file store")
        store = self.shared_store()
        env = {"API_KEYS_FILE": KEYS_FILE, "FILE_STORAGE_DIR": store, "WARM_POOL_SIZE": "0"}
        first = Daemon(env)
        self.addCleanup(first.cleanup)
        first.start()
        self.host, self.port = first.host, first.port
        sid = self.sdk("restart_before")["create"]["sandboxId"]
        first.stop()
        second = Daemon(env)
        self.addCleanup(second.cleanup)
        second.start()
        self.addCleanup(second.stop)
        self.host, self.port = second.host, second.port
        s = self.sdk("restart_after", sid)
        self.assertEqual((s["info"]["sandboxId"], s["info"]["state"]), (sid, "paused"), s)
        self.assertEqual(s["file"]["text"], "before the restart", s)
        self.assertEqual(s["command"]["stdout"], "hi\n", s)
        self.assertEqual(s["code"]["text"], "42", s)
        self.assertEqual(s["kill"]["killed"], True, s)


class E2bIdleTest(E2bCase):
    daemon_env = {"API_KEYS_FILE": KEYS_FILE, "SESSION_IDLE_PAUSE_SEC": "1",
                  "SESSION_IDLE_SNAPSHOT_SEC": "6"}

    def test_an_idle_sandbox_is_paused_and_its_next_cell_resumes_it(self):
        s = self.sdk("idle")
        self.assertEqual(s["paused"]["state"], "paused", s)
        self.assertEqual(s["file"]["text"], "kept", s)
        if Config.expected_backend != "kubernetes" and not Config.as_user:
            self.assertEqual(s["code"]["text"], "5", "frozen at 1 s: the context's state is kept")
        else:
            self.assertEqual(s["code"]["error"], "NameError", "snapshotted: the context restarts")
        self.assertEqual(s["kill"]["killed"], True, s)
