# ci: run ahead (the fork server runs this once: runtime/init/warm_up.py)
# Rich results as a notebook makes them (docs/api.md "Rich results"), shared by the Python
# programs that run code (python_driver.py, the session server, E2B's code_context.py), which
# run this source into a namespace of their own and call install(sink): each result, a dict of
# E2B's field names (text, html, png base64, ...), goes to sink. Results come from display(),
# from matplotlib's show() and, at finish(), every figure still open; bundle() makes a value's.
import base64
import builtins
import importlib.machinery  # here, not in Finder.find_spec: there its import would recurse
import importlib.util
import io
import json
import sys

# Representation methods and the result fields they fill.
REPRS = [("_repr_html_", "html"), ("_repr_markdown_", "markdown"), ("_repr_svg_", "svg"),
         ("_repr_png_", "png"), ("_repr_jpeg_", "jpeg"), ("_repr_pdf_", "pdf"),
         ("_repr_latex_", "latex"), ("_repr_json_", "json"), ("_repr_javascript_", "javascript")]
MIME = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
        "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf",
        "text/latex": "latex", "application/json": "json", "application/javascript": "javascript"}
BINARY = {"png", "jpeg", "pdf"}
BACKEND = "module://ci_inline"
SINK = None


def rich(obj):
    """Whether the value has a format beyond its repr."""
    kind = type(obj)
    return any(getattr(kind, name, None) is not None for name, _ in REPRS) or \
        getattr(kind, "_repr_mimebundle_", None) is not None


def bundle(obj):
    """The value's formats, as E2B's result fields."""
    out = {}
    if getattr(type(obj), "_repr_mimebundle_", None) is not None:
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
        SINK({"is_main_result": False, **bundle(obj)})


def show_figures(*_, **__):
    """Every open matplotlib figure as a PNG result, then closed (plt.show() and finish())."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for number in plt.get_fignums():
        figure = plt.figure(number)
        png = io.BytesIO()
        try:
            figure.savefig(png, format="png", bbox_inches="tight")
        except Exception as e:
            print("figure %d: %s" % (number, e), file=sys.stderr)
            continue
        SINK({"is_main_result": False, "text": repr(figure),
              "png": base64.b64encode(png.getvalue()).decode()})
    plt.close("all")


def use_inline_backend(matplotlib):
    """matplotlib's default backend becomes ours, unless the program's environment names one."""
    import os
    if "MPLBACKEND" not in os.environ and "matplotlib.pyplot" not in sys.modules:
        matplotlib.rcParams["backend"] = BACKEND


class Finder:
    """Serves `ci_inline` (Agg's backend with a show() that sends the figures: a module made on
    import, as matplotlib reads a backend's vars()) and, once matplotlib is imported, makes it
    the default; nothing of matplotlib loads until the program imports it, and subprocesses'
    matplotlib is untouched."""

    def find_spec(self, name, path=None, target=None):
        if name == "ci_inline":
            return importlib.util.spec_from_loader(name, self)
        if name != "matplotlib":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            loader = spec.loader
            run = loader.exec_module

            def exec_module(module):
                run(module)
                use_inline_backend(module)
            loader.exec_module = exec_module
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import matplotlib.backends.backend_agg as agg
        module.__dict__.update({k: v for k, v in vars(agg).items() if not k.startswith("__")})
        module.show = show_figures


def install(sink):
    global SINK
    SINK = sink
    builtins.display = display
    if "matplotlib" in sys.modules:  # imported ahead (warm imports)
        use_inline_backend(sys.modules["matplotlib"])
    else:
        sys.meta_path.insert(0, Finder())


def finish():
    show_figures()
