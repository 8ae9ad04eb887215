#!/usr/bin/env python3
"""Every reference to a document in the tree names a file and a section that exist in the repo.

Comments and docs cite design docs as `docs/api.md "Sessions"`, `api.md ("Overload")`,
`docs/api.md, "Files in the workspace"`, `wire-protocols.md A.4 "stdcopy framing"`,
`wire-protocols.md A.2-A.4` or `README.md "Rootless"`, sometimes across a comment's line break.
This finds each such reference in src/, tests/, policies/, scripts/, packaging/, docs/ and the
README, resolves the file and fails (exit 1, one line per broken reference) when the file is
missing, lies outside the repository, or has no heading of that name:

- a bare design-doc name (`api.md`) is `docs/api.md`; another path is tried against the citing
  file's folder, then the repository root (`README.md` in src/runtime/ is src/runtime/README.md);
- a section matches a Markdown heading equal to it or starting with it followed by a space or
  punctuation ("Rootless" matches "Rootless (the daemon as an unprivileged user)", "A.0" matches
  "A.0 Transport basics", never "A.01");
- `ID "Sub"` (`A.0 "Negotiation"`) needs the heading Sub inside section ID;
- Markdown links `[text](path.md#anchor)` need their file (anchors are not checked).

Usage: check_doc_refs.py [REPO_ROOT]   (default: the repository holding this script)
"""

import os
import re
import sys

SCANNED = ("src", "tests", "policies", "scripts", "packaging", "docs")
SCANNED_FILES = ("README.md", "meson.build", "meson_options.txt")
TEXT_SUFFIXES = (".h", ".cc", ".py", ".sh", ".md", ".build", ".txt", ".json", ".service", ".in",
                 ".cfg", ".toml", ".yaml", ".yml", "")
DESIGN_DOCS = ("agent", "api", "architecture", "configuration", "deployment", "e2b", "performance",
               "security", "testing", "wire-protocols")
HERE = os.path.dirname(os.path.realpath(__file__))  # the checker and its test: examples only

# A Markdown file named in text: not a URL, not an absolute path.
MD_TOKEN = re.compile(r"(?<![\w./:-])((?:\.{1,2}/)?(?:[\w-]+/)*[\w.-]+\.md)\b(?!/)")
# What may follow the file name: a quoted section, or a section id (A.4, B, A.2-A.4) with an
# optional quoted subsection.
QUOTED = re.compile(r'(?:\s*,\s*|\s+\(?)"([^"\n]{1,100})"')
SECTION_ID = re.compile(r"\s+([A-Z](?:\.\d+)?)(?:-([A-Z](?:\.\d+)?))?(?![\w-])")
LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)")
# Comment leaders dropped where a reference continues on the next line.
LEADER = re.compile(r"^\s*(?://+|#+(?!#)|\*+|--)?\s?")


def headings(path):
    """[(level, text)] of the Markdown headings of `path`."""
    out = []
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_fence = not in_fence
                continue
            m = None if in_fence else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                text = m.group(2).replace("`", "").replace("**", "")
                out.append((len(m.group(1)), text.strip()))
    return out


def matches(heading, name):
    if heading == name:
        return True
    return heading.startswith(name) and heading[len(name)] in " .:,(—-"


def find_section(heads, name, within=None):
    """Index of the heading `name`; with `within` (an index), only inside that section."""
    start, end = 0, len(heads)
    if within is not None:
        level = heads[within][0]
        start = within + 1
        for i in range(start, len(heads)):
            if heads[i][0] <= level:
                end = i
                break
    for i in range(start, end):
        if matches(heads[i][1], name):
            return i
    return None


def resolve(root, citing_dir, name):
    """The file a reference names, or None when it does not exist inside the repository."""
    stem = name[:-3]
    if "/" not in name and stem in DESIGN_DOCS:
        candidates = [os.path.join(root, "docs", name)]
    else:
        candidates = [os.path.join(citing_dir, name), os.path.join(root, name)]
    for c in candidates:
        real = os.path.realpath(c)
        if real.startswith(os.path.realpath(root) + os.sep) and os.path.isfile(real):
            return real
    return None


def flatten(text):
    """The text with each line's comment leader dropped and lines joined by one space, so a
    reference broken across comment lines reads as one; plus each line's start offset."""
    parts, starts, pos = [], [], 0
    for line in text.split("\n"):
        stripped = LEADER.sub("", line, count=1)
        starts.append(pos)
        parts.append(stripped)
        pos += len(stripped) + 1
    return " ".join(parts), starts


def line_of(starts, offset):
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def check_file(root, path, cache):
    """Problems of one file: ["path:line: reference: why"]."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return []
    rel = os.path.relpath(path, root)
    citing_dir = os.path.dirname(path)
    flat, starts = flatten(text)
    problems = []

    def heads_of(target):
        if target not in cache:
            cache[target] = headings(target)
        return cache[target]

    for m in MD_TOKEN.finditer(flat):
        name = m.group(1)
        where = f"{rel}:{line_of(starts, m.start())}"
        target = resolve(root, citing_dir, name)
        if target is None:
            problems.append(f"{where}: {name}: no such file in the repository")
            continue
        rest = flat[m.end():]
        wanted = []  # [(section, inside-section-id or None)]
        ident = SECTION_ID.match(rest) if name.endswith(tuple(d + ".md" for d in DESIGN_DOCS)) \
            else None
        if ident:
            wanted.append((ident.group(1), None))
            if ident.group(2):
                wanted.append((ident.group(2), None))
            sub = QUOTED.match(rest[ident.end():])
            if sub:
                wanted.append((sub.group(1), ident.group(1)))
        else:
            quoted = QUOTED.match(rest)
            if quoted:
                wanted.append((quoted.group(1), None))
        heads = heads_of(target) if wanted else []
        for section, within in wanted:
            parent = None
            if within is not None:
                parent = find_section(heads, within)
                if parent is None:
                    continue  # reported for the id itself
            if find_section(heads, section, parent) is None:
                inside = f" inside {within}" if within else ""
                problems.append(f'{where}: {name} "{section}": no such heading{inside} in '
                                f"{os.path.relpath(target, root)}")
    if path.endswith(".md"):
        for m in LINK.finditer(text):
            link = m.group(1)
            if "://" in link:
                continue
            real = os.path.realpath(os.path.join(citing_dir, link))
            inside = real.startswith(os.path.realpath(root) + os.sep)
            if not inside or not os.path.isfile(real):
                problems.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: link {link}: "
                                "no such file in the repository")
    return problems


def scanned_files(root):
    for name in SCANNED_FILES:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            yield path
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            # node_modules: installed packages (tests/mcp), not the project's documents.
            dirnames[:] = sorted(d for d in dirnames
                                 if not d.startswith(".") and d not in ("golden", "node_modules"))
            for f in sorted(filenames):
                path = os.path.join(dirpath, f)
                if os.path.splitext(f)[1] in TEXT_SUFFIXES and \
                        os.path.dirname(os.path.realpath(path)) != HERE:
                    yield path


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(HERE, "..", ".."))
    cache = {}
    problems, files = [], 0
    for path in scanned_files(root):
        files += 1
        problems += check_file(root, path, cache)
    for p in problems:
        print(p)
    print(f"{files} files scanned, {len(problems)} broken document reference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
