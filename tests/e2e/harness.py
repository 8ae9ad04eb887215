"""End-to-end harness: starts the daemon (or uses --url), speaks HTTP with the standard library
only, and reports unittest results as TAP version 13 so `meson test` counts every case.

A test class chooses the daemon settings it needs with `daemon_env` (a dict of environment
overrides). Classes with the same overrides share one daemon; every daemon is stopped with
SIGTERM at the end and its clean exit (0 within 15 s) is reported as a TAP line of its own.
In --url mode nothing is spawned: classes that need special settings, and tests that need to
look at the daemon process or its directories, skip with the reason.
"""

import atexit
import grp
import http.client
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest
import urllib.parse
import uuid

LISTEN_RE = re.compile(r"listening on (\S+):(\d+)")
STARTUP_TIMEOUT_S = 20.0
# Docker-in-Docker on an empty data root imports the executor image (1.2 GB) before listening.
DIND_STARTUP_TIMEOUT_S = 120.0
SHUTDOWN_TIMEOUT_S = 15.0
DEFAULT_HTTP_TIMEOUT_S = 60.0


class Config:
    """Process-wide settings, filled by run.py."""

    bin_path = None  # daemon binary (spawned mode)
    url = None  # base URL of an already running daemon (--url mode)
    expected_backend = None  # executor_backend /health must report (None: any known one)
    no_skip = False  # CI_E2E_NO_SKIP=1: a skip for a missing capability becomes a failure
    as_user = None  # --as-user USER: spawned daemons run as this unprivileged user (rootless)
    pool = None  # DaemonPool
    backend_env = {}  # what every spawned daemon's backend needs (e.g. the fake's KUBECONFIG)
    backend_log = None  # the log of a service the backend uses (the fake API server), or None
    cluster = None  # the FakeCluster of a --backend kubernetes run
    final_checks = []  # callables -> [(name, ok, diagnostic)], run once the daemons stopped
    image = None  # --image: daemons are containers of this image (ContainerDaemon)
    image_args = []  # the `docker run` flags (docs/deployment.md's) before the image name
    image_env = {}  # --image-env: extra -e settings for every container daemon
    # Docker-in-Docker: the daemons share the documented data root volume, which one nested dockerd
    # at a time may use, so the pool stops the live daemons before another starts (make_room).
    one_daemon_at_a_time = False

    _user_bin = None

    @classmethod
    def spawned(cls):
        return cls.url is None

    @classmethod
    def new_daemon(cls, overrides=None):
        """A daemon of the run's launcher: a host process, or a container with --image."""
        return ContainerDaemon(overrides) if cls.image else Daemon(overrides)

    @classmethod
    def daemon_binary(cls):
        """The binary to start. For --as-user, a copy in a folder that user can reach: the
        checkout may live where it cannot (a 0700 home, say)."""
        if not cls.as_user:
            return cls.bin_path
        if cls._user_bin is None:
            d = tempfile.mkdtemp(prefix="ci-e2e-bin-")
            os.chmod(d, 0o755)
            cls._user_bin = os.path.join(d, os.path.basename(cls.bin_path))
            shutil.copy2(cls.bin_path, cls._user_bin)
            atexit.register(shutil.rmtree, d, True)
        return cls._user_bin


# --------------------------------------------------------------------------------------------
# The daemon process


