"""Every behaviour of an execution that is not Python's own, for the other languages: the same
program written in bash, JavaScript and Go, and the same answer expected from each (output, exit
status, stdin, files in and out, timeouts, the sandbox's limits and isolation). Python's are the
cases of test_execute.py and test_hostile.py; its programs here show what the others mirror."""

import unittest

from harness import E2ETestCase

LANGUAGES = ("bash", "javascript", "go")

# Enough for Go's build on a loaded machine (a net/http program builds in ~1 s on an idle one).
BUILD_TIMEOUT_MS = 20000

GO_MAIN = "package main\n\n{imports}\nfunc main() {{\n{body}\n}}\n"


def go(body, *imports):
    listed = "import (\n" + "".join(f'\t"{i}"\n' for i in imports) + ")\n" if imports else ""
    return GO_MAIN.format(imports=listed, body=body)


# behaviour -> language -> program
PROGRAMS = {
    "hello": {
        "python": "print('hello')",
        "bash": "echo hello",
        "javascript": "console.log('hello')",
        "go": go('\tfmt.Println("hello")', "fmt"),
    },
    "stderr_and_exit_code": {
        "python": "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)",
        "bash": "echo out; echo err >&2; exit 3",
        "javascript": "console.log('out'); console.error('err'); process.exitCode = 3",
        "go": go('\tfmt.Println("out")\n\tfmt.Fprintln(os.Stderr, "err")\n\tos.Exit(3)', "fmt",
                 "os"),
    },
    "stdin": {
        "python": "import sys\n_ = sys.stdout.write(sys.stdin.read().upper())",
        "bash": "tr a-z A-Z",
        "javascript": "let d = ''; process.stdin.on('data', c => d += c);\n"
                      "process.stdin.on('end', () => process.stdout.write(d.toUpperCase()))",
        "go": go("\tb, _ := io.ReadAll(os.Stdin)\n\tos.Stdout.Write(bytes.ToUpper(b))", "bytes",
                 "io", "os"),
    },
    "files_in_and_out": {
        "python": "t = open('data/in.txt').read()\nopen('out.txt', 'w').write(t + '!')",
        "bash": 'printf "%s!" "$(cat data/in.txt)" > out.txt',
        "javascript": "const fs = require('fs');\n"
                      "fs.writeFileSync('out.txt', fs.readFileSync('data/in.txt', 'utf8') + '!')",
        "go": go('\tb, _ := os.ReadFile("data/in.txt")\n'
                 '\tos.WriteFile("out.txt", append(b, \'!\'), 0o644)', "os"),
    },
    "timeout": {
        "python": "import time\nprint('started', flush=True)\ntime.sleep(60)",
        "bash": "echo started; sleep 60",
        "javascript": "console.log('started'); setTimeout(() => {}, 60000)",
        "go": go('\tfmt.Println("started")\n\ttime.Sleep(time.Minute)', "fmt", "time"),
    },
    "no_network": {
        "python": "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), 5)\n"
                  "    print('open')\nexcept OSError:\n    print('blocked')",
        "bash": "(exec 3<>/dev/tcp/1.1.1.1/80) 2>/dev/null && echo open || echo blocked",
        "javascript": "require('net').connect(80, '1.1.1.1')\n"
                      "  .on('connect', () => { console.log('open'); process.exit(0) })\n"
                      "  .on('error', () => console.log('blocked'))",
        "go": go('\t_, err := net.DialTimeout("tcp", "1.1.1.1:80", 5*time.Second)\n'
                 '\tif err != nil {\n'
                 '\t\tfmt.Println("blocked")\n\t} else {\n\t\tfmt.Println("open")\n\t}',
                 "fmt", "net", "time"),
    },
    "identity_and_read_only_root": {
        "python": "import os\ntry:\n    open('/usr/x', 'w')\n    print('wrote')\n"
                  "except OSError:\n    print(os.getuid(), os.getcwd(), 'denied')",
        "bash": "touch /usr/x 2>/dev/null && echo wrote || echo $(id -u) $PWD denied",
        "javascript": "try { require('fs').writeFileSync('/usr/x', ''); console.log('wrote') }\n"
                      "catch (e) { console.log(process.getuid(), process.cwd(), 'denied') }",
        "go": go('\tif err := os.WriteFile("/usr/x", nil, 0o644); err != nil {\n'
                 '\t\twd, _ := os.Getwd()\n\t\tfmt.Println(os.Getuid(), wd, "denied")\n'
                 '\t} else {\n\t\tfmt.Println("wrote")\n\t}', "fmt", "os"),
    },
    "memory_limit": {
        "python": "x = bytearray(1 << 30)\nprint(len(x))",
        "bash": "dd if=/dev/zero of=/dev/null bs=1G count=1",
        "javascript": "const b = Buffer.alloc(1 << 30, 1); console.log(b.length)",
        "go": go("\tb := make([]byte, 1<<30)\n\tfor i := range b {\n\t\tb[i] = 1\n\t}\n"
                 "\tfmt.Println(len(b))", "fmt"),
    },
    "pids_limit": {
        # Processes that stay, until the sandbox's pids limit refuses one: then a failure.
        "python": "import subprocess\nwhile True:\n    subprocess.Popen(['sleep', '60'])",
        "bash": "for i in $(seq 200); do setsid sleep 60 & done; wait; "
                "[ $(ps -e --no-headers | wc -l) -lt 200 ] && exit 1",
        "javascript": "const { spawn } = require('child_process');\n"
                      "(function more() { spawn('sleep', ['60']).on('error', e => {\n"
                      "  console.error(e.code); process.exit(1) }); setImmediate(more) })()",
        "go": go('\tfor {\n\t\tif err := exec.Command("sleep", "60").Start(); err != nil {\n'
                 '\t\t\tfmt.Fprintln(os.Stderr, err)\n\t\t\tos.Exit(1)\n\t\t}\n\t}',
                 "fmt", "os", "os/exec"),
    },
    "cpu_limit": {
        "python": "while True:\n    pass",
        "bash": "while :; do :; done",
        "javascript": "for (;;) {}",
        "go": go("\tfor {\n\t}"),
    },
}


