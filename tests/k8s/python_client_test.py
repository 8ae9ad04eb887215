#!/usr/bin/env python3
"""The fake against a second, independent client: Debian's python3-kubernetes (22.6, which
offers only v4.channel.k8s.io for exec and cannot half-close stdin), so the fake's framing is
checked by code we did not write. Skips (77) without the package or root, except under CI=true.
"""

import os
import sys
import tempfile
import unittest

DEBIAN_PYTHON = "/usr/bin/python3"

try:
    import kubernetes  # noqa: F401
except ImportError:
    # Debian's package lives in the system interpreter's dist-packages; run there.
    if os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != \
            os.path.realpath(DEBIAN_PYTHON) and not os.environ.get("FAKE_K8S_REEXEC"):
        os.environ["FAKE_K8S_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
    if os.environ.get("CI") != "true":
        print("skip: no python3-kubernetes", file=sys.stderr)
        sys.exit(77)
    raise

from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402
from kubernetes.stream import stream  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake.launcher import FakeServer  # noqa: E402
from fake_apiserver_test import pod_json  # noqa: E402

NS = "default"


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fake-k8s-py-")
        cls.server = FakeServer(cls.tmp.name).__enter__()
        api_client = config.new_client_from_config(config_file=cls.server.info["kubeconfig"])
        cls.v1 = client.CoreV1Api(api_client)

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def running(self, name):
        pod = self.v1.create_namespaced_pod(NS, pod_json(name))
        self.assertEqual(pod.status.phase, "Pending")
        w = watch.Watch()
        for event in w.stream(self.v1.list_namespaced_pod, NS,
                              field_selector=f"metadata.name={name}",
                              resource_version=pod.metadata.resource_version,
                              timeout_seconds=60):
            if event["object"].status.phase == "Running":
                w.stop()
                return event["object"]
        self.fail("the watch ended before the pod ran")

    def test_create_watch_read_list_delete(self):
        pod = self.running("py-life")
        self.assertEqual(pod.spec.node_name, "fake-node")
        self.assertTrue(pod.status.container_statuses[0].ready)
        names = [p.metadata.name for p in
                 self.v1.list_namespaced_pod(NS, label_selector="app=fake-test").items]
        self.assertIn("py-life", names)
        self.v1.delete_namespaced_pod("py-life", NS, grace_period_seconds=0)
        with self.assertRaises(ApiException) as caught:
            self.v1.read_namespaced_pod("py-life", NS)
        self.assertEqual(caught.exception.status, 404)
        self.assertIn('"reason": "NotFound"', caught.exception.body)

    def test_conflict_is_409(self):
        self.v1.create_namespaced_pod(NS, pod_json("py-dup"))
        with self.assertRaises(ApiException) as caught:
            self.v1.create_namespaced_pod(NS, pod_json("py-dup"))
        self.assertEqual(caught.exception.status, 409)

    def test_exec_v4_stdin_output_and_exit_code(self):
        self.running("py-exec")
        ws = stream(self.v1.connect_get_namespaced_pod_exec, "py-exec", NS,
                    command=["sh", "-c", "head -c 5; echo; echo warn >&2; exit 3"],
                    stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
        ws.write_stdin("abcde")  # exactly what head reads: v4 cannot signal EOF
        ws.run_forever(timeout=60)
        self.assertEqual(ws.read_stdout(), "abcde\n")
        self.assertEqual(ws.read_stderr(), "warn\n")
        self.assertEqual(ws.returncode, 3)

    def test_exec_v4_success(self):
        self.running("py-ok")
        out = stream(self.v1.connect_get_namespaced_pod_exec, "py-ok", NS,
                     command=["sh", "-c", 'echo "uid $(id -u)"'], stdin=False, stdout=True,
                     stderr=True, tty=False)
        # (Not a bare number: the client json-decodes the output when it can.)
        self.assertEqual(out, "uid 65532\n")


if __name__ == "__main__":
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        print("skip: the fake API server's pods need root", file=sys.stderr)
        sys.exit(77)
    unittest.main(verbosity=2)