class Daemon:
    """One daemon subprocess on 127.0.0.1:0 with a fresh FILE_STORAGE_DIR; `open_files`: its
    RLIMIT_NOFILE, soft and hard (prlimit)."""

    def __init__(self, overrides=None, open_files=None):
        self.overrides = dict(overrides or {})
        self.open_files = open_files
        self.tmpdir = tempfile.mkdtemp(prefix="ci-e2e-")
        self.store_dir = os.path.join(self.tmpdir, "store")
        os.mkdir(self.store_dir)
        if Config.as_user:
            # The daemon's user owns its working directory and file store, nothing else.
            pw = pwd.getpwnam(Config.as_user)
            for d in (self.tmpdir, self.store_dir):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        self.proc = None
        self.host = None
        self.port = None
        self._lines = []
        self._lock = threading.Lock()
        self._reader = None

    def describe(self):
        if not self.overrides:
            return "default settings"
        return " ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))

    def env(self):
        env = dict(os.environ)
        env.update({
            "HOST": "127.0.0.1",
            "PORT": "0",
            "LOG_LEVEL": "debug",
            "FILE_STORAGE_DIR": self.store_dir,
            "EXECUTOR_BACKEND": Config.expected_backend or "local",  # run.py --backend
        })
        env.update(Config.backend_env)
        env.update({k: str(v) for k, v in self.overrides.items()})
        return env

    def start(self):
        argv = [Config.daemon_binary()]
        if Config.as_user:
            # setpriv execs the daemon in place (same pid): SIGTERM and /proc/<pid> still work.
            group = grp.getgrgid(pwd.getpwnam(Config.as_user).pw_gid).gr_name
            argv = ["setpriv", f"--reuid={Config.as_user}", f"--regid={group}", "--clear-groups",
                    "--"] + argv
        if self.open_files:
            argv = ["prlimit", f"--nofile={self.open_files}:{self.open_files}", "--"] + argv
        self.proc = subprocess.Popen(
            argv, env=self.env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.tmpdir,
            start_new_session=True)
        self._read_log(self.proc.stderr)
        if self.port is None:
            rc = self.proc.poll()
            if rc is None:
                self._kill()
            why = (f"exited with {rc}" if rc is not None else
                   f"no 'listening on HOST:PORT' line within {STARTUP_TIMEOUT_S:.0f} s")
            raise RuntimeError(f"daemon ({self.describe()}) did not start: {why}\n"
                               f"--- daemon log ---\n{self.log_since(0)}"
                               f"{log_tail(Config.backend_log)}")
        return self

    def startup_timeout(self):
        return STARTUP_TIMEOUT_S

    def _read_log(self, stream):
        """Collects the daemon's log lines from `stream` in a thread; returns once the
        'listening on HOST:PORT' line set host and port, the stream closed (the daemon is gone)
        or startup_timeout() passed."""
        found = threading.Event()

        def drain():
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self._lock:
                    self._lines.append(line)
                if not found.is_set():
                    m = LISTEN_RE.search(line)
                    if m:
                        self.host = m.group(1).strip("[]")
                        self.port = int(m.group(2))
                        found.set()
            found.set()

        self._reader = threading.Thread(target=drain, name="daemon-log", daemon=True)
        self._reader.start()
        found.wait(self.startup_timeout())
        if self.host in ("0.0.0.0", "::", ""):
            self.host = "127.0.0.1"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self):
        return self.proc.poll() if self.proc else None

    def log_len(self):
        with self._lock:
            return len(self._lines)

    def log_since(self, index, tail=None):
        with self._lock:
            lines = self._lines[index:]
        if tail is not None and len(lines) > tail:
            lines = [f"... ({len(lines) - tail} earlier lines)"] + lines[-tail:]
        return "\n".join(lines)

    def log_with(self, text, index=0, timeout=10.0):
        """The log since `index` once it holds `text` (or after `timeout`): a line the daemon
        wrote before its response may reach us after it (a DinD daemon's comes through docker's
        attach stream)."""
        wait_until(lambda: text in self.log_since(index), timeout, interval=0.05)
        return self.log_since(index)

    def vm_rss_kb(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def stop(self):
        """SIGTERM, then wait. Returns (exit code or None on timeout, seconds taken)."""
        if self.proc is None:
            return None, 0.0
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
            self._kill()
        took = time.monotonic() - t0
        if self._reader:
            self._reader.join(2)
        return rc, took

    def _kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def cleanup(self):
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class ContainerDaemon(Daemon):
    """The daemon as a container of Config.image, started as docs/deployment.md tells a user to
    start it: `docker run -d` with Config.image_args (the documented flags), plus what the harness
    needs: PORT=0 (several daemons side by side; the documented command publishes nothing, it runs
    on the host's network), LOG_LEVEL=debug, the test class's overrides as -e, and every host path
    an override names mounted read-only at the same path (as an administrator mounts an API keys
    file). Its log is `docker logs -f`; stop is `docker stop` (SIGTERM to the container's PID 1, the
    binary's own init); the exit code is the container's. The file store is read through
    /proc/<pid>/root, the container's root seen from the host."""

    STORE_IN_CONTAINER = "/var/lib/code-interpreter/files"  # the image's FILE_STORAGE_DIR

    def __init__(self, overrides=None):
        self.overrides = dict(overrides or {})
        self.tmpdir = None
        self.cid = None
        self.proc = None  # `docker logs -f`
        self.host = None
        self.port = None
        self._lines = []
        self._lock = threading.Lock()
        self._reader = None
        self._init_pid = None
        self._exit_code = None

    def docker_run_argv(self):
        env = {"PORT": "0", "LOG_LEVEL": "debug"}
        env.update(Config.image_env)
        env.update(Config.backend_env)
        env.update({k: str(v) for k, v in self.overrides.items()})
        argv = ["docker", "run", "-d", "--label", "code-interpreter.e2e=1"]
        argv += Config.image_args
        mounted = set()
        for v in env.values():
            d = os.path.dirname(v)
            if v.startswith("/") and os.path.exists(v) and d not in mounted:
                mounted.add(d)
                argv += ["-v", f"{d}:{d}:ro"]
        for k, v in sorted(env.items()):
            argv += ["-e", f"{k}={v}"]
        return argv + [Config.image]

    def startup_timeout(self):
        return DIND_STARTUP_TIMEOUT_S if Config.one_daemon_at_a_time else STARTUP_TIMEOUT_S

    def start(self):
        if Config.one_daemon_at_a_time and Config.pool:
            Config.pool.make_room(self)
        argv = self.docker_run_argv()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"daemon ({self.describe()}) did not start: {' '.join(argv)} "
                               f"exited with {r.returncode}: {r.stderr.strip()}")
        self.cid = r.stdout.strip()
        self._init_pid = int(self._inspect("{{.State.Pid}}") or 0) or None
        self.proc = subprocess.Popen(["docker", "logs", "-f", self.cid], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._read_log(self.proc.stdout)
        if self.port is None:
            state = self._inspect("{{.State.Status}} exit {{.State.ExitCode}}")
            self._kill()
            raise RuntimeError(f"daemon ({self.describe()}) did not start: container {state}, "
                               f"no 'listening on HOST:PORT' line within "
                               f"{self.startup_timeout():.0f} s"
                               f"\n{' '.join(argv)}\n--- docker logs ---\n{self.log_since(0)}")
        return self

    def _inspect(self, fmt):
        r = subprocess.run(["docker", "inspect", "-f", fmt, self.cid], capture_output=True,
                           text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else None

    @property
    def pid(self):
        """The daemon's host pid: the only child of the container's PID 1 (the init)."""
        try:
            with open(f"/proc/{self._init_pid}/task/{self._init_pid}/children") as f:
                children = f.read().split()
        except (OSError, TypeError):
            return None
        return int(children[0]) if len(children) == 1 else None

    @property
    def store_dir(self):
        return f"/proc/{self._init_pid}/root{self.STORE_IN_CONTAINER}"

    def alive(self):
        return self.cid is not None and self._inspect("{{.State.Running}}") == "true"

    def exit_code(self):
        if self._exit_code is None and self.cid and not self.alive():
            code = self._inspect("{{.State.ExitCode}}")
            self._exit_code = int(code) if code else None
        return self._exit_code

    def stop(self):
        """`docker stop` (SIGTERM; SIGKILL after SHUTDOWN_TIMEOUT_S). (exit code, seconds)."""
        if self.cid is None:
            return None, 0.0
        t0 = time.monotonic()
        subprocess.run(["docker", "stop", "-t", str(int(SHUTDOWN_TIMEOUT_S)), self.cid],
                       capture_output=True, timeout=SHUTDOWN_TIMEOUT_S + 30)
        took = time.monotonic() - t0
        if self._reader:
            self._reader.join(5)
        return self.exit_code(), took

    def _kill(self):
        if self.cid:  # -v: with the anonymous volumes it may have
            subprocess.run(["docker", "rm", "-f", "-v", self.cid], capture_output=True,
                           timeout=60)
        if self.proc:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def cleanup(self):
        if self.cid:
            self.exit_code()
        self._kill()


class DaemonPool:
    """Daemons keyed by their overrides, started on first use, stopped at the end of the run."""

    def __init__(self):
        self._daemons = {}
        self._errors = {}
        self._stopped = []  # clean-shutdown results of daemons stopped before the end

    def get(self, overrides):
        key = tuple(sorted((overrides or {}).items()))
        if key in self._errors:
            raise RuntimeError(self._errors[key])
        d = self._daemons.get(key)
        if d is not None and not d.alive():
            raise RuntimeError(f"daemon ({d.describe()}) died earlier (exit {d.exit_code()})\n"
                               f"--- daemon log ---\n{d.log_since(0, tail=80)}")
        if d is None:
            d = Config.new_daemon(overrides)
            self._daemons[key] = d
            try:
                d.start()
            except Exception as e:  # noqa: BLE001 - reported through every test that needs it
                self._errors[key] = str(e)
                raise
        return d

    def make_room(self, starting):
        """Docker-in-Docker: one nested dockerd at a time may use the documented data root volume,
        so every other daemon of the pool stops (its clean-shutdown result kept) before one
        starts, a test's own included; each then finds the executor image already imported."""
        for key in [k for k, d in self._daemons.items() if d is not starting]:
            self._stopped += self._stop([self._daemons.pop(key)])

    def stop(self, overrides):
        """Stops the pool's daemon of `overrides` now (SIGTERM): (exit code, seconds). A later
        get() starts a new one."""
        d = self._daemons.pop(tuple(sorted((overrides or {}).items())))
        result = d.stop()
        d.cleanup()
        return result

    def kill_all(self):
        """SIGKILL every daemon (the run was interrupted: no time for clean-shutdown checks)."""
        for d in self._daemons.values():
            if d.alive():
                d._kill()
            d.cleanup()

    def stop_all(self):
        """[(name, ok, diagnostic)] for the TAP lines of the clean-shutdown checks."""
        return self._stopped + self._stop(self._daemons.values())

    @staticmethod
    def _stop(daemons):
        results = []
        for d in daemons:
            name = f"daemon ({d.describe()}) exits 0 within {SHUTDOWN_TIMEOUT_S:.0f} s of SIGTERM"
            if d.port is None:
                results.append((name, False, "the daemon never started"))
                d.cleanup()
                continue
            was_alive = d.alive()
            rc, took = d.stop()
            ok = was_alive and rc == 0
            diag = "" if ok else (
                f"{'already dead before SIGTERM; ' if not was_alive else ''}exit code {rc} "
                f"after {took:.1f} s\n--- daemon log (tail) ---\n{d.log_since(0, tail=60)}")
            results.append((name, ok, diag))
            d.cleanup()
        return results


# --------------------------------------------------------------------------------------------
# HTTP


class Response:
    def __init__(self, status, headers, body, elapsed):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage (case-insensitive .get)
        self.body = body
        self.elapsed = elapsed
        self._json = None
        self._json_parsed = False

    @property
    def json(self):
        if not self._json_parsed:
            self._json_parsed = True
            try:
                self._json = json.loads(self.body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                self._json = None
        return self._json

    def header(self, name):
        return self.headers.get(name) if self.headers is not None else None

    def __repr__(self):
        return f"{self.status} {_clip(self.body)}"


def _clip(data, limit=1500):
    if isinstance(data, (bytes, bytearray)):
        text = bytes(data[:limit * 2]).decode("utf-8", "replace")
        n = len(data)
    else:
        text = str(data)
        n = len(text)
    if len(text) > limit:
        return text[:limit] + f"...[{n} bytes]"
    return text


class Client:
    """Plain HTTP/1.1 client. Every exchange is appended to `log` for failure diagnostics."""

    def __init__(self, host, port, log=None, headers=None):
        self.host = host
        self.port = port
        self.log = log if log is not None else []
        self.headers = dict(headers or {})  # sent with every request (e.g. an API key)

    def connection(self, timeout=DEFAULT_HTTP_TIMEOUT_S):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _record(self, method, path, body, resp, error=None):
        req = f"{method} {path}"
        if body:
            req += " " + _clip(body, 600)
        self.log.append(f"{req}\n  -> {error if error else repr(resp)}")

    def request(self, method, path, body=None, headers=None, timeout=DEFAULT_HTTP_TIMEOUT_S,
                conn=None):
        own = conn is None
        conn = conn or self.connection(timeout)
        hdrs = dict(self.headers)
        hdrs.update(headers or {})
        if isinstance(body, str):
            body = body.encode("utf-8")
        t0 = time.monotonic()
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            resp = Response(r.status, r.headers, data, time.monotonic() - t0)
        except Exception as e:
            self._record(method, path, body, None, error=f"{type(e).__name__}: {e}")
            raise
        finally:
            if own:
                conn.close()
        self._record(method, path, body, resp)
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def post_json(self, path, obj, headers=None, **kw):
        body = obj if isinstance(obj, (bytes, bytearray)) else json.dumps(obj).encode("utf-8")
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        return self.request("POST", path, body=bytes(body), headers=hdrs, **kw)

    def health_ok(self):
        try:
            r = self.get("/health", timeout=10)
        except OSError:
            return False
        return r.status == 200 and isinstance(r.json, dict) and r.json.get("status") == "ok"

    # -- multipart ------------------------------------------------------------------------

    @staticmethod
    def multipart(parts, boundary=None):
        """parts: [(field name, filename or None, bytes, extra disposition params or None)].
        Returns (content type, body). Built by hand: nothing in the stdlib writes it."""
        boundary = boundary or ("e2eBoundary" + uuid.uuid4().hex)
        out = bytearray()
        for name, filename, data, disposition in parts:
            out += f"--{boundary}\r\n".encode()
            if disposition is not None:
                cd = f"form-data; name=\"{name}\"; {disposition}"
            elif filename is not None:
                cd = f"form-data; name=\"{name}\"; filename=\"{filename}\""
            else:
                cd = f"form-data; name=\"{name}\""
            out += f"Content-Disposition: {cd}\r\n".encode("utf-8")
            if filename is not None or disposition is not None:
                out += b"Content-Type: application/octet-stream\r\n"
            out += b"\r\n" + bytes(data) + b"\r\n"
        out += f"--{boundary}--\r\n".encode()
        return f"multipart/form-data; boundary={boundary}", bytes(out)

    def upload(self, filename, data, field="file", disposition=None, extra_parts=()):
        ctype, body = self.multipart(list(extra_parts) + [(field, filename, data, disposition)])
        return self.request("POST", "/v1/files", body=body, headers={"Content-Type": ctype})

    # -- server-sent events -----------------------------------------------------------------

    def sse(self, path, obj, timeout=DEFAULT_HTTP_TIMEOUT_S, on_event=None):
        """POSTs obj and reads the answer. If it is an event stream, parses it line by line and
        returns SseResult with [(event, data_json, arrival seconds since the request)].
        on_event(event, socket) is called as each event arrives (e.g. to hang up)."""
        conn = self.connection(timeout)
        body = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
        t0 = time.monotonic()
        res = SseResult()
        try:
            conn.request("POST", path, body=body,
                         headers={**self.headers, "Content-Type": "application/json"})
            sock = conn.sock  # http.client drops it from conn when the answer is Connection: close
            r = conn.getresponse()
            res.status, res.headers = r.status, r.headers
            ctype = r.headers.get("Content-Type", "")
            if not ctype.startswith("text/event-stream"):
                res.body = r.read()
                self._record("POST", path, body, Response(r.status, r.headers, res.body, 0))
                return res
            event, data = None, []
            while True:
                raw = r.readline()
                if not raw:
                    break
                line = raw.decode("utf-8", "replace")
                res.raw_lines.append(line)
                line = line.rstrip("\r\n")
                if line == "":
                    if event is not None or data:
                        text = "\n".join(data)
                        try:
                            parsed = json.loads(text)
                        except ValueError:
                            parsed = {"__unparsed__": text}
                        ev = (event or "message", parsed, time.monotonic() - t0)
                        res.events.append(ev)
                        if on_event:
                            on_event(ev, sock)
                    event, data = None, []
                elif line.startswith(":"):
                    continue
                elif line.startswith("event:"):
                    event = line[6:].lstrip(" ")
                elif line.startswith("data:"):
                    data.append(line[5:][1:] if line[5:].startswith(" ") else line[5:])
                else:
                    res.unknown_lines.append(line)
            if event is not None or data:
                res.unterminated = "\n".join(filter(None, [event] + data))
        except Exception as e:
            self.log.append(f"POST {path} {_clip(body, 600)}\n  -> {type(e).__name__}: {e}")
            raise
        finally:
            conn.close()
        res.elapsed = time.monotonic() - t0
        summary = "; ".join(f"{e}@{t:.2f}s {_clip(json.dumps(d), 200)}" for e, d, t in res.events)
        self.log.append(f"POST {path} {_clip(body, 600)}\n  -> {res.status} SSE: {_clip(summary)}")
        return res

    # -- raw requests (bodies the server may refuse before reading them) ----------------------

    def raw_request(self, head, body_iter=None, timeout=30.0):
        """Sends `head` (request line + headers, bytes, ending in CRLFCRLF), then the chunks of
        body_iter while watching for an early answer. Returns (Response or None, note) where note
        says how the body sending ended ('complete', 'answered early', 'EPIPE', ...)."""
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        note = "complete"
        t0 = time.monotonic()
        try:
            sock.sendall(head)
            if body_iter is not None:
                sock.setblocking(False)
                for chunk in body_iter:
                    view = memoryview(chunk)
                    while view:
                        r, w, _ = select.select([sock], [sock], [], timeout)
                        if r:
                            note = "answered early"
                            break
                        if not w:
                            note = "send stalled"
                            break
                        try:
                            n = sock.send(view)
                        except (BrokenPipeError, ConnectionResetError) as e:
                            note = type(e).__name__
                            break
                        view = view[n:]
                    if note != "complete":
                        break
                sock.setblocking(True)
                sock.settimeout(timeout)
            method = head.split(b" ", 1)[0].decode("latin-1")
            resp = http.client.HTTPResponse(sock, method=method if method.isalpha() else "GET")
            try:
                resp.begin()
                data = resp.read()
                out = Response(resp.status, resp.headers, data, time.monotonic() - t0)
            except (ConnectionResetError, http.client.HTTPException, OSError) as e:
                out = None
                note += f"; reading the answer failed: {type(e).__name__}: {e}"
        finally:
            sock.close()
        self.log.append(f"{_clip(head, 300)!r} (+ body, {note})\n  -> {out!r}")
        return out, note


class SseResult:
    def __init__(self):
        self.status = None
        self.headers = None
        self.body = None  # set when the answer was not an event stream
        self.events = []
        self.raw_lines = []
        self.unknown_lines = []
        self.unterminated = None
        self.elapsed = None

    @property
    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, AttributeError, UnicodeDecodeError):
            return None

    def outputs(self, stream=None):
        return [d for e, d, _ in self.events
                if e == "output" and (stream is None or d.get("stream") == stream)]

    def text(self, stream):
        return "".join(d.get("data", "") for d in self.outputs(stream))


# --------------------------------------------------------------------------------------------
# Host helpers


def backend_log_size():
    try:
        return os.path.getsize(Config.backend_log) if Config.backend_log else 0
    except OSError:
        return 0


def log_tail(path, offset=0, lines=40):
    """The last lines of the file at path written after offset, under a heading; "" if none."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    tail = text.splitlines()[-lines:]
    return f"\n--- {path} (tail) ---\n" + "\n".join(tail) if tail else ""


def pending_issue(number, what):
    """Marks a test of a capability that an open issue delivers: it skips with the issue number,
    so the suite stays honest about what is not built yet. Remove it with the issue."""
    return unittest.skip(f"pending issue #{number}: {what}")


def host_processes_matching(needle):
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if needle in line]


def wait_until(pred, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def unique_sleep_arg():
    """A number no other process on the host is sleeping for, to find our sandbox's children."""
    return str(900000000 + uuid.uuid4().int % 99999999)


# --------------------------------------------------------------------------------------------
# The fake Kubernetes cluster (run.py --backend kubernetes)

K8S_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "k8s")
# Where the fake's images carry the agent (--image-file): outside the host's /usr, which its
# images are made of; the daemons are told by KUBERNETES_EXECUTOR_AGENT_PATH.
FAKE_IMAGE_AGENT = "/code-interpreter/agent"
FAKE_TOOLS = ("bwrap", "nsenter", "setpriv", "openssl", "mount")
# Namespaces of the fake whose RBAC refuses one thing the backend uses (test_k8s_access.py).
K8S_REFUSING = {"no-attach": ["get:pods/attach", "create:pods/attach"],
                "no-exec": ["get:pods/exec", "create:pods/exec"],
                "no-pods": ["create:pods"]}


def kubernetes_unavailable():
    """Why the fake Kubernetes API server cannot run here, or None."""
    if os.geteuid() != 0:
        return "the fake Kubernetes API server's pods need root (tests/k8s/README.md)"
    missing = [t for t in FAKE_TOOLS if shutil.which(t) is None]
    if missing:
        return "the fake Kubernetes API server needs " + ", ".join(missing)
    return None


class FakeCluster:
    """One fake API server (tests/k8s/fake_apiserver.py) for the whole run, which every spawned
    daemon uses through its kubeconfig. Its pods are bubblewrap sandboxes in cgroups with the
    kubelet's limits (memory, cpu, --pod-pids-limit 1024), so the hostile suite's fork and
    memory bombs stop at the pod, not at this machine. Its stderr (--verbose: every request)
    goes to a log file whose new lines a failing test's diagnostics show."""

    LEFT_OVER_WAIT_S = 15.0  # for pods a daemon deleted with a grace period as it stopped

    def __init__(self):
        if K8S_TESTS not in sys.path:
            sys.path.insert(0, K8S_TESTS)
        from fake.launcher import FakeServer  # noqa: E402 - tests/k8s/fake, needs the path
        self.tmpdir = tempfile.mkdtemp(prefix="ci-e2e-k8s-")
        self.log = os.path.join(self.tmpdir, "fake-apiserver.log")
        # The nodes have the executor profile installed in the kubelet's seccomp directory, as
        # src/k8s/README.md tells an administrator (KUBERNETES_EXECUTOR_SECCOMP_PROFILE).
        seccomp_root = os.path.join(self.tmpdir, "seccomp")
        os.makedirs(seccomp_root)
        shutil.copy(os.path.join(K8S_TESTS, "..", "..", "policies", "seccomp-executor.json"),
                    os.path.join(seccomp_root, "code-interpreter.json"))
        # The executor image's agent: the one built next to the daemon under test.
        agent = os.path.join(os.path.dirname(Config.bin_path), "src", "agent",
                             "code-interpreter-agent")
        if not os.path.isfile(agent):
            raise RuntimeError(f"no agent at {agent} for the fake's images (ninja builds it)")
        refusing = [flag for ns, denied in K8S_REFUSING.items()
                    for flag in ["--namespace", ns] + [f for d in denied
                                                       for f in ("--deny", f"{d}:{ns}")]]
        # --agent-sandbox: its CRDs and controller, for the daemons of AgentSandboxTest.
        self.server = FakeServer(os.path.join(self.tmpdir, "state"), "--verbose", *refusing,
                                 "--agent-sandbox",
                                 "--seccomp-root", seccomp_root,
                                 "--image-file", f"{FAKE_IMAGE_AGENT}={agent}",
                                 # as packaging/executor-image/build.sh makes it
                                 "--image-link", "/home/user=/workspace", log=self.log)
        self.stopped = False

    def start(self, namespace="default"):
        self.namespace = namespace
        try:
            self.server.__enter__()
        except Exception as e:
            message = f"the fake Kubernetes API server did not start: {e}{log_tail(self.log)}"
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            raise RuntimeError(message) from None
        kubeconfig = self.server.info["kubeconfig"]
        if Config.as_user:
            # A daemon running as USER reads the kubeconfig (the token is a throwaway).
            for d in (self.tmpdir, os.path.dirname(kubeconfig)):
                os.chmod(d, 0o755)
            os.chmod(kubeconfig, 0o644)
        Config.backend_env = {
            "KUBECONFIG": kubeconfig,
            "KUBERNETES_EXECUTOR_NAMESPACE": namespace,
            # The fake runs no init containers; its pods' own network namespaces with only `lo`
            # (--pod-network isolated) are what the deny-all NetworkPolicy of
            # packaging/kubernetes gives on a CNI that enforces it: the lockdown is off.
            "KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN": "false",
            "KUBERNETES_EXECUTOR_SECCOMP_PROFILE": "code-interpreter.json",
            # Sessions end with their daemon, as on the other backends, so the suite's cases
            # hold unchanged and no pod outlives the run; MultiReplicaSessionTest runs the
            # default (sessions outlive a replica).
            "KUBERNETES_SESSIONS_OUTLIVE_DAEMON": "false",
            "KUBERNETES_EXECUTOR_AGENT_PATH": FAKE_IMAGE_AGENT,
        }
        Config.backend_log = self.log
        Config.cluster = self
        Config.final_checks.append(self.final_checks)
        return self

    @staticmethod
    def _pod_uid_of(pid):
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                uids = re.findall(r"fake-kubelet/[^/]+/([0-9a-f-]{36})", f.read())
        except OSError:
            return None
        return uids[0] if uids else None

    def pod_process_matching(self, needle):
        """The pid of a process in a fake pod whose command line holds `needle`, or None (the
        fake's own exec helpers on the host carry the same command line)."""
        for line in host_processes_matching(needle):
            pid = int(line.split()[0])
            if self._pod_uid_of(pid):
                return pid
        return None

    def delete_pod_of(self, pid):
        """Deletes at once (grace 0), through the API, the pod whose cgroup holds host process
        `pid` (its uid ends the fake kubelet's cgroup path): the pod dies under the daemon, as
        when a node is lost. Returns the pod's name."""
        uid = self._pod_uid_of(pid)
        if not uid:
            raise AssertionError(f"process {pid} is in no fake pod's cgroup")
        client = self.server.client()
        for p in client.request("GET", "/api/v1/pods").json()["items"]:
            if p["metadata"]["uid"] == uid:
                name, ns = p["metadata"]["name"], p["metadata"]["namespace"]
                r = client.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}"
                                             "?gracePeriodSeconds=0")
                if r.status != 200:
                    raise AssertionError(f"deleting pod {name}: {r.status} {r.body!r}")
                return name
        raise AssertionError(f"no pod has uid {uid}")

    def _pods(self):
        r = self.server.client().request("GET", "/api/v1/pods")
        if r.status != 200:
            return [f"(listing pods answered {r.status}: {_clip(r.body, 300)})"]
        return [f'{p["metadata"]["namespace"]}/{p["metadata"]["name"]}'
                + (" (terminating)" if p["metadata"].get("deletionTimestamp") else "")
                for p in r.json()["items"]]

    def _history(self):
        """Each left pod's labels and phase, and the requests about it in the fake's log: which
        daemon made it, for what, and whether anyone tried to delete it."""
        out = []
        try:
            items = self.server.client().request("GET", "/api/v1/pods").json()["items"]
        except (OSError, ValueError, KeyError):
            items = []
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                log = f.read().splitlines()
        except OSError:
            log = []
        for p in items:
            meta = p["metadata"]
            name = meta["name"]
            status = p.get("status", {})
            ended = {c["name"]: c["state"].get("terminated") for c in
                     status.get("containerStatuses") or [] if "terminated" in c.get("state", {})}
            out.append(f"\n{name}: labels {meta.get('labels')}, phase {status.get('phase')}"
                       f"{' (' + status['reason'] + ')' if status.get('reason') else ''}, "
                       f"created {meta.get('creationTimestamp')}"
                       + "".join(f", {c} ended {t.get('reason')} (exit code {t.get('exitCode')}) "
                                 f"at {t.get('finishedAt')}" for c, t in ended.items()))
            about = [line for line in log if name in line]
            out.extend("\n    " + line for line in about[-12:])
        return "".join(out) + "\n" if out else ""

    def final_checks(self):
        """After the daemons stopped: they left no pods behind, and the fake then stops cleanly
        (its own pods' cgroups and tmpfs mounts gone)."""
        out = []
        try:
            # agent-sandbox's SandboxWarmPools are the deployment's and outlive its daemons by
            # design: gone with them, their pods go; a claim's pod stays and is a leak.
            client = self.server.client()
            for ns in [self.namespace, *K8S_REFUSING]:
                pools = f"/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/{ns}/sandboxwarmpools"
                listed = client.request("GET", pools)
                for pool in listed.json().get("items", []) if listed.status == 200 else []:
                    client.request("DELETE", f"{pools}/{pool['metadata']['name']}")
            wait_until(lambda: not self._pods(), self.LEFT_OVER_WAIT_S, 0.2)
            left = self._pods()
        except OSError as e:
            left = [f"(the fake API server did not answer: {e})"]
        out.append(("no pods left in the fake Kubernetes API server once the daemons stopped",
                    not left, "left: " + ", ".join(left) + self._history() if left else ""))
        swept = self.server.stop()
        self.stopped = True
        rc = self.server.proc.returncode
        ok = rc == 0 and not swept
        out.append(("the fake Kubernetes API server stops cleanly, leaving no cgroups or mounts",
                    ok, "" if ok else f"exit code {rc}; swept after it: {swept}"
                                      f"{log_tail(self.log)}"))
        return out

    def close(self, show_log):
        """Stop the server if the final checks did not, print its log's tail if asked (the run
        failed), and remove its directory."""
        if not self.stopped:
            self.server.stop()
            self.stopped = True
        if show_log:
            sys.stderr.write(log_tail(self.log, lines=100) + "\n")
        shutil.rmtree(self.tmpdir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Test base class


class E2ETestCase(unittest.TestCase):
    daemon_env = {}  # overrides; non-empty means "needs a daemon with these settings"
    maxDiff = 4000

    @classmethod
    def setUpClass(cls):
        cls._skip_reason = None
        cls._start_error = None
        cls.daemon = None
        if Config.spawned():
            try:
                cls.daemon = Config.pool.get(cls.daemon_env)
                cls.host, cls.port = cls.daemon.host, cls.daemon.port
            except Exception as e:  # noqa: BLE001 - each test then fails with the reason
                cls._start_error = str(e)
        else:
            if cls.daemon_env:
                cls._skip_reason = ("--url mode: needs a daemon started with " +
                                    " ".join(f"{k}={v}" for k, v in sorted(cls.daemon_env.items())))
            u = urllib.parse.urlsplit(Config.url)
            cls.host, cls.port = u.hostname, u.port or 80

    def setUp(self):
        self._exchanges = []
        self._log_start = self.daemon.log_len() if self.daemon else 0
        self._backend_log_start = backend_log_size()
        if self._skip_reason:
            self.skipTest(self._skip_reason)
        if self._start_error:
            self.fail(self._start_error)
        self.client = Client(self.host, self.port, self._exchanges)

    # -- skips -------------------------------------------------------------------------------

    def require_spawned(self, why):
        if not Config.spawned():
            self.skipTest(f"--url mode: {why}")

    def require_host_daemon(self, why):
        """For tests that start daemons of their own as host processes (harness.Daemon) and
        look at them by pid: not with --url, nor with --image (daemons are containers)."""
        self.require_spawned(why)
        if Config.image:
            self.skipTest(f"--image (the daemon is a container): {why}")

    def shared_store(self):
        """A FILE_STORAGE_DIR for daemons of the test's own to share (a restart, replicas), owned
        by the daemons' user and removed after the test."""
        store = tempfile.mkdtemp(prefix="ci-e2e-store-")
        self.addCleanup(shutil.rmtree, store, True)
        if Config.as_user:
            pw = pwd.getpwnam(Config.as_user)
            os.chown(store, pw.pw_uid, pw.pw_gid)
        return store

    def skip_or_fail(self, reason):
        """For a missing capability of the environment: skip, or fail when CI_E2E_NO_SKIP=1."""
        if Config.no_skip:
            self.fail(f"{reason} (CI_E2E_NO_SKIP=1 turns this skip into a failure)")
        self.skipTest(reason)

    def require_node_client(self, what, package_json):
        """Node.js and the npm package `package_json` belongs to (tests/<folder>/node_modules/...),
        or skip_or_fail naming how to install them."""
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        folder = os.path.relpath(package_json.split("/node_modules/")[0], repo)
        if shutil.which("node") is None:
            self.skip_or_fail(f"no node on PATH for {what} (scripts/install-deps.sh installs "
                              "Node.js)")
        if not os.path.isfile(package_json):
            self.skip_or_fail(f"{what} is not installed in {folder}/node_modules (run `npm ci` in "
                              f"{folder}; scripts/install-deps.sh does)")

    # -- requests with assertions --------------------------------------------------------------

    def execute(self, code, path="/v1/execute", expect_status=200, **fields):
        body = {"code": code}
        body.update(fields)
        r = self.client.post_json(path, body)
        self.assertEqual(r.status, expect_status, f"POST {path} {_clip(json.dumps(body), 300)} "
                                                  f"answered {r!r}")
        if expect_status == 200:
            self.assertIsInstance(r.json, dict, f"not a JSON object: {r!r}")
        return r.json if expect_status == 200 else r

    def assertDetail(self, r, status, detail=None, prefix=None, contains=None):
        """An error response: exact status, a JSON body {"detail": str} and the given text."""
        self.assertEqual(r.status, status, f"expected {status}, got {r!r}")
        ctype = r.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("application/json"),
                        f"error body Content-Type is {ctype!r}, want application/json")
        self.assertIsInstance(r.json, dict, f"error body is not a JSON object: {r!r}")
        d = r.json.get("detail")
        self.assertIsInstance(d, str, f"'detail' must be a string: {r!r}")
        if detail is not None:
            self.assertEqual(d, detail)
        if prefix is not None:
            self.assertTrue(d.startswith(prefix), f"detail {d!r} must start with {prefix!r}")
        if contains is not None:
            self.assertIn(contains, d, f"detail {d!r} must name {contains!r}")
        return d

    def assertHealthy(self):
        self.assertTrue(self.client.health_ok(), "GET /health is not 200 status ok afterwards")
        if self.daemon:
            self.assertTrue(self.daemon.alive(), "the daemon process died")
        res = self.execute("print('still alive')")
        self.assertEqual(res.get("stdout"), "still alive\n", f"a plain execute afterwards: {res}")

    def downgraded(self, prefix):
        """True when /health lists a downgrade whose measure starts with `prefix`."""
        r = self.client.get("/health", timeout=10)
        hardening = (r.json or {}).get("hardening") or {}
        return any(d.get("measure", "").startswith(prefix)
                   for d in hardening.get("downgrades") or [])

    def pids_limit_downgraded(self):
        """True when the backend cannot give a sandbox its own pids limit (kubernetes)."""
        return self.downgraded("pids limit")

    def cgroup_downgraded(self):
        """True when /health reports the cgroup limits as downgraded (a rootless daemon without a
        writable cgroup): memory and process limits are rlimits, so there is no memory_limit or
        pids_limit verdict; the program is still stopped (MemoryError, fork EAGAIN)."""
        r = self.client.get("/health", timeout=10)
        hardening = (r.json or {}).get("hardening") or {}
        return any(d.get("measure") == "memory limit (cgroup)"
                   for d in hardening.get("downgrades") or [])

    def pool_metric(self, pool, series):
        """A warm pool's `code_interpreter_warm_pool_<series>` from /metrics; None if absent."""
        text = self.client.get("/metrics").body.decode()
        m = re.search(rf'^code_interpreter_warm_pool_{series}{{pool="{pool}"}} (\S+)$', text, re.M)
        return m and float(m.group(1))

    def wait_for_pool(self, pool, ready):
        """Until a warm pool holds `ready` sandboxes again (a request that finds it empty gets a
        sandbox that pre-starts nothing)."""
        self.assertTrue(wait_until(lambda: self.pool_metric(pool, "ready") == ready, timeout=30),
                        f"the {pool} pool did not refill")

    def upload_ok(self, filename, data):
        r = self.client.upload(filename, data)
        self.assertEqual(r.status, 201, f"upload {filename!r}: {r!r}")
        return r.json["file_id"]

    def download(self, file_id):
        return self.client.get(f"/v1/files/{file_id}")


