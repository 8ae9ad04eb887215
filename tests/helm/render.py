#!/usr/bin/env python3
"""`helm template` for packaging/helm/code-interpreter, without helm (Debian 12 has none): a
strict renderer of the small part of Helm's template language the chart uses, refusing anything
else with an error that names the template and the line.

    tests/helm/render.py [RELEASE] CHART [--namespace NS] [-f VALUES.yaml]... [--set K=V]...
        [--set-string K=V]...

prints the manifests as one multi-document YAML stream, as `helm template` does (`# Source:`
comments, Helm's install order of kinds). Values: the chart's values.yaml, then each -f file
merged over it, then each --set; a null removes a default, as in Helm.

The language: text and actions `{{ }}` with `{{-`/`-}}` trimming; `.Values.x`, `.Release.Name`,
`.Release.Namespace`, `.Chart.Name`/`.Version`/`.AppVersion`, `.` and `.field` (inside with and
range), `$` and the variables of `range $k, $v :=`; strings, numbers, true/false; pipelines
`a | f b` and parentheses; `if`/`else`/`end`, `with`, `range` over lists and maps (sorted keys),
`define` and `include`; the functions quote, toYaml, nindent, indent, default, required, fail,
b64enc, eq, ne, not, and, or. Files: Chart.yaml, values.yaml, templates/*.yaml and templates/_*.tpl
(defines only). Numbers print as Python prints them (Helm prints a values.yaml number >= 1e6 as
1e+06); a map or list must go through toYaml."""

import argparse
import base64
import copy
import os
import re
import sys

import yaml

FUNCTIONS = {"quote", "toYaml", "nindent", "indent", "default", "required", "fail", "b64enc",
             "eq", "ne", "not", "and", "or", "include"}
ALLOWED_BUILTINS = {"Release": {"Name", "Namespace"}, "Chart": {"Name", "Version", "AppVersion"}}
# Helm's other built-in objects: templates using them need a real helm.
REFUSED_BUILTINS = {"Capabilities", "Files", "Template", "Subcharts"}
# helm's releaseutil.InstallOrder: `helm template` prints the manifests in this order of kinds
# (one kind by template path), unknown kinds last.
INSTALL_ORDER = [
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "ConfigMap", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
    "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList",
    "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
    "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
    "Ingress", "APIService"]


class RenderError(Exception):
    """What helm would print after `Error: `."""


class TemplateError(RenderError):
    def __init__(self, template, line, message, kind="template"):
        where = {"template": f"template: {template}:{line}: ",
                 "parse": f"parse error at ({template}:{line}): ",
                 "fail": f"execution error at ({template}:{line}): "}[kind]
        super().__init__(where + message)
        self.template, self.line, self.message = template, line, message


# -- lexing and parsing ---------------------------------------------------------------------

TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<rtrim>-}})
  | (?P<close>}})
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?)
  | (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<dot>\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<declare>:=)
  | (?P<punct>[()|,])
""", re.X)
GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b",
              "f": "\f", "v": "\v"}


def unquote(text, err):
    """A Go string literal's value ("..." with its escapes)."""
    out, i = [], 1
    while i < len(text) - 1:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        n = {"x": 2, "u": 4, "U": 8}.get(e, 0)
        digits = text[i + 2:i + 2 + n]
        if e in GO_ESCAPES:
            out.append(GO_ESCAPES[e])
            i += 2
        elif n and re.fullmatch(f"[0-9a-fA-F]{{{n}}}", digits):
            out.append(chr(int(digits, 16)))
            i += 2 + n
        else:
            raise err(f"unknown escape sequence \\{e} in {text}")
    return "".join(out)


