#!/usr/bin/env python3
"""The curl examples of README.md and of every docs/*.md (the API tour and sessions of api.md,
agent.md, deployment.md, ...) against docs/openapi.json: every request they make is a documented
operation (method and path), and every JSON body they send is valid for that operation's request
schema; an upload (`-F file=@...`) is the documented multipart form. Then the other way: bodies
the daemon's parser refuses (request_parsing.cc) are refused by the schemas too, so a schema that
lost a rule fails here.

Usage: check_readme_requests.py REPO_ROOT
"""
import glob
import json
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from json_schema import Checker  # noqa: E402

# The examples' shell variables and placeholders, as values of their kind.
SAMPLES = {r"\$ID\b": "1b4e28ba-2fa1-41d2-883f-0016d3cca427",
           r"\$S\b": "code-session-0123456789abcdef0123456789abcdef",
           r"<new id>": "9f0c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"}
# Bodies request_parsing.cc refuses with 422, per operation.
REFUSED = [
    ("post", "/v1/execute", {}),
    ("post", "/v1/execute", {"code": 1}),
    ("post", "/v1/execute", {"code": "", "timeout_ms": 0}),
    ("post", "/v1/execute", {"code": "", "timeout_ms": 60001}),
    ("post", "/v1/execute", {"code": "", "timeout_ms": 1.5}),
    ("post", "/v1/execute", {"code": "", "stdin": 3}),
    ("post", "/v1/execute", {"code": "", "last_line_interactive": 1}),
    ("post", "/v1/execute", {"code": "", "files": [{"path": "a"}]}),
    ("post", "/v1/execute", {"code": "", "language": None}),
    ("post", "/v1/sessions", {"ttl_seconds": 0}),
    ("post", "/v1/sessions", {"ttl_seconds": 86401}),
    ("post", "/v1/sessions", {"files": {}}),
    ("post", "/v1/sessions/{session_id}/bash", {"timeout_ms": 5}),
    ("post", "/v1/sessions/{session_id}/bash", {"cmd": ["ls"]}),
    ("post", "/v1/sessions/{session_id}/files", {}),
    ("post", "/v1/sessions/{session_id}/files", [1]),
]


def shell_blocks(text):
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def logical_lines(block):
    """The block's commands: continuation lines joined, a quoted string may span lines."""
    pending = ""
    for line in block.splitlines(keepends=True):
        pending += line
        if pending.rstrip("\n").endswith("\\"):
            pending = pending.rstrip("\n")[:-1] + " "
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the string goes on
            continue
        yield pending
        pending = ""


def documents(root):
    """(name, text) of README.md and of every docs/*.md, the files that hold curl examples."""
    paths = [os.path.join(root, "README.md")]
    paths += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield os.path.relpath(path, root), f.read()


def curl_requests(text):
    """(method, path, body text or None, form fields) of every curl command of a document."""
    for block in shell_blocks(text):
        for line in logical_lines(block):
            for placeholder, value in SAMPLES.items():
                line = re.sub(placeholder, value, line)
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(lexer)
            while "curl" in words:
                words = words[words.index("curl") + 1:]
                end = next((i for i, w in enumerate(words) if w in ("|", ")", ";", "&&")), len(words))
                yield parse_curl(words[:end])
                words = words[end:]


def parse_curl(args):
    method, url, body, form = None, None, None, []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-X") and len(a) > 2:
            method = a[2:]
        elif a in ("-X", "--request"):
            i += 1
            method = args[i]
        elif a in ("-d", "--data", "--data-binary"):
            i += 1
            body = args[i]
        elif a in ("-F", "--form"):
            i += 1
            form.append(args[i].split("=", 1)[0])
        elif a in ("-H", "--header"):
            i += 1
        elif not a.startswith("-"):
            url = a
        i += 1
    if method is None:
        method = "POST" if body is not None or form else "GET"
    path = "/" + url.split("/", 1)[1] if "/" in url else "/"
    return method.lower(), path.split("?")[0], body, form


def find_operation(document, method, path):
    for template, item in document["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method in item:
            return template, item[method]
    return None, None


def check(root):
    with open(os.path.join(root, "docs", "openapi.json")) as f:
        document = json.load(f)
    checker = Checker(document)
    problems, seen = [], 0
    requests = [(name,) + request for name, text in documents(root)
                for request in curl_requests(text)]
    for name, method, path, body, form in requests:
        seen += 1
        where = "%s: curl %s %s" % (name, method.upper(), path)
        template, op = find_operation(document, method, path)
        if op is None:
            problems.append(where + ": no such operation in docs/openapi.json")
            continue
        content = checker.resolve(op.get("requestBody", {})).get("content", {})
        if form:
            schema = content.get("multipart/form-data", {}).get("schema")
            if schema is None:
                problems.append(where + ": sends a form, the operation takes none")
                continue
            problems += ["%s: %s" % (where, e) for e in checker.errors({f: "" for f in form}, schema)]
        elif body is not None:
            schema = content.get("application/json", {}).get("schema")
            if schema is None:
                problems.append(where + ": sends a JSON body, the operation takes none")
                continue
            try:
                value = json.loads(body)
            except ValueError as e:
                problems.append("%s: the body is not JSON (%s)" % (where, e))
                continue
            problems += ["%s: %s" % (where, e) for e in checker.errors(value, schema)]
    if seen < 15:
        problems.append("README.md, docs/*.md: only %d curl examples found; the extraction "
                        "broke" % seen)
    for method, template, body in REFUSED:
        op = document["paths"][template][method]
        schema = checker.resolve(op["requestBody"])["content"]["application/json"]["schema"]
        if not checker.errors(body, schema):
            problems.append("docs/openapi.json: %s %s accepts %s, which the daemon refuses"
                            % (method.upper(), template, json.dumps(body)))
    return seen, problems


def main():
    seen, problems = check(sys.argv[1])
    for p in problems:
        print(p)
    print("%d documented requests checked, %d problems" % (seen, len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
