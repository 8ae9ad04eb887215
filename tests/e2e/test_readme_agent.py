"""docs/agent.md "The agent loop": its example commands run verbatim (only `localhost:8000`
becomes the test daemon's address and `code-interpreter` the binary under test) against a daemon
whose model is the scripted model of tests/model, with nothing scripted: its default rules answer
the document's question as a model would. Each request must succeed and say what the document
says it does."""

import atexit
import os
import re
import shlex
import subprocess
import sys

from harness import Config, E2ETestCase

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
import scripted_model  # noqa: E402

MODEL = scripted_model.ScriptedModel().start()
atexit.register(MODEL.stop)
MODEL_ENV = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": MODEL.openai_base,
             "LLM_MODEL": "scripted"}
DIVISORS = "divisors: [1, 3, 31, 93, 12917, 38751, 400427, 1201281]"
STATUS_MARK = "\n@@status "  # what the test's curl wrapper prints after each response


def agent_doc():
    with open(os.path.join(ROOT, "docs/agent.md")) as f:
        return f.read()


def example_blocks():
    """The ```sh blocks of docs/agent.md (MCP's included) that talk to a running daemon: the ones
    with a curl request (the first block starts daemons)."""
    blocks = re.findall(r"```sh\n(.*?)```", agent_doc(), re.S)
    return [b for b in blocks if "curl " in b]


class ReadmeAgentExamplesTest(E2ETestCase):
    daemon_env = MODEL_ENV

    def setUp(self):
        super().setUp()
        self.require_host_daemon("docs/agent.md's `code-interpreter ask` runs the binary here")

    def run_block(self, block):
        """Runs one block in bash with every curl's HTTP status printed after its output."""
        script = block.replace("localhost:8000", f"{self.host}:{self.port}")
        script = re.sub(r"(?m)^code-interpreter ", shlex.quote(Config.bin_path) + " ", script)
        prelude = ("set -e -o pipefail\n"
                   "curl() { command curl -w '" + STATUS_MARK.replace("\n", "\\n") +
                   "%{http_code}\\n' \"$@\"; }\n")
        env = dict(os.environ, **MODEL_ENV)
        r = subprocess.run(["bash", "-c", prelude + script], capture_output=True, text=True,
                           env=env, timeout=180)
        self.assertEqual(r.returncode, 0, f"the block failed:\n{script}\nstdout:\n{r.stdout}\n"
                                          f"stderr:\n{r.stderr}")
        statuses = re.findall(r"@@status (\d+)", r.stdout)
        self.assertTrue(statuses, r.stdout)
        for s in statuses:
            self.assertTrue(s.startswith("2"), f"a request answered {s}:\n{r.stdout}")
        return r

    def test_the_examples_block_solves_streams_declares_and_asks(self):
        blocks = example_blocks()
        self.assertEqual(len(blocks), 2, "docs/agent.md's agent and MCP example blocks")
        r = self.run_block(blocks[0])
        out = r.stdout
        self.assertIn('"status":"solved"', out)
        self.assertIn(DIVISORS, out.replace("\\n", "\n"))  # in the solve answer's JSON
        for event in ("event: program", "event: output", "event: attempt", "event: result"):
            self.assertIn(event, out)
        self.assertIn('"format":"openai"', out)
        self.assertIn('"name":"solve_task"', out)
        self.assertIn('"functionDeclarations"', out)
        # `ask`: the model's final answer on stdout, the tool call reported on stderr.
        self.assertIn("Here is what the sandbox computed:", out)
        self.assertIn(DIVISORS, out)
        self.assertIn("[solve_task: solved after 1 attempt(s)]", r.stderr)

    def test_the_mcp_block_opens_lists_calls_and_ends_a_session(self):
        r = self.run_block(example_blocks()[1])
        self.assertIn('"name":"execute_code"', r.stdout)
        self.assertIn('"text":"42\\n"', r.stdout)
        self.assertIn('"isError":false', r.stdout)
        self.assertEqual(re.findall(r"@@status (\d+)", r.stdout), ["202", "200", "200", "200"])