class Parser:
    """One template file -> a list of nodes; its defines go into `defines`."""

    def __init__(self, name, text, defines):
        self.name, self.text, self.defines = name, text, defines

    def err(self, line, message):
        return TemplateError(self.name, line, message, "parse")

    def lex(self):
        """-> items: ("text", str, line) and ("action", tokens, line); trimming applied."""
        text, items, pos = self.text, [], 0
        while True:
            start = text.find("{{", pos)
            if start < 0:
                items.append(["text", text[pos:], text.count("\n", 0, pos) + 1])
                break
            items.append(["text", text[pos:start], text.count("\n", 0, pos) + 1])
            line = text.count("\n", 0, start) + 1
            i = start + 2
            if text.startswith("-", i) and text[i + 1:i + 2] in (" ", "\t", "\r", "\n"):
                items[-1][1] = items[-1][1].rstrip(" \t\r\n")
                i += 1
            if text.startswith("/*", i) or text.startswith(" /*", i):
                raise self.err(line, "comments {{/* */}} are not supported (write a YAML "
                                     "# comment, or one outside the defines of a _*.tpl)")
            tokens, prev, trim_right = [], "ws", False
            while True:
                m = TOKEN.match(text, i)
                if not m:
                    if i >= len(text):
                        raise self.err(line, "unclosed action")
                    raise self.err(text.count("\n", 0, i) + 1,
                                   f"unsupported character {text[i]!r} in an action")
                kind, value = m.lastgroup, m.group()
                i = m.end()
                if kind == "rtrim":
                    if prev != "ws":
                        raise self.err(line, "'-}}' needs a space before it")
                    trim_right = True
                    break
                if kind == "close":
                    break
                # Go allows a field on a parenthesized pipeline, (x).f; this renderer does not.
                if kind in ("field", "dot") and prev not in ("ws", "declare") and not (
                        prev == "punct" and tokens[-1][1] in "(|,"):
                    raise self.err(line, f"field {value} applied to what precedes it is "
                                         "not supported")
                if kind != "ws":
                    tokens.append((kind, value))
                prev = kind
            items.append(["action", tokens, line])
            pos = i
            if trim_right:
                j = pos
                while j < len(text) and text[j] in " \t\r\n":
                    j += 1
                pos = j
        return items

    def parse(self):
        self.items = self.lex()
        self.pos = 0
        nodes, stop = self.parse_list(top=True)
        if stop is not None:
            raise self.err(stop[2], f"unexpected {{{{{stop[1][0][1]}}}}}")
        return nodes

    def parse_list(self, top=False):
        """Nodes until an `else` or `end` (returned as the stop item) or the end of the file."""
        nodes = []
        while self.pos < len(self.items):
            item = self.items[self.pos]
            self.pos += 1
            if item[0] == "text":
                if item[1]:
                    nodes.append(("text", item[1]))
                continue
            tokens, line = item[1], item[2]
            if not tokens:
                raise self.err(line, "missing value for command")
            head = tokens[0]
            word = head[1] if head[0] == "ident" else None
            if word in ("else", "end"):
                return nodes, item
            if word in ("if", "with", "range"):
                nodes.append(self.parse_block(word, tokens[1:], line))
            elif word == "define":
                if not top:
                    raise self.err(line, "define is allowed only at the top level of a file")
                if len(tokens) != 2 or tokens[1][0] != "string":
                    raise self.err(line, 'define takes one quoted name: {{ define "name" }}')
                name = unquote(tokens[1][1], lambda m: self.err(line, m))
                body, stop = self.parse_list()
                if stop is None or stop[1][0][1] != "end" or len(stop[1]) != 1:
                    raise self.err(line, f'define "{name}" has no {{{{ end }}}}')
                if name in self.defines:
                    raise self.err(line, f'template "{name}" is defined twice')
                self.defines[name] = (self.name, body)
            elif word in ("template", "block", "break", "continue", "nil"):
                raise self.err(line, f"{word} is not supported (the renderer knows if, else, "
                                     "end, with, range, define and include)")
            else:
                if any(t[0] == "declare" for t in tokens):
                    raise self.err(line, "variable assignment is not supported (only in "
                                         "range $k, $v := ...)")
                nodes.append(("action", self.parse_pipeline(tokens, line), line))
        return nodes, None

    def parse_block(self, word, tokens, line):
        variables = []
        if word == "range" and any(t[0] == "declare" for t in tokens):
            at = next(i for i, t in enumerate(tokens) if t[0] == "declare")
            decl = tokens[:at]
            names = [t[1] for t in decl if t[0] == "var"]
            shape_ok = (len(decl) == 1 and decl[0][0] == "var") or (
                len(decl) == 3 and decl[0][0] == "var" and decl[1] == ("punct", ",") and
                decl[2][0] == "var")
            if not shape_ok or any("." in n or n == "$" for n in names):
                raise self.err(line, "range declares $value or $key, $value")
            variables, tokens = names, tokens[at + 1:]
        elif any(t[0] == "declare" for t in tokens):
            raise self.err(line, f"variable assignment in {word} is not supported")
        if not tokens:
            raise self.err(line, f"missing value for {word}")
        pipe = self.parse_pipeline(tokens, line)
        body, stop = self.parse_list()
        other = []
        if stop is not None and stop[1][0][1] == "else":
            if len(stop[1]) != 1:
                raise self.err(stop[2], f"else {stop[1][1][1]} is not supported: nest the "
                                        f"{stop[1][1][1]} inside the else")
            other, stop = self.parse_list()
        if stop is None or stop[1][0][1] != "end":
            raise self.err(line, f"{word} has no {{{{ end }}}}")
        if len(stop[1]) != 1:
            raise self.err(stop[2], "end takes no arguments")
        return (word, pipe, body, other, line, variables)

    def parse_pipeline(self, tokens, line):
        """tokens -> [command]; command: [operand]; parentheses nest a pipeline."""
        pipeline, command, i = [], [], 0
        while i < len(tokens):
            kind, value = tokens[i]
            if kind == "punct" and value == "|":
                if not command:
                    raise self.err(line, "missing command before |")
                pipeline.append(command)
                command = []
            elif kind == "punct" and value == "(":
                depth, j = 1, i + 1
                while j < len(tokens) and depth:
                    if tokens[j][0] == "punct":
                        depth += {"(": 1, ")": -1}.get(tokens[j][1], 0)
                    j += 1
                if depth:
                    raise self.err(line, "unclosed (")
                command.append(("sub", self.parse_pipeline(tokens[i + 1:j - 1], line)))
                i = j
                continue
            elif kind == "punct":
                raise self.err(line, f"unexpected {value!r}")
            else:
                command.append(self.operand(kind, value, line, head=not command))
            i += 1
        if not command:
            raise self.err(line, "missing command")
        pipeline.append(command)
        for n, c in enumerate(pipeline):
            if c[0][0] != "func" and len(c) > 1:
                raise self.err(line, "only a function takes arguments")
            if n > 0 and c[0][0] != "func":
                raise self.err(line, "only a function can follow |")
        return pipeline

    def operand(self, kind, value, line, head):
        if kind == "string":
            return ("lit", unquote(value, lambda m: self.err(line, m)))
        if kind == "number":
            return ("lit", float(value) if "." in value else int(value))
        if kind == "dot":
            return ("field", [])
        if kind == "field":
            chain = value.split(".")[1:]
            self.check_builtin(chain, line)
            return ("field", chain)
        if kind == "var":
            name, *chain = value.split(".")
            if name == "$":
                self.check_builtin(chain, line)
            return ("var", name, chain)
        if kind == "ident":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value not in FUNCTIONS:
                raise self.err(line, f'function "{value}" is not supported (the renderer knows '
                                     f'{", ".join(sorted(FUNCTIONS))})')
            if not head:
                raise self.err(line, f"{value} as an argument needs parentheses: ({value} ...)")
            return ("func", value)
        raise self.err(line, f"unexpected {value!r}")

    def check_builtin(self, chain, line):
        if chain and chain[0] in REFUSED_BUILTINS:
            raise self.err(line, f".{chain[0]} is not supported")
        if chain and chain[0] in ALLOWED_BUILTINS:
            if len(chain) != 2 or chain[1] not in ALLOWED_BUILTINS[chain[0]]:
                known = ", ".join(f".{chain[0]}.{f}" for f in sorted(ALLOWED_BUILTINS[chain[0]]))
                raise self.err(line, f".{'.'.join(chain)} is not supported (only {known})")