# --------------------------------------------------------------------------------------------
# TAP output


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _yaml_block(fields):
    """A TAP 13 YAML block. Every payload line is prefixed with '| ' so that no line of a
    traceback or daemon log can end the block early or be read as a test line."""
    out = ["  ---"]
    for key, value in fields:
        if value is None or value == "":
            continue
        out.append(f"  {key}: |")
        for line in str(value).splitlines():
            line = _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), line.rstrip())
            if line.strip():
                out.append("    | " + line)
    out.append("  ...")
    return "\n".join(out)


class TapResult(unittest.TestResult):
    def __init__(self, stream, *args, **kwargs):
        super().__init__(stream, *args, **kwargs)
        self.tap = stream
        self.count = 0
        self.failed = 0
        self._outcome = None

    def _name(self, test):
        # "test_api.HealthTest.test_health" -> "api.HealthTest.test_health"; no '#' (TAP)
        name = test.id()
        if name.startswith("test_"):
            name = name[5:]
        return name.replace("#", "")

    def emit(self, ok, name, directive=None, diag=None):
        self.count += 1
        line = f"{'ok' if ok else 'not ok'} {self.count} - {name}"
        if directive:
            line += f" # {directive}"
        self.tap.write(line + "\n")
        if diag:
            self.tap.write(diag + "\n")
        self.tap.flush()
        if not ok:
            self.failed += 1

    def startTest(self, test):
        super().startTest(test)
        self._outcome = {"errors": [], "skip": None, "started": time.monotonic()}

    def _diag(self, test, err_text):
        fields = [("message", err_text)]
        ex = getattr(test, "_exchanges", None)
        if ex:
            fields.append(("http", "\n".join(ex[-6:])))
        d = getattr(test, "daemon", None)
        if d is not None and hasattr(test, "_log_start"):
            # CI_E2E_LOG_TAIL=N shows more of the daemon's log of a failed test (40 lines).
            tail = int(os.environ.get("CI_E2E_LOG_TAIL", "40"))
            fields.append(("daemon_log", d.log_since(test._log_start, tail=tail)))
        if hasattr(test, "_backend_log_start"):
            fields.append(("backend_log", log_tail(Config.backend_log,
                                                   test._backend_log_start)))
        return _yaml_block(fields)

    def _fmt(self, test, err):
        if isinstance(test, unittest.TestCase):
            return self._exc_info_to_string(err, test)  # without unittest's own frames
        return "".join(traceback.format_exception(*err))

    def addError(self, test, err):
        super().addError(test, err)
        if self._outcome is None or not isinstance(test, unittest.TestCase):
            self.emit(False, str(test), diag=_yaml_block([("message", self._fmt(test, err))]))
            return
        self._outcome["errors"].append(self._fmt(test, err))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._outcome["errors"].append(self._fmt(test, err))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._outcome["errors"].append(f"{subtest._subDescription()}:\n" + self._fmt(test, err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if self._outcome is None or not isinstance(test, unittest.TestCase):
            self.emit(True, str(test), directive=f"SKIP {reason}")
            return
        self._outcome["skip"] = reason

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._outcome["errors"].append("unexpected success")

    def stopTest(self, test):
        super().stopTest(test)
        o, self._outcome = self._outcome, None
        took = time.monotonic() - o["started"]
        name = f"{self._name(test)} ({took:.2f} s)"
        if o["errors"]:
            self.emit(False, name, diag=self._diag(test, "\n".join(o["errors"])))
        elif o["skip"] is not None:
            reason = o["skip"].replace("#", "").replace("\n", " ")
            self.emit(True, name, directive=f"SKIP {reason}")
        else:
            self.emit(True, name)
        sys.stderr.write(f"[{'FAIL' if o['errors'] else 'skip' if o['skip'] else ' ok '}] "
                         f"{name}\n")
        sys.stderr.flush()


def run_tap(suite, tap_stream):
    """Runs the suite, then the clean-shutdown checks. Returns the number of failures."""
    tap_stream.write("TAP version 13\n")
    tap_stream.flush()
    result = TapResult(tap_stream)
    suite.run(result)
    if Config.pool is not None:
        for name, ok, diag in Config.pool.stop_all():
            result.emit(ok, name, diag=_yaml_block([("message", diag)]) if diag else None)
    for check in Config.final_checks:
        for name, ok, diag in check():
            result.emit(ok, name, diag=_yaml_block([("message", diag)]) if diag else None)
    tap_stream.write(f"1..{result.count}\n")
    tap_stream.write(f"# {result.count - result.failed} passed, {result.failed} failed\n")
    tap_stream.flush()
    return result.failed


def api_keys_file(text):
    """An API_KEYS_FILE with `text` that a daemon running as another user can read (removed at
    exit)."""
    folder = tempfile.mkdtemp(prefix="ci-e2e-keys-")
    atexit.register(shutil.rmtree, folder, True)
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "api-keys")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


# The red team's chain (issue #30 item 1), run by a client against its own recycled sandbox
# (test_docker.py, test_recycling.py): a leftover named with a newline and a fake state, its
# thread-group leader a zombie while its thread runs, kills every other Python process (the fork
# server, a pre-started program) and plants /workspace/ast.py, which the driver's `import ast`
# would run in the next execution.
LEFTOVER_CHAIN_CODE = r"""
import ctypes, os, threading, time
program = os.getpid()
if os.fork() == 0:
    os.setsid()
    libc = ctypes.CDLL(None)
    libc.prctl(15, b"x\n) R 1 1 1", 0, 0, 0)  # PR_SET_NAME
    def plant():
        while True:
            for p in os.listdir('/proc'):
                try:
                    if p.isdigit() and int(p) not in (os.getpid(), program, 1) and \
                            b'python' in open(f'/proc/{p}/cmdline', 'rb').read():
                        os.kill(int(p), 9)
                except OSError:
                    pass
            try:
                with open('/workspace/ast.py', 'w') as f:
                    f.write("print('LEAKED FROM THE PREVIOUS EXECUTION')\n")
            except OSError:
                pass
            time.sleep(0.005)
    threading.Thread(target=plant).start()
    time.sleep(0.2)
    libc.syscall(60, 0)  # exit of the leader thread alone: a zombie leader, its thread runs
print("planted")
"""
