# An E2B code context (docs/e2b.md "Code contexts"): an interpreter that keeps its state between
# cells, run in the sandbox as one of its processes, as its user. Each line on stdin is a cell,
# {"code", "env_vars", "nonce"}; on the stdout it started with it writes the cell's lines as
# E2B's /execute streams them (number_of_executions, stdout, stderr, result, error), then
# {"type": "end_of_execution", "nonce"}. The cell's fds 1 and 2 are pipes read by a thread
# each, so what a subprocess prints comes too. SIGINT interrupts the running cell, not the
# context. Python cells run here (results are MIME bundles as a notebook makes them: the last
# expression's value, display() calls, and every open matplotlib figure at the cell's end or at
# plt.show()); JavaScript and bash cells run in a child kernel (ChildKernel) that shares fds 1/2.
import ast
import builtins
import codecs
import datetime
import io
import json
import linecache
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

PROTO = os.fdopen(os.dup(1), "wb", buffering=0)
PROTO_LOCK = threading.Lock()
MARK = b"\0ci-end-" + os.urandom(8).hex().encode() + b"\0"
RUNNING = False  # a cell runs: SIGINT interrupts it (between cells it is ignored)


def emit(message):
    line = json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"
    with PROTO_LOCK:
        PROTO.write(line)


CAPTURES = []


def settle():
    """What the cell printed so far (fds 1 and 2, and sys.stdout/err's buffers) is sent first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    for capture in CAPTURES:
        capture.drain()


def emit_in_order(message):
    settle()
    emit(message)


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Capture:
    """fd 1 or 2 as a pipe whose bytes become stdout or stderr lines; `drain` waits until what
    was written before it has been sent."""

    def __init__(self, fd, kind):
        self.kind = kind
        self.drained = threading.Event()
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.fd = fd
        threading.Thread(target=self.pump, args=(r,), daemon=True).start()

    def pump(self, r):
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = b""
        while True:
            data = os.read(r, 65536)
            if not data:
                return
            pending += data
            while True:
                at = pending.find(MARK)
                text = pending if at < 0 else pending[:at]
                # Bytes that may be the start of a mark wait for the next read.
                keep = 0 if at >= 0 else next(
                    (n for n in range(min(len(MARK) - 1, len(text)), 0, -1)
                     if MARK.startswith(text[-n:])), 0)
                out = decoder.decode(text[:len(text) - keep], final=at >= 0)
                if out:
                    emit({"type": self.kind, "text": out, "timestamp": now()})
                if at < 0:
                    pending = text[len(text) - keep:]
                    break
                pending = pending[at + len(MARK):]
                self.drained.set()

    def drain(self):
        self.drained.clear()
        try:
            os.write(self.fd, MARK)
        except OSError:
            return  # the cell closed or replaced the descriptor: nothing to wait for
        self.drained.wait(10)


# Rich results: rich_results.py's source, put here by the daemon.
RICH = {"__name__": "_ci_rich"}


def error(exc):
    """The exception as E2B's error line, the traceback without this driver's frames."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != "<string>"]
    lines = ["Traceback (most recent call last):\n"] + traceback.format_list(frames) if frames else []
    lines += traceback.format_exception_only(type(exc), exc)
    emit_in_order({"type": "error", "name": type(exc).__name__, "value": str(exc),
                   "traceback": "".join(lines)})


def run_cell(code, g, number):
    name = "<cell %d>" % number
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        tree = ast.parse(code, name)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), name, "eval")
        body = compile(tree, name, "exec")
    except SyntaxError as e:
        error(e)
        return
    try:
        exec(body, g)
        value = eval(last, g) if last is not None else None
        if value is not None:
            g["_"] = value
            emit_in_order({"type": "result", "is_main_result": True, **RICH["bundle"](value)})
    except SystemExit as e:
        if e.code not in (None, 0):
            error(e)
    except BaseException as e:
        error(e)


def with_env(env_vars, run):
    saved = {k: os.environ.get(k) for k in env_vars}
    os.environ.update(env_vars)
    try:
        run()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class PythonKernel:
    def __init__(self, cwd):
        sys.argv[:] = [""]
        sys.path.insert(0, cwd)
        exec(compile(None  # @rich_results.py@
                     , "<string>", "exec"), RICH)
        RICH["install"](lambda result: emit_in_order({"type": "result", **result}))
        self.globals = {"__name__": "__main__", "__builtins__": builtins,
                        "display": RICH["display"]}

    def run(self, code, env_vars, number):
        try:
            with_env(env_vars, lambda: (run_cell(code, self.globals, number), RICH["finish"]()))
        except KeyboardInterrupt as e:  # landed between the cell and its figures
            error(e)

    def interrupt(self):
        raise KeyboardInterrupt


