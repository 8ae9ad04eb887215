#!/usr/bin/env python3
"""The fake API server against a real client: kubectl (1.32 speaks the exec WebSocket,
v5.channel.k8s.io, by default) gets, applies, runs, waits on (a watch), execs into, copies to
and from (tar over exec), reads logs of and deletes fake pods. Skips (77) without kubectl or
root, except under CI=true."""

import hashlib
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake.launcher import FakeServer, Kubectl, main_with_kubectl  # noqa: E402
from fake_apiserver_test import TERM_EXITS  # noqa: E402

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: box
  labels: {app: kubectl-test}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532,
                    seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: runner
    image: registry.example/runner:1
    command: ["sh", "-c", "echo started; exec sleep infinity"]
    workingDir: /workspace
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
    volumeMounts: [{name: workspace, mountPath: /workspace}, {name: tmp, mountPath: /tmp}]
  volumes:
  - {name: workspace, emptyDir: {medium: Memory, sizeLimit: 16Mi}}
  - {name: tmp, emptyDir: {medium: Memory}}
"""


class KubectlTest(unittest.TestCase, Kubectl):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fake-k8s-kubectl-")
        cls.server = FakeServer(os.path.join(cls.tmp.name, "state"), "--namespace", "locked",
                                "--deny", "get:pods/attach:locked",
                                "--deny", "create:pods/attach:locked").__enter__()
        cls.env = dict(os.environ, KUBECONFIG=cls.server.info["kubeconfig"],
                       HOME=cls.tmp.name)  # no ~/.kube cache from elsewhere
        manifest = os.path.join(cls.tmp.name, "box.yaml")
        with open(manifest, "w") as f:
            f.write(MANIFEST)
        cls.kubectl_ok("apply", "-f", manifest)
        cls.kubectl_ok("wait", "--for=condition=Ready", "pod/box", "--timeout=60s")

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def test_get_pods_shows_the_running_pod(self):
        out = self.kubectl_ok("get", "pods")
        row = next(line.split() for line in out.splitlines() if line.startswith("box "))
        self.assertEqual(row[1:3], ["1/1", "Running"])
        self.assertEqual(self.kubectl_ok("get", "pod", "box", "-o",
                                         "jsonpath={.status.phase}"), "Running")
        self.assertIn("box", self.kubectl_ok("get", "pods", "-l", "app=kubectl-test", "-o",
                                             "name"))
        self.assertEqual(self.kubectl_ok("get", "pods", "-l", "app=other", "-o", "name"), "")

    def test_exec_stdin_and_exit_code(self):
        r = self.kubectl("exec", "-i", "box", "--", "sh", "-c", "cat; echo oops >&2; exit 3",
                         input=b"through stdin\n")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stdout, b"through stdin\n")
        self.assertIn(b"oops", r.stderr)
        self.assertIn(b"command terminated with exit code 3", r.stderr)

    def test_exec_runs_as_the_pod_user_in_its_workspace(self):
        self.assertEqual(self.kubectl_ok("exec", "box", "--", "sh", "-c", "id -u; pwd"),
                         "65532\n/workspace\n")

    def test_cp_into_and_out_of_the_pod(self):
        data = os.urandom(300_000)
        src = os.path.join(self.tmp.name, "upload.bin")
        with open(src, "wb") as f:
            f.write(data)
        self.kubectl_ok("cp", src, "box:/workspace/upload.bin")
        digest = self.kubectl_ok("exec", "box", "--", "sha256sum", "/workspace/upload.bin")
        self.assertEqual(digest.split()[0], hashlib.sha256(data).hexdigest())
        back = os.path.join(self.tmp.name, "download.bin")
        self.kubectl_ok("cp", "box:/workspace/upload.bin", back)
        with open(back, "rb") as f:
            self.assertEqual(f.read(), data)
        # A directory, the other way round.
        self.kubectl_ok("exec", "box", "--", "sh", "-c",
                        "mkdir -p /workspace/out/sub && echo deep > /workspace/out/sub/f")
        dest = os.path.join(self.tmp.name, "outdir")
        self.kubectl_ok("cp", "box:/workspace/out", dest)
        with open(os.path.join(dest, "sub", "f")) as f:
            self.assertEqual(f.read(), "deep\n")

    def test_logs(self):
        self.assertEqual(self.kubectl_ok("logs", "box"), "started\n")

    def test_errors_from_the_server(self):
        r = self.kubectl("exec", "ghost", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b'pods "ghost" not found', r.stderr)
        r = self.kubectl("exec", "box", "--", "no-such-program")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"executable file not found", r.stderr)

    def test_run_wait_and_delete(self):
        self.kubectl_ok("run", "hello", "--image=registry.example/busybox:1", "--restart=Never",
                        "--labels=app=hello", "--command", "--", "sh", "-c", TERM_EXITS)
        self.kubectl_ok("wait", "--for=condition=Ready", "pod/hello", "--timeout=60s")
        self.assertEqual(self.kubectl_ok("exec", "hello", "--", "hostname"), "hello\n")
        self.assertIn('pod "hello" deleted', self.kubectl_ok("delete", "pod", "hello"))
        r = self.kubectl("get", "pod", "hello")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b'pods "hello" not found', r.stderr)

    def test_run_interactive_attaches_to_the_command(self):
        # kubectl run -i: a pod with stdin and stdinOnce, attached (WebSocket) once it runs; the
        # command's exit code becomes kubectl's once the pod has finished.
        r = self.kubectl("run", "talk", "-i", "--image=registry.example/busybox:1",
                         "--restart=Never", "--labels=app=talk", "--command", "--", "sh", "-c",
                         'read line; echo "got $line"; exit 7', input=b"hello\n")
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertIn(b"got hello\n", r.stdout)
        spec = json.loads(self.kubectl_ok("get", "pod", "talk", "-o", "json"))["spec"]
        self.assertEqual((spec["containers"][0]["stdin"], spec["containers"][0]["stdinOnce"]),
                         (True, True))
        self.kubectl_ok("delete", "pod", "talk", "--grace-period=0", "--force")

    def test_auth_can_i_asks_the_servers_access_review(self):
        # kubectl's SelfSubjectAccessReview, the daemon's startup check (k8s/access_review.h).
        for args, answer in [(("get", "pods", "--subresource=attach"), 0),
                             (("create", "pods", "--subresource=exec", "-n", "locked"), 0),
                             (("get", "pods", "--subresource=attach", "-n", "locked"), 1),
                             (("create", "pods", "--subresource=attach", "-n", "locked"), 1)]:
            r = self.kubectl("auth", "can-i", *args)
            self.assertEqual((r.returncode, r.stdout.strip()),
                             (answer, b"yes" if answer == 0 else b"no"), (args, r.stderr))

    def test_image_pull_failure_shows_in_get(self):
        self.kubectl_ok("run", "nopull", "--image=registry.example/gone:pull-fails",
                        "--restart=Never")
        self.kubectl_ok("wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting"
                        ".reason}=ImagePullBackOff", "pod/nopull", "--timeout=60s")
        self.kubectl_ok("delete", "pod", "nopull", "--grace-period=0", "--force")


if __name__ == "__main__":
    main_with_kubectl("the fake API server's pods need")