def available_languages(test):
    r = test.client.get("/v1/languages")
    test.assertEqual(r.status, 200, r)
    return {e["name"] for e in r.json["languages"]}


class LanguageMatrixTest(E2ETestCase):
    """One test per behaviour, a subtest per language. A language this backend's sandbox root
    lacks is a skipped subtest where that is expected (JavaScript is not in the executor image);
    bash and Go are everywhere, so their absence fails under CI_E2E_NO_SKIP=1. A CPU limit of 2 s
    (not 5) keeps the CPU bombs short; Go's build steps stay far below it."""

    daemon_env = {"CPU_TIME_LIMIT_SEC": "2"}

    def for_each_language(self, behaviour, check, **fields):
        """check(language, result) for the behaviour's program in each language. Go's build is
        part of its run: a timeout well past it unless the case is about timeouts."""
        fields.setdefault("timeout_ms", BUILD_TIMEOUT_MS)
        available = available_languages(self)
        for language in LANGUAGES:
            with self.subTest(language=language):
                if language not in available:
                    if language == "javascript":
                        self.skipTest("javascript is not installed in this backend's sandboxes")
                    self.skip_or_fail(f"{language} is not an available language here")
                check(language, self.execute(PROGRAMS[behaviour][language], language=language,
                                             **fields))

    def test_hello(self):
        def check(language, res):
            self.assertEqual((res["stdout"], res["stderr"], res["exit_code"], res["verdict"]),
                             ("hello\n", "", 0, "ok"), res)
        self.for_each_language("hello", check)

    def test_stderr_and_exit_code(self):
        def check(language, res):
            self.assertEqual((res["stdout"], res["stderr"], res["exit_code"], res["verdict"]),
                             ("out\n", "err\n", 3, "error"), res)
        self.for_each_language("stderr_and_exit_code", check)

    def test_stdin(self):
        def check(language, res):
            self.assertEqual((res["stdout"], res["exit_code"]), ("ABC\nDEF\n", 0), res)
        self.for_each_language("stdin", check, stdin="abc\ndef\n")

    def test_files_in_and_out(self):
        def check(language, res):
            self.assertEqual(res["exit_code"], 0, res)
            self.assertEqual([f["path"] for f in res["files"]], ["out.txt"], res)
            self.assertEqual(self.download(res["files"][0]["file_id"]).body, b"staged!")
        file_id = self.upload_ok("in.txt", b"staged")
        self.for_each_language("files_in_and_out", check,
                               files=[{"path": "data/in.txt", "file_id": file_id}])

    def test_timeout(self):
        def check(language, res):
            self.assertEqual((res["stdout"], res["timed_out"], res["verdict"]),
                             ("started\n", True, "timed_out"), res)
        self.for_each_language("timeout", check, timeout_ms=3000)

    def test_no_network(self):
        def check(language, res):
            self.assertEqual((res["stdout"], res["exit_code"]), ("blocked\n", 0), res)
        self.for_each_language("no_network", check)

    def test_identity_and_read_only_root(self):
        def check(language, res):
            self.assertEqual(res["stdout"], "65532 /workspace denied\n", res)
        self.for_each_language("identity_and_read_only_root", check)

    def test_memory_limit(self):
        downgraded = self.cgroup_downgraded()

        def check(language, res):
            self.assertEqual(res["stdout"], "", res)
            self.assertNotEqual(res["exit_code"], 0, res)
            # Without a cgroup (rootless): RLIMIT_DATA refuses the allocation, the program fails.
            self.assertEqual(res["verdict"], "error" if downgraded else "memory_limit", res)
        self.for_each_language("memory_limit", check, timeout_ms=30000)
        self.assertHealthy()

    def test_pids_limit(self):
        # Bash retries a refused fork for 15 s: the run ends at its timeout, still pids_limit.
        downgraded = self.cgroup_downgraded()
        no_pids_limit = self.pids_limit_downgraded()

        def check(language, res):
            if downgraded:  # RLIMIT_NPROC: fork fails, nothing tells the daemon
                self.assertIn(res["verdict"], ("error", "timed_out"), res)
            elif no_pids_limit:  # kubernetes: whatever the node has stops it (test_hostile.py)
                self.assertIn(res["verdict"],
                              ("pids_limit", "memory_limit", "timed_out", "error"), res)
            else:
                self.assertEqual(res["verdict"], "pids_limit", res)
        self.for_each_language("pids_limit", check, timeout_ms=3000)
        self.assertHealthy()

    def test_cpu_limit(self):
        def check(language, res):
            self.assertEqual((res["verdict"], res["timed_out"]), ("cpu_limit", False), res)
        self.for_each_language("cpu_limit", check, timeout_ms=30000)


