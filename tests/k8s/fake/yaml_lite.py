"""Just enough YAML for CustomResourceDefinition files as controller-gen writes them (block
mappings and sequences, plain, quoted and block scalars, `{}`/`[]`, `---` documents), so the
fake can load them at start without a YAML library (the fake is stdlib only). JSON files
(a subset of YAML) are read with json."""

import json
import re

_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def _scalar(text):
    text = text.strip()
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return json.loads(text)
    if text.startswith(("{", "[")):
        return json.loads(text)  # flow style: only its JSON-compatible forms
    if text in ("null", "~", ""):
        return None
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _strip_comment(text):
    if text.lstrip().startswith("#"):
        return ""
    return re.sub(r"\s+#.*$", "", text) if not text.lstrip().startswith(("'", '"')) else text


class _Parser:
    def __init__(self, lines):
        self.lines = lines  # [(indent, text)], no blank or comment lines
        self.i = 0

    def node(self, indent):
        ind, text = self.lines[self.i]
        if text == "-" or text.startswith("- "):
            return self.sequence(ind)
        if self._is_entry(text):
            return self.mapping(ind)
        return self.scalar_lines(indent - 1, text)

    @staticmethod
    def _is_entry(text):
        if text.startswith(("'", '"', "{", "[")):
            return False
        return bool(re.match(r"^[^\s:][^:]*?:(\s|$)", text))

    def scalar_lines(self, parent_indent, first):
        """A scalar starting with `first` (on the line already consumed) and continued by the
        following lines indented deeper than its key."""
        first = first.strip()
        if first in ("|", "|-", "|+", ">", ">-", ">+"):
            body = []
            while self.i < len(self.lines) and self.lines[self.i][0] > parent_indent:
                body.append(self.raw[self.i + self.offset])
                self.i += 1
            base = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
            body = [b[base:] for b in body]
            text = ("\n" if first[0] == "|" else " ").join(body)
            return text + ("\n" if not first.endswith("-") else "")
        parts = [first]
        while self.i < len(self.lines) and self.lines[self.i][0] > parent_indent and \
                not (first.startswith(('"', "'")) and self._closed(" ".join(parts))):
            parts.append(self.lines[self.i][1].strip())
            self.i += 1
        return _scalar(" ".join(parts))

    @staticmethod
    def _closed(text):
        q = text[0]
        return len(text) >= 2 and text.endswith(q)

    def mapping(self, ind):
        out = {}
        while self.i < len(self.lines):
            line_ind, text = self.lines[self.i]
            if line_ind != ind or text == "-" or text.startswith("- "):
                break
            m = re.match(r"^([^\s:][^:]*?):(\s+(.*))?$", text)
            if not m:
                raise ValueError(f"yaml_lite: line {self.i + 1}: not a mapping entry: {text!r}")
            key, value = m.group(1).strip(), (m.group(3) or "").strip()
            if key.startswith(("'", '"')):
                key = _scalar(key)
            self.i += 1
            if value:
                out[key] = self.scalar_lines(ind, value)
            elif self.i < len(self.lines) and (self.lines[self.i][0] > ind or (
                    self.lines[self.i][0] == ind and (self.lines[self.i][1] == "-" or
                                                      self.lines[self.i][1].startswith("- ")))):
                out[key] = self.node(self.lines[self.i][0])
            else:
                out[key] = None
        return out

    def sequence(self, ind):
        out = []
        while self.i < len(self.lines):
            line_ind, text = self.lines[self.i]
            if line_ind != ind or not (text == "-" or text.startswith("- ")):
                break
            rest = text[1:].lstrip()
            if not rest:
                self.i += 1
                out.append(self.node(self.lines[self.i][0]) if self.i < len(self.lines) and
                           self.lines[self.i][0] > ind else None)
                continue
            item_ind = ind + (len(text) - len(rest))
            if self._is_entry(rest) or rest == "-" or rest.startswith("- "):
                self.lines[self.i] = (item_ind, rest)
                out.append(self.node(item_ind))
            else:
                self.i += 1
                out.append(self.scalar_lines(ind, rest))
        return out


def load_all(text):
    """The documents of a YAML (or JSON) text, None documents left out."""
    if text.lstrip().startswith(("{", "[")):
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    docs, current = [], []
    for raw in text.split("\n") + ["---"]:
        if raw.rstrip() == "---" or raw.startswith("--- "):
            if current:
                docs.append(current)
            current = []
        else:
            current.append(raw)
    out = []
    for raw in docs:
        lines, keep = [], []
        for j, line in enumerate(raw):
            text = _strip_comment(line.rstrip())
            if text.strip():
                lines.append((len(text) - len(text.lstrip()), text.strip()))
                keep.append(j)
        if not lines:
            continue
        p = _Parser(lines)
        # Block scalars need the raw lines: index the kept ones.
        p.raw = [raw[j] for j in keep]
        p.offset = 0
        doc = p.node(lines[0][0])
        if p.i != len(lines):
            raise ValueError(f"yaml_lite: unexpected line {lines[p.i][1]!r}")
        if doc is not None:
            out.append(doc)
    return out
