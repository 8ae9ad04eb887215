# An E2B code context (docs/e2b.md "Code contexts"): a Python interpreter that keeps its globals
# between cells, run in the sandbox as one of its processes, as its user. Each line on stdin is a
# cell, {"code", "env_vars", "nonce"}; on the stdout it started with it writes the cell's lines
# as E2B's /execute streams them (number_of_executions, stdout, stderr, result, error), then
# {"type": "end_of_execution", "nonce"}. The cell's fds 1 and 2 are pipes read by a thread
# each, so what a subprocess prints comes too. SIGINT interrupts the running cell, not the
# context. Results are MIME bundles as a notebook makes them: the last expression's value,
# display() calls, and every open matplotlib figure at the cell's end or at plt.show().
import ast
import base64
import builtins
import codecs
import datetime
import io
import json
import linecache
import os
import signal
import sys
import threading
import traceback

PROTO = os.fdopen(os.dup(1), "wb", buffering=0)
PROTO_LOCK = threading.Lock()
MARK = b"\0ci-end-" + os.urandom(8).hex().encode() + b"\0"
# Representation methods and the result fields they fill (E2B's names).
REPRS = [("_repr_html_", "html"), ("_repr_markdown_", "markdown"), ("_repr_svg_", "svg"),
         ("_repr_png_", "png"), ("_repr_jpeg_", "jpeg"), ("_repr_pdf_", "pdf"),
         ("_repr_latex_", "latex"), ("_repr_json_", "json"), ("_repr_javascript_", "javascript")]
MIME = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
        "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf",
        "text/latex": "latex", "application/json": "json", "application/javascript": "javascript"}
BINARY = {"png", "jpeg", "pdf"}
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


def bundle(obj):
    """The value's formats, as E2B's result fields."""
    out = {}
    method = getattr(type(obj), "_repr_mimebundle_", None)
    if method is not None:
        try:
            data = obj._repr_mimebundle_()
            data = data[0] if isinstance(data, tuple) else data
            for mime, value in (data or {}).items():
                if mime in MIME:
                    out[MIME[mime]] = value
        except Exception:
            pass
    for name, key in REPRS:
        if key in out or getattr(type(obj), name, None) is None:
            continue
        try:
            value = getattr(obj, name)()
        except Exception:
            continue
        value = value[0] if isinstance(value, tuple) else value
        if value is not None:
            out[key] = value
    for key in BINARY & out.keys():
        if isinstance(out[key], bytes):
            out[key] = base64.b64encode(out[key]).decode()
    if "json" in out and isinstance(out["json"], str):
        try:
            out["json"] = json.loads(out["json"])
        except ValueError:
            del out["json"]
    if "text" not in out:
        out["text"] = repr(obj)
    text = out["text"]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        out["text"] = text[1:-1]  # as E2B's bridge shows a string
    return out


def display(*objs, **_):
    for obj in objs:
        emit_in_order({"type": "result", "is_main_result": False, **bundle(obj)})


def show_figures(*_, **__):
    """Every open matplotlib figure as a PNG result, then closed (plt.show() and a cell's end)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for number in plt.get_fignums():
        figure = plt.figure(number)
        png = io.BytesIO()
        try:
            figure.savefig(png, format="png", bbox_inches="tight")
        except Exception as e:
            emit({"type": "stderr", "text": "figure %d: %s\n" % (number, e), "timestamp": now()})
            continue
        emit_in_order({"type": "result", "is_main_result": False, "text": repr(figure),
                       "png": base64.b64encode(png.getvalue()).decode()})
    plt.close("all")


class InlineBackend:
    """matplotlib's backend `module://ci_inline`: Agg's, with a show() that sends the figures.
    A module made on import (matplotlib reads a backend's vars()), so nothing of matplotlib
    loads until a cell uses it."""

    def find_spec(self, name, path=None, target=None):
        if name != "ci_inline":
            return None
        import importlib.util
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import matplotlib.backends.backend_agg as agg
        module.__dict__.update({k: v for k, v in vars(agg).items() if not k.startswith("__")})
        module.show = show_figures


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
            emit_in_order({"type": "result", "is_main_result": True, **bundle(value)})
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


def interrupt(signum, frame):
    if RUNNING:
        raise KeyboardInterrupt


def main():
    global RUNNING
    signal.signal(signal.SIGINT, interrupt)
    cwd = sys.argv[1] if len(sys.argv) > 1 else "/home/user"
    os.chdir(cwd)
    sys.argv[:] = [""]
    sys.path.insert(0, cwd)
    sys.meta_path.append(InlineBackend())
    os.environ["MPLBACKEND"] = "module://ci_inline"
    CAPTURES.extend([Capture(1, "stdout"), Capture(2, "stderr")])
    # Line-buffered: a print() is one write (one stdout line); the rest goes at the cell's end.
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), line_buffering=True)
    builtins.display = display
    g = {"__name__": "__main__", "__builtins__": builtins, "display": display}
    requests = io.TextIOWrapper(os.fdopen(0, "rb", buffering=0), encoding="utf-8")
    number = 0
    for line in requests:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        number += 1
        emit({"type": "number_of_executions", "execution_count": number})
        RUNNING = True
        try:
            with_env(request.get("env_vars") or {},
                     lambda: (run_cell(request["code"], g, number), show_figures()))
        except KeyboardInterrupt as e:  # landed between the cell and its figures
            error(e)
        RUNNING = False
        settle()
        emit({"type": "end_of_execution", "nonce": request.get("nonce", "")})


main()