class GoTest(E2ETestCase):
    """What only Go has: the compile step and its errors, the module, the standard library."""

    def setUp(self):
        super().setUp()
        if "go" not in available_languages(self):
            self.skip_or_fail("go is not an available language here")

    def execute(self, code, **fields):
        return super().execute(code, language="go", timeout_ms=BUILD_TIMEOUT_MS, **fields)

    def test_compile_error_is_stderr_with_a_failure(self):
        res = self.execute("package main\n\nfunc main() {\n\tx := 1\n}\n")
        self.assertEqual(res["stdout"], "", res)
        self.assertIn("main.go:4:2: x declared but not used", res["stderr"])
        self.assertNotEqual(res["exit_code"], 0)
        self.assertEqual(res["verdict"], "error")
        self.assertEqual(res["files"], [], "neither go.mod nor the build leaves outputs")

    def test_an_import_outside_the_standard_library_names_it_and_why(self):
        res = self.execute(go("\tbar.X()", "github.com/foo/bar"))
        self.assertIn("github.com/foo/bar", res["stderr"])
        self.assertIn("no network", res["stderr"])
        self.assertEqual(res["verdict"], "error")

    def test_panic_names_the_users_line(self):
        res = self.execute(go("\tvar a []int\n\t_ = a[3]"))
        self.assertIn("index out of range [3] with length 0", res["stderr"])
        self.assertIn("/workspace/main.go:6", res["stderr"])  # a[3]
        self.assertEqual((res["exit_code"], res["verdict"]), (2, "error"))

    def test_the_module_is_there_and_a_staged_one_wins(self):
        res = self.execute(go('\tb, _ := os.ReadFile("go.mod")\n\tfmt.Print(string(b))', "fmt",
                              "os"))
        self.assertEqual(res["stdout"], "module sandbox\n\ngo 1.19\n", res)
        mod = self.upload_ok("go.mod", b"module example.com/mine\n\ngo 1.19\n")
        res = self.execute(go('\tb, _ := os.ReadFile("go.mod")\n\tfmt.Print(string(b))', "fmt",
                              "os"), files=[{"path": "go.mod", "file_id": mod}])
        self.assertEqual(res["stdout"], "module example.com/mine\n\ngo 1.19\n", res)

    def test_other_go_files_staged_with_it_are_one_package(self):
        helper = self.upload_ok("helper.go", b"package main\n\nfunc greet() string "
                                             b"{ return \"from helper\" }\n")
        res = self.execute(go("\tfmt.Println(greet())", "fmt"),
                           files=[{"path": "helper.go", "file_id": helper}])
        self.assertEqual(res["stdout"], "from helper\n", res)

    def test_the_standard_library_beyond_fmt(self):
        code = go('\th := sha256.Sum256([]byte("abc"))\n\tfmt.Println(hex.EncodeToString(h[:4]),'
                  ' http.StatusTeapot, strings.Repeat("x", 3))',
                  "crypto/sha256", "encoding/hex", "fmt", "net/http", "strings")
        res = self.execute(code)
        self.assertEqual(res["stdout"], "ba7816bf 418 xxx\n", res)


if __name__ == "__main__":
    unittest.main()