# -- execution ------------------------------------------------------------------------------

def truthy(v):
    """Go's template truth: false, 0, nil and empty strings, lists and maps are false."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    if isinstance(v, (str, list, dict)):
        return len(v) > 0
    return v is not None


def type_name(v):
    return {type(None): "nil", bool: "bool", int: "int64", float: "float64", str: "string",
            list: "[]interface {}", dict: "map[string]interface {}"}.get(type(v),
                                                                          type(v).__name__)


def go_quote(s):
    """Go's %q of a string: its escapes, printable Unicode kept."""
    out = ['"']
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c in "\n\t\r\a\b\f\v":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
                        "\f": "\\f", "\v": "\\v"}[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return "".join(out) + '"'


def scalar_text(v, what):
    """How Go prints a value into the output (a nil is empty: Helm drops "<no value>")."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise RenderError(f"{what}: a {type_name(v)} cannot be printed here; use toYaml")


def to_yaml(v):
    text = yaml.safe_dump(v, default_flow_style=False, sort_keys=True, width=1 << 30,
                          allow_unicode=True)
    if text.endswith("\n...\n"):  # PyYAML's end of a lone scalar; sigs.k8s.io/yaml writes none
        text = text[:-4]
    return text[:-1] if text.endswith("\n") else text


class Renderer:
    def __init__(self, defines):
        self.defines = defines

    def run(self, template, nodes, dot, variables):
        out = []
        self.exec_list(template, nodes, dot, variables, out)
        return "".join(out)

    def exec_list(self, template, nodes, dot, variables, out):
        for node in nodes:
            kind = node[0]
            if kind == "text":
                out.append(node[1])
            elif kind == "action":
                value = self.pipeline(template, node[1], dot, variables, node[2])
                try:
                    out.append(scalar_text(value, "the action's value"))
                except RenderError as e:
                    raise TemplateError(template, node[2], str(e)) from None
            else:
                self.exec_block(template, node, dot, variables, out)

    def exec_block(self, template, node, dot, variables, out):
        word, pipe, body, other, line, names = node
        value = self.pipeline(template, pipe, dot, variables, line)
        if word == "if":
            self.exec_list(template, body if truthy(value) else other, dot, variables, out)
        elif word == "with":
            if truthy(value):
                self.exec_list(template, body, value, variables, out)
            else:
                self.exec_list(template, other, dot, variables, out)
        else:
            if isinstance(value, list):
                pairs = list(enumerate(value))
            elif isinstance(value, dict):
                pairs = sorted(value.items())
            elif value is None:
                pairs = []
            else:
                raise TemplateError(template, line, f"range can't iterate over {value!r}")
            for key, item in pairs:
                scope = dict(variables)
                if len(names) == 1:
                    scope[names[0]] = item
                elif len(names) == 2:
                    scope[names[0]], scope[names[1]] = key, item
                self.exec_list(template, body, item, scope, out)
            if not pairs:
                self.exec_list(template, other, dot, variables, out)

    def pipeline(self, template, pipeline, dot, variables, line):
        value, piped = None, False
        for command in pipeline:
            head = command[0]
            if head[0] == "func":
                args = command[1:]
                value = self.call(template, head[1], args, value if piped else _NOTHING, dot,
                                  variables, line)
            else:
                value = self.operand(template, head, dot, variables, line)
            piped = True
        return value

    def operand(self, template, op, dot, variables, line):
        kind = op[0]
        if kind == "lit":
            return op[1]
        if kind == "sub":
            return self.pipeline(template, op[1], dot, variables, line)
        if kind == "field":
            return self.fields(template, dot, op[1], line, "")
        if kind == "var":
            if op[1] not in variables:
                raise TemplateError(template, line, f"undefined variable: {op[1]}")
            return self.fields(template, variables[op[1]], op[2], line, op[1])
        raise TemplateError(template, line, f"cannot evaluate {op!r}")

    @staticmethod
    def fields(template, value, chain, line, start):
        path = start
        for name in chain:
            if value is None:
                raise TemplateError(template, line, f"nil pointer evaluating interface {{}}."
                                                    f"{name} (at {path or '.'})")
            if not isinstance(value, dict):
                raise TemplateError(template, line, f"can't evaluate field {name} in type "
                                                    f"{type_name(value)} (at {path or '.'})")
            value = value.get(name)
            path += "." + name
        return value

    def call(self, template, name, arg_ops, piped, dot, variables, line):
        def args():
            values = [self.operand(template, a, dot, variables, line) for a in arg_ops]
            return values + ([] if piped is _NOTHING else [piped])

        def want(values, *counts):
            if len(values) not in counts:
                raise TemplateError(template, line, f"wrong number of args for {name}: want "
                                                    f"{' or '.join(map(str, counts))} got "
                                                    f"{len(values)}")
            return values

        def string(v, what):
            if not isinstance(v, str):
                raise TemplateError(template, line, f"{name}: {what} must be a string, not "
                                                    f"{type_name(v)}")
            return v

        if name in ("and", "or"):
            # Go evaluates these lazily: the first false (and) or true (or) argument ends it.
            ops = list(arg_ops) + ([("lit", piped)] if piped is not _NOTHING else [])
            if not ops:
                raise TemplateError(template, line, f"wrong number of args for {name}")
            for op in ops:
                v = self.operand(template, op, dot, variables, line)
                if truthy(v) != (name == "and"):
                    return v
            return v
        values = args()
        if name == "quote":
            try:
                return " ".join(go_quote(scalar_text(v, "quote")) for v in values
                                if v is not None)
            except RenderError as e:
                raise TemplateError(template, line, str(e)) from None
        if name == "toYaml":
            return to_yaml(want(values, 1)[0])
        if name in ("nindent", "indent"):
            n, s = want(values, 2)
            if isinstance(n, bool) or not isinstance(n, int):
                raise TemplateError(template, line, f"{name}: the indent must be an integer")
            pad = " " * n
            s = pad + string(s, "the text").replace("\n", "\n" + pad)
            return "\n" + s if name == "nindent" else s
        if name == "default":
            fallback, *given = want(values, 1, 2)
            return given[0] if given and truthy(given[0]) else fallback
        if name == "required":
            message, v = want(values, 2)
            if v is None or v == "":
                raise TemplateError(template, line, string(message, "the message"), "fail")
            return v
        if name == "fail":
            raise TemplateError(template, line, string(want(values, 1)[0], "the message"),
                                "fail")
        if name == "b64enc":
            return base64.b64encode(string(want(values, 1)[0], "the value").encode()).decode()
        if name in ("eq", "ne"):
            if len(values) < 2 or (name == "ne" and len(values) != 2):
                want(values, 2)
            first = values[0]
            equal = any(self.equal(template, line, first, v) for v in values[1:])
            return equal if name == "eq" else not equal
        if name == "not":
            return not truthy(want(values, 1)[0])
        if name == "include":
            template_name, data = want(values, 2)
            if template_name not in self.defines:
                raise TemplateError(template, line, f'no template "{template_name}" '
                                                    "associated with template \"gotpl\"")
            where, body = self.defines[template_name]
            return self.run(where, body, data, {"$": data})
        raise TemplateError(template, line, f'function "{name}" not defined')

    @staticmethod
    def equal(template, line, a, b):
        """Go's eq: nil equals only nil; other kinds must match (numbers with numbers)."""
        if a is None or b is None:
            return a is None and b is None
        kinds = [("bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float))
                  else "string" if isinstance(v, str) else None) for v in (a, b)]
        if None in kinds:
            raise TemplateError(template, line, f"non-comparable type {type_name(a)} or "
                                                f"{type_name(b)}")
        if kinds[0] != kinds[1]:
            raise TemplateError(template, line, "incompatible types for comparison")
        return a == b


_NOTHING = object()  # no piped value


# -- values ---------------------------------------------------------------------------------

def merge_maps(base, over):
    """helm's mergeMaps (-f files in order): maps merge, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge_maps(out[k], v) if isinstance(v, dict) and isinstance(out.get(k),
                                                                              dict) else v
    return out


def coalesce(user, defaults):
    """helm's CoalesceValues: the user's values win, maps merge, a user's null deletes."""
    out = copy.deepcopy(user)
    for k, d in defaults.items():
        if k not in out:
            out[k] = copy.deepcopy(d)
        elif out[k] is None:
            del out[k]
        elif isinstance(out[k], dict) and isinstance(d, dict):
            out[k] = coalesce(out[k], d)
    return out


def split_unescaped(text, sep):
    parts, cur, depth, i = [], [], 0, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def typed(value, as_string):
    """helm's strvals typedVal: true/false, null, integers without a leading zero, else text."""
    if as_string:
        return value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value.lower() == "null":
        return None
    if value == "0" or (value and value[0] != "0" and re.fullmatch(r"[+-]?[0-9]+", value)):
        return int(value)
    return value


def unescape(text):
    return re.sub(r"\\(.)", r"\1", text)


def set_value(values, assignment, as_string):
    """One --set (or --set-string) K=V[,K=V]: a.b, a[0].b and {x,y} lists, as helm's strvals."""
    for part in split_unescaped(assignment, ","):
        key, sep, raw = part.partition("=")
        if not sep or not key:
            raise RenderError(f"failed parsing --set data: key {part!r} has no value")
        if raw.startswith("{") and raw.endswith("}"):
            inner = raw[1:-1]
            value = [typed(unescape(x), as_string) for x in split_unescaped(inner, ",")] \
                if inner else []
        else:
            value = typed(unescape(raw), as_string)
        steps = []
        for segment in split_unescaped(key, "."):
            m = re.fullmatch(r"((?:[^\[\\]|\\.)+)((?:\[[0-9]+\])*)", segment)
            if not m:
                raise RenderError(f"failed parsing --set data: bad key {key!r}")
            steps.append(unescape(m.group(1)))
            steps += [int(i) for i in re.findall(r"\[([0-9]+)\]", m.group(2))]
        node = values
        for step, nxt in zip(steps, steps[1:] + [None]):
            empty = [] if isinstance(nxt, int) else {}
            if isinstance(step, int):
                if not isinstance(node, list):
                    raise RenderError(f"failed parsing --set data: {key!r} indexes a non-list")
                node.extend([None] * (step + 1 - len(node)))
            elif not isinstance(node, dict):
                raise RenderError(f"failed parsing --set data: {key!r} is inside a non-map")
            if nxt is None:
                node[step] = value
            else:
                if not isinstance(node[step] if isinstance(step, int) else node.get(step),
                                  (dict, list)):
                    node[step] = empty
                node = node[step]
    return values


def string_keys(value):
    """Map keys as text, as sigs.k8s.io/yaml (YAML through JSON) leaves them for helm."""
    if isinstance(value, dict):
        return {(str(k).lower() if isinstance(k, bool) else str(k)): string_keys(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [string_keys(v) for v in value]
    return value


def load_yaml_file(path):
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise RenderError(f"{path}: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RenderError(f"{path}: not a map of values")
    return string_keys(data)


# -- the chart ------------------------------------------------------------------------------

def render(chart_dir, release="release-name", namespace="default", value_files=(), sets=(),
           set_strings=()):
    """The manifests `helm template RELEASE CHART` prints, as one string."""
    chart = load_yaml_file(os.path.join(chart_dir, "Chart.yaml"))
    for key in ("apiVersion", "name", "version"):
        if key not in chart:
            raise RenderError(f"Chart.yaml: {key} is required")
    if chart["apiVersion"] != "v2":
        raise RenderError("Chart.yaml: only apiVersion v2 charts are rendered")
    name = chart["name"]
    user = {}
    for path in value_files:
        user = merge_maps(user, load_yaml_file(path))
    for s in sets:
        set_value(user, s, False)
    for s in set_strings:
        set_value(user, s, True)
    values = coalesce(user, load_yaml_file(os.path.join(chart_dir, "values.yaml")))
    top = {"Values": values, "Release": {"Name": release, "Namespace": namespace},
           "Chart": {"Name": name, "Version": str(chart["version"]),
                     "AppVersion": str(chart.get("appVersion", ""))}}

    templates_dir = os.path.join(chart_dir, "templates")
    defines, parsed = {}, []
    for entry in sorted(os.listdir(templates_dir)):
        path = os.path.join(templates_dir, entry)
        template = f"{name}/templates/{entry}"
        partial = entry.startswith("_")
        if os.path.isdir(path) or not (entry.endswith(".tpl") and partial or
                                       entry.endswith(".yaml") and not partial):
            raise RenderError(f"{template}: only templates/*.yaml and templates/_*.tpl are "
                              "rendered")
        with open(path) as f:
            nodes = Parser(template, f.read(), defines).parse()
        if partial:
            continue  # its text outside defines is not output, as in helm
        parsed.append((template, nodes))

    renderer = Renderer(defines)
    manifests = []
    for template, nodes in parsed:
        text = renderer.run(template, nodes, top, {"$": top})
        for doc in re.split(r"(?:^|\n)---[ \t]*(?:\n|$)", text):
            if not doc.strip():
                continue
            try:
                obj = yaml.safe_load(doc)
            except yaml.YAMLError as e:
                raise RenderError(f"YAML parse error on {template}: {e}") from None
            if obj is None:
                continue  # comments only
            if not isinstance(obj, dict) or "kind" not in obj:
                raise RenderError(f"{template}: a manifest without a kind")
            manifests.append((template, obj["kind"], doc.strip("\n")))
    order = {k: i for i, k in enumerate(INSTALL_ORDER)}
    manifests.sort(key=lambda m: (order.get(m[1], len(order)), m[1] if m[1] not in order
                                  else ""))
    return "".join(f"---\n# Source: {t}\n{doc}\n" for t, _, doc in manifests)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="+", metavar="[RELEASE] CHART")
    p.add_argument("--namespace", "-n", default="default")
    p.add_argument("--values", "-f", action="append", default=[])
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--set-string", action="append", default=[])
    args = p.parse_args(argv)
    if len(args.names) > 2:
        p.error("at most RELEASE and CHART")
    release, chart = (["release-name"] + args.names)[-2:]
    try:
        out = render(chart, release, args.namespace, args.values, args.set, args.set_string)
    except RenderError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
