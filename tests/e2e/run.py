#!/usr/bin/python3
"""Runs the end-to-end suites and prints TAP version 13 on stdout.

  run.py --bin build/code-interpreter                 # e2e suite, daemons spawned on 127.0.0.1:0
  run.py --suite hostile --bin build/code-interpreter
  run.py --bin build/code-interpreter --as-user nobody   # rootless: the daemon as nobody
  run.py --url http://127.0.0.1:8000                  # against a running daemon (any backend)
  run.py --bin ... --backend docker                   # EXECUTOR_BACKEND=docker (needs a dockerd)
  run.py --bin ... --backend kubernetes               # against tests/k8s/fake_apiserver.py (root)
  run.py --bin ... -k Stream -k test_health           # only tests whose id contains a pattern
  run.py --bin ... --skip mcp.                        # leave out tests whose id contains one
  run.py --suite deployment --readme-command ...      # the e2e cases a containerised daemon
                                                      # changes (DEPLOYMENT_CASES)
  run.py --list                                       # list the test ids
  run.py --image code-interpreter:slim --image-args "-v /var/run/docker.sock:..." --backend docker
                                                      # each daemon a container (docker run -d)
  run.py --readme-command "Docker-out-of-Docker" --backend docker
                                                      # the same, image and flags taken from the
                                                      # `docker run -d` command of that section
                                                      # of docs/deployment.md

Environment: CI_DAEMON_BIN (instead of --bin), CI_E2E_NO_SKIP=1 (a skip for a missing
capability, e.g. matplotlib absent in the sandbox, becomes a failure; CI sets it).
Progress goes to stderr; stdout is TAP only.

--backend kubernetes starts one fake Kubernetes API server for the whole run (its pods are
bubblewrap sandboxes with the kubelet's cgroup limits; tests/k8s/README.md) and gives every
daemon KUBECONFIG, KUBERNETES_EXECUTOR_NAMESPACE=default,
KUBERNETES_EXECUTOR_SECCOMP_PROFILE (the executor profile, installed in the fake's seccomp root)
and KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=false (the fake runs no init containers; each pod's
own network namespace stands for the enforced deny-all NetworkPolicy). It skips without root, or
fails under CI=true.

--image: every daemon is `docker run -d ARGS... IMAGE` (harness.ContainerDaemon; ARGS is a shell
string, expanded by bash so `$(stat -c %g /var/run/docker.sock)` works), with PORT=0, the test
class's settings as -e, logs from `docker logs`, stopped with `docker stop`. --image-env K=V adds
-e K=V to every one. Tests that need the daemon as a host process or the binary itself skip.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

SUITES = {
    "e2e": ["test_api", "test_execute", "test_languages", "test_files", "test_stream",
            "test_libraries", "test_cli",
            "test_hardening", "test_doctor", "test_sessions", "test_auth", "test_agent",
            "test_readme_agent", "test_mcp", "test_e2b", "test_rich_results", "test_egress",
            "test_session_pause"],
    "hostile": ["test_hostile", "test_containment"],
}
# The e2e cases whose behaviour differs when the daemon itself runs in a container (the DooD and
# DinD lanes): startup and /health, shutdown as PID 1, the file store and snapshots inside it,
# counters read by exec (no host pid), settings and key files passed in, calls out to a model;
# a smoke test of the rest. Pure API and executor behaviour is e2e-docker's, on the same image.
DEPLOYMENT_CASES = [
    "api.HealthTest", "api.ShutdownTest", "docker.DockerHardeningReportTest",
    "files.FilesApiTest", "files.FileSizeLimitTest", "files.StoreQuotaTest",
    "files.StagedFilesTest", "files.SparseOutputsTest", "files.RealClientLimitsTest",
    "sessions.SessionCallLimitsTest",
    "session_pause.SessionPauseTest.test_pause_to_disk", "session_pause.SessionPauseTest.test_freeze",
    "session_pause.SessionPauseTest.test_a_named_snapshot", "session_pause.SessionPauseLimitsTest",
    "auth.ApiKeyTest", "auth.ApiKeyFileChangesTest",
    "agent.OpenAIAgentTest.test_success_at_the_first_attempt",
    "agent.OpenAIAgentTest.test_a_sandbox_cannot_find_the_key",
    "agent.OpenAIAgentTest.test_the_log_never_holds_the_key",
    "e2b.E2bSandboxPlaneTest", "e2b.E2bWireTest",
    "execute.ExecuteBasicsTest.test_sandbox_identity_and_env", "execute.ExecuteBasicsTest.test_print",
    "execute.TimeoutTest.test_whole_process_tree_killed", "languages.LanguageMatrixTest.test_hello",
]
SUITES["deployment"] = SUITES["e2e"]
# Modules that only apply to one backend: added to the e2e suite when it runs against that one,
# rather than skipping everywhere else.
BACKEND_MODULES = {"docker": ["test_docker"], "kubernetes": ["test_replicas", "test_k8s_access"],
                   "local": ["test_terminal", "test_recycling", "test_lean_python"]}


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


def docker_answers():
    """GET /_ping on the Engine the daemon will use (DOCKER_HOST unix socket or the default)."""
    import socket
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return True  # a remote Engine: let the daemon's own check speak
    path = host[len("unix://"):] if host else "/var/run/docker.sock"
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(3)
            s.connect(path)
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return s.recv(64).split(b"\r\n")[0].split(b" ")[1:2] == [b"200"]
    except OSError:
        return False


DEPLOYMENT_DOC = os.path.join(HERE, "..", "..", "docs/deployment.md")


def readme_command(title):
    """(image, shell string of flags) of the first `docker run -d ... IMAGE` command in the
    fenced block of docs/deployment.md's section whose heading starts with `title` (the section
    was the README's once, hence the name)."""
    with open(DEPLOYMENT_DOC, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## " + re.escape(title) + r".*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        raise SystemExit(f"docs/deployment.md has no section {title!r}")
    joined = m.group(1).replace("\\\n", " ")
    cmd = re.search(r"^docker run -d (.*?) (\S+)\s*(?:#.*)?$", joined, re.M)
    if not cmd:
        raise SystemExit(f"docs/deployment.md section {title!r} has no `docker run -d ... IMAGE` "
                         "line")
    return cmd.group(2), re.sub(r"\s+", " ", cmd.group(1))


def shell_words(text):
    """The words bash makes of `text` (quotes, $(...) expanded)."""
    out = subprocess.run(["bash", "-c", 'printf "%s\\0" ' + text], capture_output=True,
                         check=True).stdout
    return [w.decode() for w in out.split(b"\0")[:-1]]


def bounding_set_lacks():
    """Capability numbers up to the kernel's last that this process's bounding set lacks."""
    with open("/proc/self/status") as f:
        bounding = int(re.search(r"^CapBnd:\s*([0-9a-f]+)$", f.read(), re.M).group(1), 16)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    return [c for c in range(last + 1) if not (bounding >> c) & 1]


CAP_NAMES = {24: "SYS_RESOURCE"}  # the one these test machines' bounding set lacks


def privileged_here(argv):
    """The documented `--privileged`, on a machine whose own bounding set lacks capabilities (these
    test machines lack CAP_SYS_RESOURCE): runc cannot give a container the full set, so
    `--privileged` fails there with "unable to apply caps". It becomes what --privileged means
    short of the missing capabilities: every other capability, no seccomp or AppArmor profile,
    no masked /proc paths, and the host's cgroup hierarchies writable (what a nested dockerd
    needs). On a machine with the full set the documented flag is used as it is."""
    lacks = bounding_set_lacks()
    if "--privileged" not in argv or not lacks:
        return argv
    names = [CAP_NAMES.get(c) for c in lacks]
    if None in names:
        raise SystemExit(f"this machine's bounding set lacks capabilities {lacks}: "
                         f"name them in CAP_NAMES to translate --privileged")
    out = []
    for a in argv:
        if a != "--privileged":
            out.append(a)
            continue
        out += ["--cap-add", "ALL"] + sum((["--cap-drop", n] for n in names), [])
        out += ["--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
                "--security-opt", "systempaths=unconfined", "--cgroupns", "host",
                "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"]
    sys.stderr.write(f"--privileged is not possible here (the bounding set lacks "
                     f"{', '.join(names)}): using {' '.join(out)}\n")
    return out


def image_present(image):
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("CI_DAEMON_BIN"),
                    help="daemon binary to spawn (default: $CI_DAEMON_BIN)")
    ap.add_argument("--url", help="use a running daemon instead of spawning one")
    ap.add_argument("--suite", choices=sorted(SUITES) + ["all"], default="e2e")
    ap.add_argument("--backend", help="executor_backend /health must report "
                                      "(default: local when spawning, any with --url)")
    ap.add_argument("-k", action="append", default=[], metavar="PATTERN",
                    help="run only tests whose id contains PATTERN (repeatable)")
    ap.add_argument("--skip", action="append", default=[], metavar="PATTERN",
                    help="leave out tests whose id contains PATTERN (repeatable)")
    ap.add_argument("--no-subids", action="store_true",
                    help="with --as-user: do not grant USER subordinate ids (the one-id map)")
    ap.add_argument("--as-user", metavar="USER",
                    help="start the daemons as this unprivileged user (rootless mode; needs root)")
    ap.add_argument("--image", help="start every daemon as a container of IMAGE")
    ap.add_argument("--image-args", default="", metavar="ARGS",
                    help="with --image: the `docker run -d` flags, a shell string")
    ap.add_argument("--image-env", action="append", default=[], metavar="K=V",
                    help="with --image: -e K=V for every container (repeatable)")
    ap.add_argument("--readme-command", metavar="TITLE",
                    help="--image and --image-args from docs/deployment.md's section TITLE")
    ap.add_argument("--with", dest="with_modules", action="append", default=[], metavar="MODULE",
                    help="add a test module to the suite (test_dind for the DinD image)")
    ap.add_argument("--k8s-namespace", default="default", metavar="NS",
                    help="with --backend kubernetes: the daemons' pods' namespace; no-attach, "
                         "no-exec and no-pods refuse one permission each (harness.K8S_REFUSING)")
    ap.add_argument("--daemon-env", action="append", default=[], metavar="K=V",
                    help="in every spawned daemon's environment (repeatable), e.g. "
                         "KUBERNETES_SANDBOX_API=agent-sandbox")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    names = sorted(set(sum(SUITES.values(), []))) if args.suite == "all" \
        else list(SUITES[args.suite])
    if args.suite in ("e2e", "deployment", "all"):
        names += BACKEND_MODULES.get(args.backend or "local", [])
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in names:
        suite.addTests(loader.loadTestsFromName(name))
    if args.suite == "deployment":
        suite = unittest.TestSuite([t for t in iter_tests(suite)
                                    if any(p in t.id() for p in DEPLOYMENT_CASES)])
    for name in args.with_modules:  # whole
        suite.addTests(loader.loadTestsFromName(name))
    if args.k:
        selected = [t for t in iter_tests(suite) if any(p in t.id() for p in args.k)]
        suite = unittest.TestSuite(selected)
    if args.skip:
        kept = [t for t in iter_tests(suite) if not any(p in t.id() for p in args.skip)]
        suite = unittest.TestSuite(kept)
    if args.list:
        for t in iter_tests(suite):
            print(t.id())
        return 0

    if args.readme_command:
        args.image, args.image_args = readme_command(args.readme_command)
    if not args.url and not args.bin and not args.image:
        ap.error("give --bin PATH (or CI_DAEMON_BIN), --image IMAGE or --url URL")
    if args.url:
        harness.Config.url = args.url.rstrip("/")
        harness.Config.expected_backend = args.backend
    else:
        if args.backend == "docker" and not docker_answers():
            if os.environ.get("CI") == "true":
                print("Bail out! --backend docker: no dockerd answers (CI=true: no skipping)")
                return 1
            print("1..0 # SKIP --backend docker: no dockerd answers on its socket")
            return 0
        if args.backend == "kubernetes":
            why = harness.kubernetes_unavailable()
            if why and os.environ.get("CI") == "true":
                print(f"Bail out! --backend kubernetes: {why} (CI=true: no skipping)")
                return 1
            if why:
                print(f"1..0 # SKIP --backend kubernetes: {why}")
                return 0
        if args.image and not image_present(args.image):
            why = f"no image {args.image} (packaging/image/build.sh builds it)"
            if os.environ.get("CI") == "true":
                print(f"Bail out! {why} (CI=true: no skipping)")
                return 1
            print(f"1..0 # SKIP {why}")
            return 0
        if args.image:
            harness.Config.image = args.image
            harness.Config.image_args = privileged_here(shell_words(args.image_args))
            harness.Config.one_daemon_at_a_time = "--privileged" in shell_words(args.image_args)
            if harness.Config.one_daemon_at_a_time:
                # Classes of one daemon's settings together: each is started once, not again
                # whenever the order comes back to it (the sort is stable: classes stay whole).
                suite = unittest.TestSuite(sorted(
                    iter_tests(suite),
                    key=lambda t: json.dumps(getattr(type(t), "daemon_env", {}),
                                             sort_keys=True, default=str)))
            harness.Config.image_env = dict(kv.split("=", 1) for kv in args.image_env)
            sys.stderr.write(f"container daemons: docker run -d {args.image_args} ... "
                             f"{args.image}\n")
        harness.Config.bin_path = os.path.abspath(args.bin) if args.bin else None
        harness.Config.expected_backend = args.backend or "local"
        harness.Config.pool = harness.DaemonPool()
        if args.as_user:
            if os.geteuid() != 0:
                ap.error("--as-user needs root (it switches to USER with setpriv)")
            harness.Config.as_user = args.as_user
            # Subordinate ids, as an administrator gives a rootless daemon's user
            # (docs/security.md "Rootless").
            if not args.no_subids:
                grant = os.path.join(HERE, "..", "common", "grant-subids.sh")
                subprocess.run([grant, args.as_user], check=True)
    harness.Config.no_skip = os.environ.get("CI_E2E_NO_SKIP") == "1"

    # Anything a test prints must not break the TAP stream.
    tap = sys.stdout
    sys.stdout = sys.stderr
    cluster = None
    if args.backend == "kubernetes" and not args.url:
        try:
            cluster = harness.FakeCluster().start(args.k8s_namespace)
        except RuntimeError as e:
            tap.write(f"Bail out! {str(e).splitlines()[0]}\n")
            sys.stderr.write(f"{e}\n")
            return 1
    harness.Config.backend_env.update(kv.split("=", 1) for kv in args.daemon_env)
    if cluster:
        # meson's timeout sends SIGTERM: unwind (unittest lets KeyboardInterrupt through) so
        # the daemons are killed and the fake API server stopped, its pods with it.
        signal.signal(signal.SIGTERM, _interrupt)
    failed = 1
    try:
        failed = harness.run_tap(suite, tap)
    except KeyboardInterrupt:
        tap.write("Bail out! interrupted\n")
        if harness.Config.pool:
            harness.Config.pool.kill_all()
    finally:
        if cluster:
            cluster.close(show_log=failed > 0)
    return 1 if failed else 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
