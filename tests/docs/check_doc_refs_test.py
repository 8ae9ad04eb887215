#!/usr/bin/env python3
"""check_doc_refs.py against small trees written here: each kind of reference it must accept, and
each broken one it must report (so the repository check can fail)."""

import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "check_doc_refs.py")

DOCS = {
    "docs/api.md": "# API\n\n## Sessions\n\n## Files in the workspace\n\n### Output limits\n",
    "docs/wire-protocols.md": ("# Wire\n\n## A. Engine\n\n### A.0 Transport basics\n\n"
                               "#### Negotiation\n\n### A.1 Images\n\n### A.4 Exec\n\n"
                               "#### stdcopy framing\n\n## B. DOCKER_HOST\n"),
    "src/runtime/README.md": "# Runtime\n\n## Rootless (the daemon as an unprivileged user)\n",
    "README.md": "# Top\n\n## Configuration (environment)\n",
}


def run(files):
    """(exit code, output) of the checker on a tree of DOCS plus `files`."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in {**DOCS, **files}.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        p = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
        return p.returncode, p.stdout


class AcceptsTest(unittest.TestCase):
    def assertClean(self, text, path="src/x.h"):
        code, out = run({path: text})
        self.assertEqual(code, 0, out)

    def test_quoted_section(self):
        self.assertClean('// Sessions (docs/api.md "Sessions").\n')

    def test_bare_design_doc_name_and_parenthesised_section(self):
        self.assertClean('// see api.md ("Sessions")\n')

    def test_comma_and_line_break(self):
        self.assertClean('// the rules (docs/api.md,\n// "Files in the workspace") apply\n')

    def test_section_id_range_and_subsection(self):
        self.assertClean("// exec (wire-protocols.md A.0-A.4), TLS (wire-protocols.md B)\n"
                         '// versions (wire-protocols.md A.0 "Negotiation"), frames\n'
                         '// (wire-protocols.md A.4\n// "stdcopy framing")\n')

    def test_heading_prefix_and_readme_next_to_the_citing_file(self):
        self.assertClean('// rootless (see README.md "Rootless")\n', path="src/runtime/plan.h")

    def test_readme_at_the_root_from_docs(self):
        self.assertClean('see README.md "Configuration (environment)"\n', path="docs/more.md")

    def test_file_only_and_a_string_literal_after_a_file_name(self):
        self.assertClean('// docs/api.md\nRead("README.md"); const char* x = "y";\n')

    def test_link(self):
        self.assertClean("[the API](api.md#sessions)\n", path="docs/more.md")


class ReportsTest(unittest.TestCase):
    def assertBroken(self, text, expected, path="src/x.h"):
        code, out = run({path: text})
        self.assertEqual(code, 1, out)
        self.assertIn(expected, out)

    def test_missing_heading(self):
        self.assertBroken('// docs/api.md "Overload"\n', 'src/x.h:1: docs/api.md "Overload"')

    def test_missing_heading_on_the_next_comment_line(self):
        self.assertBroken('// a\n// (docs/api.md,\n// "Nothing here")\n',
                          'src/x.h:2: docs/api.md "Nothing here"')

    def test_missing_file(self):
        self.assertBroken("# see docs/security.md\n", "docs/security.md: no such file",
                          path="tests/t.py")

    def test_file_outside_the_repository(self):
        self.assertBroken("// ../shared/docs/api.md\n", "../shared/docs/api.md: no such file")

    def test_missing_section_id(self):
        self.assertBroken("// wire-protocols.md A.2-A.4\n", 'wire-protocols.md "A.2"')

    def test_id_is_not_a_prefix_of_a_longer_id(self):
        self.assertBroken("// wire-protocols.md A.01\n", 'wire-protocols.md "A.01"')

    def test_subsection_in_another_section(self):
        self.assertBroken('// wire-protocols.md A.1 "Negotiation"\n',
                          '"Negotiation": no such heading inside A.1')

    def test_broken_link(self):
        self.assertBroken("[x](../missing.md)\n", "link ../missing.md", path="docs/more.md")


if __name__ == "__main__":
    unittest.main()