# The bash kernel's setup: its errors to the captured fd 2 once its startup's complaints about
# job control are past; a cell's status to the answers' descriptor as the JavaScript kernel's
# done line. Interactive, so that SIGINT abandons the whole cell, as at a terminal.
BASH_SETUP = ("exec 2>&{err} {err}>&-; set +o history; "
              "__ci_done() {{ printf '{{\"type\":\"done\",\"status\":%d}}\\n' \"$1\" >&{ans}; }}\n")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ChildKernel:
    """A JavaScript or bash kernel in a child process whose fds 1 and 2 are this one's captured
    ones: a cell goes to its stdin, its result and error lines come back on a pipe, then its
    {"type": "done"}. In this one's process group, which the daemon signals; it ends with this
    process (PR_SET_PDEATHSIG)."""

    def __init__(self, language, cwd, program):
        self.language, self.cwd, self.program = language, cwd, program
        self.proc = None
        self.cells = tempfile.mkdtemp(prefix=".ci-bash-") if language == "bash" else None

    def start(self):
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        answers_r, answers_w = os.pipe()
        err = None
        if self.language == "bash":
            err = os.dup(2)
            argv = ["bash", "--norc", "--noprofile", "--noediting", "-i", "+m"]
            env = dict(os.environ, PS1="", PS2="", PS4="", PWD=self.cwd)
            fds = (answers_w, err)
        else:
            argv = ["node", "--expose-internals", "-e", self.program, "--", str(answers_w)]
            env, fds = dict(os.environ, PWD=self.cwd), (answers_w,)
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL if err else None,
                cwd=self.cwd, env=env, pass_fds=fds,
                preexec_fn=lambda: prctl(1, signal.SIGKILL))  # PR_SET_PDEATHSIG
        finally:
            os.close(answers_w)
            if err is not None:
                os.close(err)
        self.answers = os.fdopen(answers_r, "rb")
        self.answers_fd = answers_w  # its number in the child
        if self.language == "bash":
            self.send(BASH_SETUP.format(err=err, ans=answers_w))

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def request(self, code, env_vars, number):
        if self.language != "bash":
            return json.dumps({"code": code, "env_vars": env_vars}) + "\n"
        cell = os.path.join(self.cells, "cell-%d.sh" % number)
        with open(cell, "w") as f:
            f.write(code)
        assign = "".join("%s=%s " % (k, shlex.quote(v)) for k, v in env_vars.items()
                         if NAME.match(k))
        # The cell's stdin is empty, and the answers' descriptor closed in what it starts.
        return "%s. %s </dev/null %d>&-\n__ci_done $?\n" % (
            assign, shlex.quote(cell), self.answers_fd)

    def run(self, code, env_vars, number):
        try:
            if self.proc is None:
                self.start()
            self.send(self.request(code, env_vars, number))
        except OSError as e:
            self.ended("could not start or reach the %s kernel: %s" % (self.language, e))
            return
        for line in self.answers:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("type") == "done":
                status = message.get("status", 0)
                if status:
                    emit_in_order({"type": "error", "name": "ExitCode", "value": str(status),
                                   "traceback": ""})
                return
            emit_in_order(message)
        self.ended("the %s kernel ended (status %s); the next cell starts a new one" % (
            self.language, self.proc.wait()))

    def ended(self, why):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.answers.close()
        self.proc = None
        emit_in_order({"type": "error", "name": "KernelDied", "value": why, "traceback": ""})

    def interrupt(self):
        pass  # SIGINT comes to the whole process group: the kernel and what it runs get it too


KERNEL = None


def interrupt(signum, frame):
    if RUNNING:
        KERNEL.interrupt()


def main():
    global RUNNING, KERNEL
    language, cwd = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGINT, interrupt)
    os.chdir(cwd)
    CAPTURES.extend([Capture(1, "stdout"), Capture(2, "stderr")])
    # Line-buffered: a print() is one write (one stdout line); the rest goes at the cell's end.
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), line_buffering=True)
    # Cells arrive on stdin; a cell that reads its stdin finds it empty.
    requests = io.TextIOWrapper(os.fdopen(os.dup(0), "rb", buffering=0), encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if language == "python":
        KERNEL = PythonKernel(cwd)
    else:
        KERNEL = ChildKernel(language, cwd, sys.argv[3] if len(sys.argv) > 3 else "")
    number = 0
    for line in requests:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        number += 1
        emit({"type": "number_of_executions", "execution_count": number})
        RUNNING = True
        KERNEL.run(request["code"], request.get("env_vars") or {}, number)
        RUNNING = False
        settle()
        emit({"type": "end_of_execution", "nonce": request.get("nonce", "")})


main()
