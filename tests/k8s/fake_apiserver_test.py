#!/usr/bin/env python3
"""The fake API server's wire behaviour, spoken raw: TLS and the token, discovery, pods with
their Status errors and resourceVersions, watch events, deletion, the exec WebSocket frames
(v5 with the stdin close signal, v4 without) and attach; then the fake node's resource enforcement (pod
cgroups, memory/pids/cpu limits, tmpfs emptyDirs, the in-container /sys/fs/cgroup). Needs root
(the fake's pods are bwrap sandboxes); skips (77) otherwise, except under CI=true."""

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake import cgroups  # noqa: E402
from fake import store  # noqa: E402
from fake import websocket as ws  # noqa: E402
from fake.launcher import FakeServer  # noqa: E402
from fake.sandbox import mounts_under  # noqa: E402

NS = "default"
# A container command that ends on SIGTERM: as pid 1 of its namespace, a plain `sleep` would
# ignore it (no handler) and use up the whole grace period, as on a real node.
TERM_EXITS = "trap 'exit 0' TERM; sleep infinity & wait"
PODS = f"/api/v1/namespaces/{NS}/pods"


def pod_json(name, image="registry.example/runner:1", labels=None, command=None, **spec_extra):
    """A pod as the backend will send it: restricted, uid 65532, emptyDir /workspace and /tmp."""
    container = {
        "name": "runner", "image": image, "workingDir": "/workspace",
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"},
                         {"name": "tmp", "mountPath": "/tmp"}]}
    if command:
        container["command"] = command
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": [{"name": "workspace", "emptyDir": {"medium": "Memory",
                                                           "sizeLimit": "16Mi"}},
                        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]}
    spec.update(spec_extra)
    md = {"labels": labels or {"app": "fake-test"}}
    md["generateName" if name.endswith("-") else "name"] = name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def read_lines(path):
    return read_bytes(path).decode().split()


def child_with_pid(pid, argv, attempts=200):
    """A child process running `argv` with pid `pid` (set through ns_last_pid: root), or None
    when other forks kept taking it."""
    for _ in range(attempts):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        child = subprocess.Popen(argv)
        if child.pid == pid:
            return child
        child.kill()
        child.wait()
        time.sleep(0.01)
    return None


# Raw syscalls from inside a pod, one "<name> <ok|errno name>" line each. The arguments make a
# call fail differently without a filter than under one: mount with MS_NOUSER is EINVAL before
# the kernel's permission check, any user may read its session keyring's id, clone3 with size 0
# is EINVAL; getpriority(PRIO_PGRP) and sysinfo are what the test's Localhost profile refuses.
PROBE = r"""
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
CALLS = {"unshare_user": (272, L(0x10000000)),
         "mount": (165, b"none", b"/", b"tmpfs", L(1 << 31), None),
         "keyctl": (250, L(0), L(-3), L(0)),
         "bpf": (321, L(0xffff), None, L(0)),
         "clone3": (435, None, L(0)),
         "sysinfo": (99, ctypes.create_string_buffer(512)),
         "getpriority_pgrp": (140, L(1), L(0)),
         "getpriority_self": (140, L(0), L(0))}
for name in sys.argv[1:]:
    nr, *args = CALLS[name]
    ok = libc.syscall(nr, *args) != -1
    print(name, "ok" if ok else errno.errorcode[ctypes.get_errno()])
"""
ALL_CALLS = ["mount", "keyctl", "bpf", "clone3", "sysinfo", "unshare_user"]

# Connect to 127.0.0.1:<argv[1]>, print "connected" (and with argv[3] "read" what the server
# sent) or the errno's name; retry a refusal up to argv[2] times, 0.1 s apart (for a pod's server
# that may not listen yet).
CONNECT = r"""
import errno, socket, sys, time
for attempt in range(int(sys.argv[2]) + 1):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        print("connected", s.recv(100).decode()) if sys.argv[3:] == ["read"] else print("connected")
        break
    except OSError as e:
        if attempt == int(sys.argv[2]):
            print(errno.errorcode[e.errno])
        time.sleep(0.1)
"""
# A pod's own server on 127.0.0.1:8080 that greets each connection.
SERVE = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 8080)); s.listen()\n"
         "while True:\n    c = s.accept()[0]; c.sendall(b'hello from the pod'); c.close()")

# A Localhost profile: everything allowed but sysinfo (EPERM, the default errno; a syscall that
# Python's start does not make, unlike getcwd) and
# getpriority(PRIO_PGRP, ...) (EACCES, an argument condition with its own errnoRet).
DENY_SYSINFO = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
               "syscalls": [{"names": ["sysinfo"], "action": "SCMP_ACT_ERRNO"},
                            {"names": ["getpriority"], "action": "SCMP_ACT_ERRNO",
                             "errnoRet": 13,
                             "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]}]}
# Refuses setgroups, which the runtime's own uid change (setpriv here, runc's init on a node)
# makes: fatal when the filter goes on before that change (no no_new_privs), not after it.
DENY_SETGROUPS = {"defaultAction": "SCMP_ACT_ALLOW",
                  "syscalls": [{"names": ["setgroups"], "action": "SCMP_ACT_ERRNO"}]}
# The agent the backend's execution pods run as PID 1 (src/agent), built by meson (the test's
# environment names it; by hand, the build directory's), and where the fake's images carry it:
# outside the host's /usr that they are made of, unlike the executor image's own path.
AGENT = os.environ.get("CI_AGENT_BINARY") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "src", "agent",
    "code-interpreter-agent")
IMAGE_AGENT_PATH = "/usr/local/lib/code-interpreter/agent"
FAKE_IMAGE_AGENT = "/code-interpreter/agent"
EXECUTOR_PROFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "policies", "seccomp-executor.json")


def seccomp_root(files):
    """A kubelet seccomp directory: {relative path: a profile dict, or the path of a file}."""
    root = tempfile.TemporaryDirectory(prefix="fake-k8s-seccomp-")
    for rel, profile in files.items():
        path = os.path.join(root.name, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(profile, str):
            shutil.copyfile(profile, path)
        else:
            with open(path, "w") as f:
                json.dump(profile, f)
    return root


def seccomp_pod(name, profile=None, command=None, **container_sc):
    """pod_json with the pod-level seccompProfile `profile` (None: no field)."""
    body = pod_json(name, command=command)
    del body["spec"]["securityContext"]["seccompProfile"]
    if profile:
        body["spec"]["securityContext"]["seccompProfile"] = profile
    body["spec"]["containers"][0]["securityContext"].update(container_sc)
    return body


class ServerTestCase(unittest.TestCase):
    """One fake server (started with `flags`) for the class, and helpers."""
    flags = ()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fake-k8s-")
        cls.server = FakeServer(cls.tmp.name, *cls.flags).__enter__()
        cls.c = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.left_over = cls.server.stop()
        cls.tmp.cleanup()

    # -- helpers ----------------------------------------------------------------------------

    def create(self, body, ns=NS):
        r = self.c.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
        self.assertEqual(r.status, 201, r.body)
        return r.json()

    def until(self, pod, done, ns=NS):
        """Watch the pod from its creation's resourceVersion until done(event) holds; returns
        the events seen. The server ends the watch after timeoutSeconds, failing the test."""
        md = pod["metadata"]
        seen = []
        for event in self.c.watch(f"/api/v1/namespaces/{ns}/pods?watch=1&fieldSelector="
                                  f"metadata.name%3D{md['name']}&resourceVersion="
                                  f"{md['resourceVersion']}&timeoutSeconds=60"):
            seen.append(event)
            if done(event):
                return seen
        self.fail(f"watch ended before the condition held: {json.dumps(seen)[:2000]}")

    def running(self, body):
        pod = self.create(body)
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Running")
        return events[-1]["object"]

    def sweep(self, app):
        """Delete the pods labelled app=<app> in one request; return their names once a watch
        has seen each one DELETED."""
        rv = self.c.request("GET", PODS).json()["metadata"]["resourceVersion"]
        r = self.c.request("DELETE", f"{PODS}?labelSelector=app%3D{app}")
        self.assertEqual(r.status, 200, r.body)
        names = {p["metadata"]["name"] for p in r.json()["items"]}
        gone = set()
        for event in self.c.watch(f"{PODS}?watch=1&labelSelector=app%3D{app}"
                                  f"&resourceVersion={rv}&timeoutSeconds=60"):
            if event["type"] == "DELETED":
                gone.add(event["object"]["metadata"]["name"])
            if gone == names:
                break
        self.assertEqual(gone, names)
        return names

    def until_logged(self, name, text, timeout=10):
        """Wait until pod `name`'s log is `text`; fail with what it is otherwise."""
        deadline = time.monotonic() + timeout
        while (log := self.c.request("GET", f"{PODS}/{name}/log").body) != text:
            if time.monotonic() > deadline:
                self.assertEqual(log, text, "the pod's log")
            time.sleep(0.05)

    def assert_status(self, r, code, reason):
        self.assertEqual(r.status, code, r.body)
        body = r.json()
        self.assertEqual((body["kind"], body["apiVersion"], body["status"], body["reason"],
                          body["code"]), ("Status", "v1", "Failure", reason, code), body)
        return body

    def run_exec(self, name, command, stdin=b"", close=True, **kw):
        sock = self.c.exec(NS, name, command, **kw)
        self.assertFalse(hasattr(sock, "status"), getattr(sock, "body", b""))
        if stdin:
            sock.send(0, stdin)
        if close:
            sock.close_stdin()
        out, order, status = sock.collect()
        self.assertEqual(sock.close_code, 1000)
        return out, order, status, sock.protocol


class FakeApiServerTest(ServerTestCase):
    flags = ("--namespace", "locked", "--namespace", "strict", "--restricted", "strict",
             "--deny", "create:pods:locked", "--deny", "patch:pods:locked",
             "--watch-history", "100", "--max-pods", "40")
    # -- TLS, auth, discovery ----------------------------------------------------------------

    def test_missing_or_wrong_token_is_401_status(self):
        for token in ("", "wrong"):
            r = self.server.client(token=token).request("GET", PODS)
            body = self.assert_status(r, 401, "Unauthorized")
            self.assertEqual(body["message"], "Unauthorized")

    def test_certificate_is_verified_against_the_ca_only(self):
        host, port = self.c.host, self.c.port
        conn = http.client.HTTPSConnection(host, port, context=ssl.create_default_context())
        with self.assertRaises(ssl.SSLCertVerificationError):
            conn.request("GET", "/version")
        conn.close()

    def test_discovery_for_kubectl(self):
        self.assertEqual(self.c.request("GET", "/version").json()["major"], "1")
        self.assertEqual(self.c.request("GET", "/api").json()["versions"], ["v1"])
        resources = {r["name"]: r for r in self.c.request("GET", "/api/v1").json()["resources"]}
        self.assertTrue({"create", "get", "list", "watch", "delete"} <=
                        set(resources["pods"]["verbs"]))
        self.assertEqual(set(resources["pods/exec"]["verbs"]), {"create", "get"})
        self.assert_status(self.c.request("GET", "/api/v1/services"), 404, "NotFound")

    # -- pods -------------------------------------------------------------------------------

    def test_create_get_list_with_label_selectors_and_increasing_versions(self):
        a = self.create(pod_json("sel-a", labels={"app": "sel", "tier": "a"}))
        b = self.create(pod_json("sel-b", labels={"app": "sel", "tier": "b"}))
        self.assertLess(int(a["metadata"]["resourceVersion"]),
                        int(b["metadata"]["resourceVersion"]))
        self.assertEqual(a["status"]["phase"], "Pending")
        for k in ("uid", "creationTimestamp", "namespace"):
            self.assertIn(k, a["metadata"])
        got = self.c.request("GET", f"{PODS}/sel-a").json()
        self.assertEqual(got["metadata"]["uid"], a["metadata"]["uid"])

        def names(selector):
            r = self.c.request("GET", f"{PODS}?labelSelector={selector}")
            self.assertEqual(r.json()["kind"], "PodList")
            return sorted(p["metadata"]["name"] for p in r.json()["items"])
        self.assertEqual(names("app%3Dsel"), ["sel-a", "sel-b"])
        self.assertEqual(names("app%3Dsel,tier%3Da"), ["sel-a"])
        self.assertEqual(names("app%3Dsel,tier!%3Da"), ["sel-b"])
        self.assertEqual(names("tier%20in%20(a,b)"), ["sel-a", "sel-b"])
        self.assertEqual(names("tier%20notin%20(a),app%3Dsel"), ["sel-b"])
        self.assertEqual(names("!tier,app%3Dsel"), [])
        self.assertEqual(names("nosuch"), [])
        listed = self.c.request("GET", PODS).json()
        self.assertGreaterEqual(int(listed["metadata"]["resourceVersion"]),
                                int(b["metadata"]["resourceVersion"]))
        self.assert_status(self.c.request("GET", f"{PODS}?labelSelector=a%20in%20b"), 400,
                           "BadRequest")

    def test_merge_patch_of_labels_with_a_resource_version_precondition(self):
        pod = self.running(pod_json("patched", labels={"app": "p", "state": "free"}))
        rv = pod["metadata"]["resourceVersion"]
        merge = {"Content-Type": "application/merge-patch+json"}

        def patch(body, headers=merge, name="patched"):
            return self.c.request("PATCH", f"{PODS}/{name}", body, headers)
        r = patch({"metadata": {"resourceVersion": rv, "labels": {"state": "claimed", "app": None},
                                "annotations": {"by": "a"}}})
        self.assertEqual(r.status, 200, r.body)
        got = r.json()["metadata"]
        self.assertEqual(got["labels"], {"state": "claimed"})
        self.assertEqual(got["annotations"]["by"], "a")
        self.assertGreater(int(got["resourceVersion"]), int(rv))
        # The second claim with the same (now old) version loses, and changes nothing.
        body = self.assert_status(patch({"metadata": {"resourceVersion": rv,
                                                      "labels": {"state": "other"}}}),
                                  409, "Conflict")
        self.assertEqual(body["message"], 'Operation cannot be fulfilled on pods "patched": the '
                         "object has been modified; please apply your changes to the latest "
                         "version and try again")
        self.assertEqual(self.c.request("GET", f"{PODS}/patched").json()["metadata"]["labels"],
                         {"state": "claimed"})
        # Without a precondition the last writer wins; a strategic merge patch merges maps alike.
        r = patch({"metadata": {"labels": {"x": "1"}}},
                  {"Content-Type": "application/strategic-merge-patch+json"})
        self.assertEqual(r.json()["metadata"]["labels"], {"state": "claimed", "x": "1"})
        self.assert_status(patch({"spec": {"activeDeadlineSeconds": 5}}), 422, "Invalid")
        self.assert_status(patch({"metadata": {"labels": ["x"]}}), 400, "BadRequest")
        self.assert_status(patch([{"op": "add"}], {"Content-Type": "application/json-patch+json"}),
                           415, "UnsupportedMediaType")
        self.assert_status(patch({"metadata": {}}, name="ghost"), 404, "NotFound")
        self.assert_status(self.c.request("PATCH", "/api/v1/namespaces/locked/pods/x", {}, merge),
                           403, "Forbidden")

    def test_generate_name(self):
        pod = self.create(pod_json("gen-"))
        self.assertRegex(pod["metadata"]["name"], r"^gen-[a-z0-9]{5}$")

    def test_errors_are_status_objects(self):
        self.create(pod_json("dup"))
        body = self.assert_status(self.c.request("POST", PODS, pod_json("dup")), 409,
                                  "AlreadyExists")
        self.assertEqual(body["details"], {"name": "dup", "kind": "pods"})
        self.assertEqual(body["message"], 'pods "dup" already exists')
        bad = pod_json("noimage")
        del bad["spec"]["containers"][0]["image"]
        body = self.assert_status(self.c.request("POST", PODS, bad), 422, "Invalid")
        self.assertIn({"reason": "FieldValueRequired", "message": "Required value",
                       "field": "spec.containers[0].image"}, body["details"]["causes"])
        body = self.assert_status(self.c.request("GET", f"{PODS}/ghost"), 404, "NotFound")
        self.assertEqual(body["message"], 'pods "ghost" not found')
        self.assert_status(self.c.request("DELETE", f"{PODS}/ghost"), 404, "NotFound")
        self.assert_status(self.c.request("POST", "/api/v1/namespaces/nowhere/pods",
                                          pod_json("x")), 404, "NotFound")
        body = self.assert_status(self.c.request("POST", "/api/v1/namespaces/locked/pods",
                                                 pod_json("x")), 403, "Forbidden")
        self.assertIn('cannot create resource "pods"', body["message"])

    def test_access_reviews_answer_as_the_denials_decide(self):
        def allowed(verb, resource, ns, subresource=None):
            attrs = {"namespace": ns, "verb": verb, "resource": resource}
            if subresource:
                attrs["subresource"] = subresource
            r = self.c.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                               {"apiVersion": "authorization.k8s.io/v1",
                                "kind": "SelfSubjectAccessReview",
                                "spec": {"resourceAttributes": attrs}})
            self.assertEqual(r.status, 201, r.body)
            review = r.json()
            self.assertEqual(review["spec"]["resourceAttributes"], attrs)
            return review["status"]["allowed"]
        self.assertFalse(allowed("create", "pods", "locked"))
        self.assertTrue(allowed("create", "pods", NS))
        self.assertTrue(allowed("get", "pods", "locked"))
        self.assertTrue(allowed("create", "pods", "locked", "exec"))
        self.assert_status(self.c.request(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {"kind": "SelfSubjectAccessReview", "spec": {}}), 422, "Invalid")

    def test_quota_exceeded_is_403(self):
        items = self.c.request("GET", PODS).json()["items"]
        live = [p for p in items if p["status"].get("phase") not in ("Succeeded", "Failed")]
        for i in range(40 - len(live)):
            self.create(pod_json(f"fill-{i}", image="x:unschedulable", labels={"app": "fill"}))
        body = self.assert_status(self.c.request("POST", PODS, pod_json("one-more")), 403,
                                  "Forbidden")
        self.assertIn("exceeded quota", body["message"])
        self.sweep("fill")

    def test_restricted_pod_security_admission(self):
        lax = pod_json("lax")
        del lax["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
        del lax["spec"]["securityContext"]["seccompProfile"]
        r = self.c.request("POST", "/api/v1/namespaces/strict/pods", lax)
        body = self.assert_status(r, 403, "Forbidden")
        self.assertIn('violates PodSecurity "restricted:latest": allowPrivilegeEscalation != '
                      'false', body["message"])
        self.assertIn("seccompProfile", body["message"])
        self.create(pod_json("tight"), ns="strict")

    def test_pending_to_running_through_watch_events(self):
        pod = self.create(pod_json("watched"))
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Running")
        self.assertTrue(all(e["type"] == "MODIFIED" for e in events))
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        self.assertEqual(versions, sorted(set(versions)))
        self.assertGreater(versions[0], int(pod["metadata"]["resourceVersion"]))
        final = events[-1]["object"]
        self.assertEqual(final["spec"]["nodeName"], "fake-node")
        (cs,) = final["status"]["containerStatuses"]
        self.assertIn("running", cs["state"])
        self.assertTrue(cs["ready"])
        r = self.c.request("DELETE", f"{PODS}/watched?gracePeriodSeconds=0")
        self.assertEqual(r.status, 200)
        deleted = self.until(final, lambda e: e["type"] == "DELETED")[-1]["object"]
        self.assertEqual(deleted["metadata"]["uid"], pod["metadata"]["uid"])
        self.assert_status(self.c.request("GET", f"{PODS}/watched"), 404, "NotFound")

    def test_watch_without_version_starts_with_added(self):
        self.create(pod_json("listed", labels={"app": "listed"}))
        event = next(self.c.watch(f"{PODS}?watch=1&labelSelector=app%3Dlisted"))
        self.assertEqual((event["type"], event["object"]["metadata"]["name"]),
                         ("ADDED", "listed"))

    def test_watch_from_a_compacted_version_is_410_gone(self):
        for i in range(60):  # a create and a delete each: more events than --watch-history
            self.create(pod_json(f"churn-{i}", image="x:unschedulable"))
            self.c.request("DELETE", f"{PODS}/churn-{i}")
        event = next(self.c.watch(f"{PODS}?watch=1&resourceVersion=2"))
        self.assertEqual(event["type"], "ERROR")
        self.assertEqual((event["object"]["code"], event["object"]["reason"]), (410, "Expired"))

    def test_image_pull_failure_on_demand(self):
        pod = self.create(pod_json("nopull", image="registry.example/missing:pull-fails"))
        reasons = []

        def backoff(e):
            for cs in e["object"]["status"].get("containerStatuses") or []:
                reasons.append(cs["state"].get("waiting", {}).get("reason"))
            return reasons[-1:] == ["ImagePullBackOff"]
        self.until(pod, backoff)
        self.assertIn("ErrImagePull", reasons)
        got = self.c.request("GET", f"{PODS}/nopull").json()
        self.assertEqual(got["status"]["phase"], "Pending")
        r = self.c.exec(NS, "nopull", ["true"])
        self.assert_status(r, 400, "BadRequest")

    def test_unschedulable_pod_stays_pending_and_deletes_at_once(self):
        pod = self.create(pod_json("nofit", image="x:unschedulable",
                                   terminationGracePeriodSeconds=30))
        events = self.until(pod, lambda e: e["object"]["status"].get("conditions"))
        (cond,) = events[-1]["object"]["status"]["conditions"]
        self.assertEqual((cond["type"], cond["status"], cond["reason"]),
                         ("PodScheduled", "False", "Unschedulable"))
        # No node runs it, so the registry forces a grace period of 0.
        self.assertEqual(self.c.request("DELETE", f"{PODS}/nofit").status, 200)
        self.assert_status(self.c.request("GET", f"{PODS}/nofit"), 404, "NotFound")

    def test_graceful_delete_sets_deletion_timestamp_then_removes(self):
        pod = self.running(pod_json("graceful", terminationGracePeriodSeconds=30,
                                    command=["sh", "-c", TERM_EXITS]))
        r = self.c.request("DELETE", f"{PODS}/graceful", {"kind": "DeleteOptions",
                                                          "apiVersion": "v1"})
        body = r.json()
        self.assertEqual(r.status, 200)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertIn("deletionTimestamp", body["metadata"])
        # The command handles the SIGTERM and exits long before the 30 s are up.
        self.until(pod, lambda e: e["type"] == "DELETED")

    def test_delete_collection_by_label_selector(self):
        for i in range(2):
            self.create(pod_json(f"sweep-{i}", labels={"app": "sweep"}))
        self.create(pod_json("keep", labels={"app": "keep"}))
        self.assertEqual(self.sweep("sweep"), {"sweep-0", "sweep-1"})
        self.assertEqual(self.c.request("GET", f"{PODS}/keep").status, 200)

    def test_container_command_runs_and_finishes(self):
        pod = self.create(pod_json("oneshot", command=["sh", "-c", "exit 4"]))
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Failed")
        (cs,) = events[-1]["object"]["status"]["containerStatuses"]
        self.assertEqual(cs["state"]["terminated"]["exitCode"], 4)

    def test_active_deadline_fails_the_pod(self):
        pod = self.create(pod_json("deadline", activeDeadlineSeconds=1))
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Failed")
        self.assertEqual(events[-1]["object"]["status"]["reason"], "DeadlineExceeded")

    def test_a_pod_deleted_after_its_command_ended_signals_no_process_by_its_old_pid(self):
        # pid_max is 32768 here and a CI run wraps it in minutes: a pod deleted long after its
        # command ended must not SIGKILL whatever process has that pid by then.
        pod = self.running(pod_json("ended", command=["sleep", "1"]))
        uid = pod["metadata"]["uid"]
        init = next(pid for d in set(self.server.info["cgroups"].values())
                    for pid in read_lines(os.path.join(d, uid, "cgroup.procs"))
                    if read_bytes(f"/proc/{pid}/cmdline") == b"sleep\x001\x00")
        self.until(pod, lambda e: e["object"]["status"].get("phase") == "Succeeded")
        decoy = child_with_pid(int(init), ["sleep", "60"])
        self.assertIsNotNone(decoy, f"no child could be given pid {init}")
        self.addCleanup(decoy.wait)
        self.addCleanup(decoy.kill)
        r = self.c.request("DELETE", f"{PODS}/ended?gracePeriodSeconds=0")
        self.assertEqual(r.status, 200, r.body)
        self.until(pod, lambda e: e["type"] == "DELETED")
        self.assertIsNone(decoy.poll(), "the process now holding the pod's old pid was killed")

    # -- exec -------------------------------------------------------------------------------

    def test_exec_v5_stdin_close_and_exit_code(self):
        self.running(pod_json("ex5"))
        out, order, status, proto = self.run_exec(
            "ex5", ["sh", "-c", "cat; echo err >&2; exit 3"], stdin=b"hello")
        self.assertEqual(proto, "v5.channel.k8s.io")
        self.assertEqual(order[0], (1, b""))  # the streams-ready message
        self.assertEqual(out, {1: b"hello", 2: b"err\n"})
        self.assertEqual(status["status"], "Failure")
        self.assertEqual(status["reason"], "NonZeroExitCode")
        self.assertEqual(status["details"]["causes"], [{"reason": "ExitCode", "message": "3"}])
        self.assertEqual(order[-1][0], 3)  # the status is the last message

    def test_exec_v4_when_v5_is_not_offered(self):
        self.running(pod_json("ex4"))
        # v4 has no stdin close: the command reads exactly what is sent and exits.
        out, _, status, proto = self.run_exec("ex4", ["head", "-c", "5"], stdin=b"12345",
                                              close=False, protocols=("v4.channel.k8s.io",))
        self.assertEqual(proto, "v4.channel.k8s.io")
        self.assertEqual(out[1], b"12345")
        self.assertEqual(status, {"metadata": {}, "status": "Success"})
        r = self.c.exec(NS, "ex4", ["true"], protocols=("channel.k8s.io",))
        self.assert_status(r, 400, "BadRequest")

    def test_exec_output_is_streamed_as_produced(self):
        self.running(pod_json("stream"))
        sock = self.c.exec(NS, "stream", ["sh", "-c", 'echo first; read line; echo "got $line"'])
        self.assertEqual(sock.receive(), (1, b""))
        # The command is blocked on stdin, so this output can only come from streaming.
        self.assertEqual(sock.receive(), (1, b"first\n"))
        sock.send(0, b"x\n")
        out, _, status = sock.collect()
        self.assertEqual(out[1], b"got x\n")
        self.assertEqual(status["status"], "Success")

    def test_exec_large_stdin_and_ping(self):
        self.running(pod_json("bulk"))
        sock = self.c.exec(NS, "bulk", ["wc", "-c"])
        sock.send_frame(ws.OP_PING, b"are you there")
        data = os.urandom(1 << 20)
        for i in range(0, len(data), 32768):
            sock.send(0, data[i:i + 32768])
        sock.close_stdin()
        seen = []
        while (m := sock.receive()) is not None:
            seen.append(m)
        self.assertIn(("pong", b"are you there"), seen)
        self.assertEqual(b"".join(d for ch, d in seen if ch == 1).strip(), b"1048576")

    def test_exec_carries_stdin_and_stdout_at_once(self):
        # The server reads frames on one thread while another writes output on the same TLS
        # connection: the case that corrupted its heap before every SSL call took one lock.
        self.running(pod_json("duplex"))
        sock = self.c.exec(NS, "duplex", ["cat"])
        data = os.urandom(8 << 20)

        def feed():
            for i in range(0, len(data), 32768):
                sock.send(0, data[i:i + 32768])
            sock.close_stdin()

        feeder = threading.Thread(target=feed)
        feeder.start()
        out, _, status = sock.collect()
        feeder.join()
        self.assertEqual(status["status"], "Success")
        self.assertTrue(out[1] == data, f"{len(out[1])} bytes back of {len(data)}")

    # -- attach -----------------------------------------------------------------------------

    def test_attach_relays_the_commands_stdio_from_the_moment_of_attaching(self):
        # `cat` as the container's command: what goes in on stdin comes back on stdout.
        body = pod_json("att", command=["sh", "-c", "echo before; exec cat"])
        body["spec"]["containers"][0]["stdin"] = True
        self.running(body)
        self.until_logged("att", b"before\n")  # printed before the attach
        sock = self.c.attach(NS, "att")
        self.assertFalse(hasattr(sock, "status"), getattr(sock, "body", b""))
        self.assertEqual(sock.receive(), (1, b""))  # streams ready; "before" is history
        sock.send(0, b"ping\n")
        self.assertEqual(sock.receive(), (1, b"ping\n"))
        # Without stdinOnce, the client's end closes nothing: a second attach still talks.
        sock.close_stdin()
        sock.send_frame(ws.OP_CLOSE, ws.close_payload(1000))
        self.assertIsNone(sock.receive())
        again = self.c.attach(NS, "att")
        self.assertEqual(again.receive(), (1, b""))
        again.send(0, b"pong\n")
        self.assertEqual(again.receive(), (1, b"pong\n"))
        again.send_frame(ws.OP_CLOSE, ws.close_payload(1000))
        self.assertIsNone(again.receive())
        self.until_logged("att", b"before\nping\npong\n")

    def test_attach_ends_with_success_when_the_command_ends_and_stdin_once_closes(self):
        body = pod_json("once", command=["sh", "-c", "cat; echo bye >&2; exit 5"])
        body["spec"]["containers"][0].update(stdin=True, stdinOnce=True)
        self.running(body)
        sock = self.c.attach(NS, "once")
        sock.send(0, b"data")
        sock.close_stdin()  # with stdinOnce: the command's stdin is closed
        out, _, status = sock.collect()
        self.assertEqual(out, {1: b"data", 2: b"bye\n"})
        # The attach itself succeeded; the exit code is the pod's status.
        self.assertEqual(status, {"metadata": {}, "status": "Success"})
        self.assertEqual(sock.close_code, 1000)

    def test_attach_without_stdin_in_the_spec_drops_stdin(self):
        self.running(pod_json("nostdin", command=["sh", "-c", "cat; echo eof; sleep infinity"]))
        self.until_logged("nostdin", b"eof\n")
        sock = self.c.attach(NS, "nostdin")
        self.assertEqual(sock.receive(), (1, b""))
        sock.send(0, b"lost")
        sock.send_frame(ws.OP_CLOSE, ws.close_payload(1000))
        self.assertIsNone(sock.receive())
        # The command read EOF at once (its stdin is /dev/null) and never got "lost".
        self.assertEqual(self.c.request("GET", f"{PODS}/nostdin/log").body, b"eof\n")

    def test_attach_refusals(self):
        r = self.c.attach(NS, "nosuchpod")
        self.assert_status(r, 404, "NotFound")
        pod = self.create(pod_json("done", command=["true"]))
        self.until(pod, lambda e: e["object"]["status"].get("phase") == "Succeeded")
        body = self.assert_status(self.c.attach(NS, "done"), 400, "BadRequest")
        self.assertIn("cannot attach to a container in a completed pod", body["message"])

    def test_exec_sees_the_pods_volumes_uid_and_processes(self):
        pod = self.running(pod_json("vols"))
        self.run_exec("vols", ["sh", "-c", "echo kept > /workspace/f"])
        out, _, status, _ = self.run_exec(
            "vols", ["sh", "-c", "cat /workspace/f; id -u; pwd; tr '\\0' ' ' < /proc/1/cmdline;"
                     " touch /etc/nope"])
        lines = out[1].decode().splitlines()
        self.assertEqual(lines[:3], ["kept", "65532", "/workspace"])
        self.assertEqual(lines[3].strip(), "sleep infinity")  # the container's process
        self.assertIn(b"Read-only file system", out[2])
        self.assertEqual(status["details"]["causes"][0]["message"], "1")
        host = os.path.join(self.tmp.name, "pods", pod["metadata"]["uid"], "volumes",
                            "workspace", "f")
        with open(host) as f:
            self.assertEqual(f.read(), "kept\n")

    def test_each_exec_leads_a_session_of_its_own(self):
        # As runc does for every exec: the process is its session's leader, inside the pod.
        self.running(pod_json("sid"))
        out, _, _, _ = self.run_exec("sid", ["python3", "-c",
                                             "import os; print(os.getsid(0) == os.getpid())"])
        self.assertEqual(out[1], b"True\n")

    def test_proc_hides_what_containerd_masks(self):
        self.running(pod_json("masks"))
        out, _, _, _ = self.run_exec("masks", ["sh", "-c",
                                               "wc -c < /proc/keys; wc -c < /proc/timer_list; "
                                               "ls /proc/acpi | wc -l; wc -c < /proc/version"])
        lines = out[1].decode().split()
        self.assertEqual(lines[:3], ["0", "0", "0"], out[2])
        self.assertGreater(int(lines[3]), 0)  # the rest of /proc is the kernel's

    def test_root_pod_is_bounded_by_the_runtime_capabilities(self):
        body = pod_json("rooty")
        body["spec"]["securityContext"] = {}
        body["spec"]["containers"][0]["securityContext"] = {}
        self.running(body)
        out, _, status, _ = self.run_exec("rooty", ["sh", "-c", "id -u; mount -t tmpfs x /mnt"])
        self.assertEqual(out[1], b"0\n")
        self.assertIn(b"permission denied", out[2].lower())
        self.assertEqual(status["reason"], "NonZeroExitCode")

    def test_run_as_non_root_without_a_user_is_a_config_error(self):
        body = pod_json("nonroot")
        del body["spec"]["securityContext"]["runAsUser"]
        pod = self.create(body)
        events = self.until(pod, lambda e: any(
            cs["state"].get("waiting", {}).get("reason") == "CreateContainerConfigError"
            for cs in e["object"]["status"].get("containerStatuses") or []))
        self.assertEqual(events[-1]["object"]["status"]["phase"], "Pending")

    def test_spec_hostname_is_the_hostname(self):
        self.running(pod_json("hosted", hostname="sandbox"))
        out, _, _, _ = self.run_exec("hosted", ["sh", "-c", "hostname; echo $HOSTNAME"])
        self.assertEqual(out[1], b"sandbox\nsandbox\n")

    def test_pods_get_the_default_pod_pids_limit(self):
        self.running(pod_json("pidsdefault"))
        path = "/sys/fs/cgroup/" + ("pids.max" if cgroups.is_v2() else "pids/pids.max")
        out, _, _, _ = self.run_exec("pidsdefault", ["cat", path])
        self.assertEqual(out[1], b"1024\n")

    def test_kill_all_from_an_exec_spares_the_container_process(self):
        self.running(pod_json("killall"))
        _, _, status, _ = self.run_exec("killall", ["sh", "-c", "sleep 600 & kill -9 -1; wait"])
        self.assertEqual(status["status"], "Success")
        out, _, _, _ = self.run_exec("killall", ["sh", "-c", "ps -o pid=,args= -e"])
        self.assertEqual(out[1].split(b"\n")[0].split(), [b"1", b"sleep", b"infinity"])
        self.assertNotIn(b"sleep 600", out[1])
        phase = self.c.request("GET", f"{PODS}/killall").json()["status"]["phase"]
        self.assertEqual(phase, "Running")

    def test_client_hanging_up_kills_the_command(self):
        self.running(pod_json("hangup"))
        sock = self.c.exec(NS, "hangup", ["sh", "-c", "echo up; exec sleep 601"])
        self.assertEqual(sock.receive(), (1, b""))
        self.assertEqual(sock.receive(), (1, b"up\n"))
        sock.send_frame(ws.OP_CLOSE, ws.close_payload(1000))
        while sock.receive() is not None:  # the server kills, then echoes the close
            pass
        self.assertEqual(sock.close_code, 1000)
        out, _, _, _ = self.run_exec("hangup", ["ps", "-o", "args=", "-e"])
        self.assertNotIn(b"sleep 601", out[1])

    def test_exec_killed_by_signal_and_missing_binary(self):
        self.running(pod_json("sig"))
        _, _, status, _ = self.run_exec("sig", ["sh", "-c", "kill -9 $$"])
        self.assertEqual(status["details"]["causes"][0]["message"], "137")
        _, _, status, _ = self.run_exec("sig", ["no-such-program"])
        self.assertEqual((status["status"], status["reason"]), ("Failure", "InternalError"))
        self.assertIn("executable file not found", status["message"])

    def test_exec_refusals_before_the_upgrade(self):
        self.running(pod_json("refuse"))
        self.assert_status(self.c.exec(NS, "ghost", ["true"]), 404, "NotFound")
        r = self.c.exec(NS, "refuse", ["true"], container="other")
        self.assertIn("container other is not valid", self.assert_status(r, 400,
                                                                         "BadRequest")["message"])
        self.assert_status(self.server.client(token="").exec(NS, "refuse", ["true"]), 401,
                           "Unauthorized")
        # POST, as client-go's SPDY path and older clients send it, upgrades the same way.
        out, _, status, _ = self.run_exec("refuse", ["echo", "posted"], method="POST")
        self.assertEqual(out[1], b"posted\n")


# -- the node's resource enforcement ----------------------------------------------------------

V2 = cgroups.is_v2()
MiB = 1 << 20


def cgroup_file(v1, v2):
    """A counter's path inside the container: per controller on v1, flat on v2."""
    return "/sys/fs/cgroup/" + (v2 if V2 else v1)


def limited_pod(name, memory=None, cpu=None, command=None, volumes=None):
    body = pod_json(name, command=command)
    limits = {k: v for k, v in (("memory", memory), ("cpu", cpu)) if v}
    body["spec"]["containers"][0]["resources"] = {"limits": limits}
    if volumes:
        body["spec"]["volumes"] = volumes
    return body


# Bounded: 200 forks at most, each child waits to be killed, so the bomb ends by itself whatever
# the limit; it prints how many forks succeeded and how many failed.
FORK_BOMB = """
import os, signal
kids, failed = [], 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        signal.pause()
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(len(kids), failed)
"""


class NodeResourcesTest(ServerTestCase):
    """What a kubelet + containerd enforce: each pod in its own cgroup, with the containers'
    limits and --pod-pids-limit, visible read-only at /sys/fs/cgroup inside."""
    @classmethod
    def setUpClass(cls):
        # The golden session pod names a Localhost profile: the node has the repo's executor
        # profile there, as an operator would install it.
        cls.profiles = seccomp_root({"profiles/code-interpreter.json": EXECUTOR_PROFILE})
        cls.flags = ("--pod-pids-limit", "64", "--seccomp-root", cls.profiles.name,
                     "--image-file", f"{FAKE_IMAGE_AGENT}={AGENT}")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.profiles.cleanup()

    def read(self, name, *paths):
        """{path: text} of files inside the pod, read by an exec."""
        script = "".join(f'echo "@{p}"; cat "{p}"; ' for p in paths)
        out, _, status, _ = self.run_exec(name, ["sh", "-c", script])
        self.assertEqual(status["status"], "Success", out[2])
        files, current = {}, None
        for line in out[1].decode().splitlines():
            if line.startswith("@"):
                current = line[1:]
                files[current] = ""
            else:
                files[current] += line + "\n"
        return files

    def host_dirs(self, pod):
        return [os.path.join(d, pod["metadata"]["uid"])
                for d in sorted(set(self.server.info["cgroups"].values()))]

    def test_an_exec_over_the_memory_limit_is_oom_killed_and_counted(self):
        self.running(limited_pod("membomb", memory="64Mi"))
        _, _, status, _ = self.run_exec("membomb", ["python3", "-c", "b = b'x' * (200 << 20)"])
        self.assertEqual(status["details"]["causes"][0]["message"], "137", status)
        limit = cgroup_file("memory/memory.limit_in_bytes", "memory.max")
        oom = cgroup_file("memory/memory.oom_control", "memory.events")
        peak = cgroup_file("memory/memory.max_usage_in_bytes", "memory.peak")
        files = self.read("membomb", limit, oom, peak)
        self.assertEqual(files[limit], f"{64 * MiB}\n")
        self.assertIn("oom_kill 1\n", files[oom])
        self.assertGreater(int(files[peak]), 60 * MiB)
        self.assertLessEqual(int(files[peak]), 64 * MiB)
        if not V2 and os.path.exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"):
            swap = "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
            self.assertEqual(self.read("membomb", swap)[swap], f"{64 * MiB}\n")
        pod = self.c.request("GET", f"{PODS}/membomb").json()
        self.assertEqual(pod["status"]["phase"], "Running")  # an exec's death is not the pod's

    def terminated(self, name, command):
        """(reason, exitCode) of a 32Mi pod's container once its command ended."""
        pod = self.create(limited_pod(name, memory="32Mi", command=command))
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Failed")
        (cs,) = events[-1]["object"]["status"]["containerStatuses"]
        return cs["state"]["terminated"]["reason"], cs["state"]["terminated"]["exitCode"]

    def test_a_container_command_over_the_memory_limit_is_oomkilled(self):
        self.assertEqual(self.terminated("oomcmd", ["python3", "-c", "b = b'x' * (200 << 20)"]),
                         ("OOMKilled", 137))

    def test_exit_137_without_an_oom_kill_is_an_error(self):
        self.assertEqual(self.terminated("killed", ["sh", "-c", "exit 137"]), ("Error", 137))

    def test_a_fork_bomb_in_an_exec_stops_at_pids_max(self):
        self.running(limited_pod("forkbomb", memory="256Mi"))
        out, _, status, _ = self.run_exec("forkbomb", ["python3", "-c", FORK_BOMB])
        self.assertEqual(status["status"], "Success", out[2])
        forked, failed = map(int, out[1].split())
        # 64 pids for the whole pod: sleep (the command), bwrap outside, sh/nsenter/python.
        self.assertLess(forked, 64)
        self.assertGreater(failed, 0)
        events, pids_max = (cgroup_file("pids/pids.events", "pids.events"),
                            cgroup_file("pids/pids.max", "pids.max"))
        files = self.read("forkbomb", events, pids_max)
        self.assertEqual(files[pids_max], "64\n")
        self.assertRegex(files[events], r"max [1-9]")
        # The host still forks: the limit was the pod's, not the machine's.
        self.assertEqual(subprocess.run(["true"]).returncode, 0)

    def test_cpu_limit_is_a_cfs_quota_and_usage_is_counted(self):
        self.running(limited_pod("cpu", memory="64Mi", cpu="500m"))
        self.run_exec("cpu", ["python3", "-c", "sum(range(3000000))"])
        if V2:
            files = self.read("cpu", "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu.stat")
            self.assertEqual(files["/sys/fs/cgroup/cpu.max"], "50000 100000\n")
            self.assertRegex(files["/sys/fs/cgroup/cpu.stat"], r"usage_usec [1-9]")
            return
        quota, period, usage = ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                                "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
                                "/sys/fs/cgroup/cpuacct/cpuacct.usage")
        files = self.read("cpu", quota, period, usage)
        self.assertEqual((files[quota], files[period]), ("50000\n", "100000\n"))
        self.assertGreater(int(files[usage]), 0)

    def test_memory_emptydir_is_a_tmpfs_sized_and_charged_to_the_pod(self):
        # sizeLimit bounds /workspace; /tmp's 1Gi is more than the pod may use: the pod's
        # memory limit sizes it instead (SizeMemoryBackedVolumes).
        volumes = [{"name": "workspace", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                   {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
        self.running(limited_pod("tmpfs", memory="96Mi", volumes=volumes))
        script = ("import os\n"
                  "for p in ('/workspace', '/tmp'):\n"
                  "    s = os.statvfs(p); print(p, s.f_blocks * s.f_frsize)\n"
                  "print([l.split()[2] for l in open('/proc/self/mounts')"
                  " if l.split()[1] == '/workspace'][0])\n")
        out, _, _, _ = self.run_exec("tmpfs", ["python3", "-c", script])
        self.assertEqual(out[1].decode().split("\n"),
                         [f"/workspace {16 * MiB}", f"/tmp {96 * MiB}", "tmpfs", ""])
        out, _, status, _ = self.run_exec("tmpfs", [
            "sh", "-c", "head -c 20971520 /dev/zero > /workspace/big"])
        self.assertIn(b"No space left on device", out[2])
        usage = cgroup_file("memory/memory.usage_in_bytes", "memory.current")
        # The 16 MiB now in the tmpfs are the pod's memory, as tmpfs pages are on a node.
        self.assertGreaterEqual(int(self.read("tmpfs", usage)[usage]), 16 * MiB)

    def test_the_pod_sees_its_own_cgroup_read_only(self):
        self.running(limited_pod("view", memory="48Mi"))
        out, _, _, _ = self.run_exec("view", ["sh", "-c", "cat /proc/self/cgroup; "
                                                          "grep ' /sys/fs/cgroup' /proc/mounts"])
        lines = out[1].decode().splitlines()
        for line in lines:
            if "/sys/fs/cgroup" in line:
                self.assertIn(" ro,", line)
            elif ":memory:" in line or ":pids:" in line or line.startswith("0::"):
                self.assertTrue(line.endswith(":/"), line)  # a cgroup namespace at the pod
        self.assertEqual(len([x for x in lines if "/sys/fs/cgroup" in x]), 1 if V2 else 4)
        limit = cgroup_file("memory/memory.limit_in_bytes", "memory.max")
        self.assertEqual(self.read("view", limit)[limit], f"{48 * MiB}\n")

    def test_the_cgroup_and_tmpfs_go_with_the_pod(self):
        pod = self.running(limited_pod("gone", memory="64Mi"))
        dirs = self.host_dirs(pod)
        procs = []
        for d in dirs:
            with open(os.path.join(d, "cgroup.procs")) as f:
                procs.append(f.read().split())
        self.assertTrue(all(procs), procs)  # the container's processes are inside
        pod_dir = os.path.join(self.tmp.name, "pods", pod["metadata"]["uid"])
        self.assertEqual(len(mounts_under(pod_dir)), 2)  # /workspace and /tmp
        rv = pod["metadata"]["resourceVersion"]
        r = self.c.request("DELETE", f"{PODS}/gone?gracePeriodSeconds=0")
        self.assertEqual(r.status, 200, r.body)
        for event in self.c.watch(f"{PODS}?watch=1&fieldSelector=metadata.name%3Dgone"
                                  f"&resourceVersion={rv}&timeoutSeconds=60"):
            if event["type"] == "DELETED":
                break
        self.assertEqual([d for d in dirs if os.path.exists(d)], [])
        self.assertEqual(mounts_under(pod_dir), [])

    def test_the_backends_golden_pods_run_with_their_limits(self):
        """The pods src/k8s/pod_spec.cc makes (golden/) start here, and an exec reads their
        limits where the backend's in-container probe does."""
        golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
        limit = cgroup_file("memory/memory.limit_in_bytes", "memory.max")
        for name in ("execution_default", "session_overrides"):
            with self.subTest(name), open(os.path.join(golden, name + ".json")) as f:
                body = json.load(f)
                spec = body["spec"]
                command = spec["containers"][0]["command"]
                if command[0] == IMAGE_AGENT_PATH:  # the agent, where this node's images have it
                    command[0] = FAKE_IMAGE_AGENT
                if "--expires-at" in command:  # the golden's clock is long past: the agent ends
                    at = command.index("--expires-at") + 1
                    command[at] = str(int(time.time()) + 600)
                pod = self.running(body)
                pod_name = pod["metadata"]["name"]
                files = self.read(pod_name, limit, cgroup_file("pids/pids.max", "pids.max"))
                memory = spec["containers"][0]["resources"]["limits"]["memory"]
                self.assertEqual(files[limit], f"{cgroups.memory_bytes(memory)}\n")
                self.assertEqual(files[cgroup_file("pids/pids.max", "pids.max")], "64\n")
                out, _, _, _ = self.run_exec(pod_name, ["python3", "-c", (
                    "import os; s = os.statvfs('/workspace'); print(s.f_blocks * s.f_frsize);"
                    "print(os.getuid(), os.getcwd(), os.uname().nodename);"
                    "print([l for l in open('/proc/self/status') if l.startswith('Seccomp:')])")])
                size = next(v["emptyDir"]["sizeLimit"] for v in spec["volumes"]
                            if v["name"] == "workspace")
                # Both profiles (RuntimeDefault, the executor's as Localhost) are filters.
                self.assertEqual(out[1].decode().split("\n")[:3],
                                 [str(cgroups.memory_bytes(size)), "65532 /workspace sandbox",
                                  "['Seccomp:\\t2\\n']"])

    def server_with_a_running_pod(self, state):
        """A second server of its own, with one running pod; returns (server, its instance
        cgroup directories)."""
        server = FakeServer(state).__enter__()
        client = server.client()
        self.assertEqual(client.request("POST", PODS, pod_json("own")).status, 201)
        for event in client.watch(f"{PODS}?watch=1&timeoutSeconds=60"):
            if event["object"]["status"].get("phase") == "Running":
                break
        instance = sorted(set(server.info["cgroups"].values()))
        self.assertTrue(all(os.listdir(d) for d in instance))
        self.assertEqual(len(mounts_under(state)), 2)
        return server, instance

    def test_stopping_the_server_removes_its_pods_cgroups_and_mounts(self):
        with tempfile.TemporaryDirectory(prefix="fake-k8s-") as state:
            server, instance = self.server_with_a_running_pod(state)
            self.assertEqual(server.stop(), [])  # the server cleaned up; nothing to sweep
            self.assertEqual([d for d in instance if os.path.exists(d)], [])
            self.assertEqual(mounts_under(state), [])

    def test_the_sweep_cleans_up_after_a_killed_server(self):
        with tempfile.TemporaryDirectory(prefix="fake-k8s-") as state:
            server, instance = self.server_with_a_running_pod(state)
            server.proc.kill()  # no chance to clean up
            server.proc.wait()
            mounts = mounts_under(state)
            self.assertEqual(sorted(server.stop()), sorted(instance + mounts))
            self.assertEqual([d for d in instance if os.path.exists(d)], [])
            self.assertEqual(mounts_under(state), [])

class SeccompTest(ServerTestCase):
    """securityContext.seccompProfile: RuntimeDefault, Localhost from --seccomp-root,
    Unconfined, for the container's command and its execs."""

    @classmethod
    def setUpClass(cls):
        cls.profiles = seccomp_root({"deny-sysinfo.json": DENY_SYSINFO,
                                     "deny-setgroups.json": DENY_SETGROUPS,
                                     "repo/executor.json": EXECUTOR_PROFILE})
        cls.flags = ("--seccomp-root", cls.profiles.name)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.profiles.cleanup()

    def probe(self, name, *calls):
        out, _, status, _ = self.run_exec(name, ["python3", "-c", PROBE, *calls])
        self.assertEqual(status["status"], "Success", out)
        return dict(line.split() for line in out[1].decode().splitlines())

    def seccomp_mode(self, name):
        """The Seccomp and Seccomp_filters lines of an exec's own status and of the container's
        command (pid 1)."""
        out, _, _, _ = self.run_exec(name, ["sh", "-c", "grep ^Seccomp /proc/self/status; "
                                            "grep ^Seccomp /proc/1/status"])
        return out[1].decode().split()

    def test_runtime_default_refuses_what_containerd_refuses(self):
        self.running(seccomp_pod("rd", {"type": "RuntimeDefault"}))
        self.assertEqual(self.probe("rd", *ALL_CALLS, "getpriority_self"),
                         {"mount": "EPERM", "keyctl": "EPERM", "bpf": "EPERM",
                          "clone3": "ENOSYS", "sysinfo": "ok", "unshare_user": "EPERM",
                          "getpriority_self": "ok"})
        out, _, status, _ = self.run_exec("rd", ["unshare", "--user", "true"])
        self.assertIn(b"Operation not permitted", out[2])

    def test_runtime_default_runs_ordinary_programs(self):
        self.running(seccomp_pod("rdok", {"type": "RuntimeDefault"}))
        script = ("import subprocess, threading; t = threading.Thread(target=print, "
                  "args=('thread',)); t.start(); t.join(); "
                  "print(subprocess.run(['echo', 'child'], capture_output=True).stdout.decode()"
                  ".strip())")
        out, _, status, _ = self.run_exec("rdok", [
            "bash", "-c", f"python3 -c \"{script}\" && cd /workspace && echo data > f && "
                          "tar cf a.tar f && tar tf a.tar && echo $(( 6 * 7 ))"])
        self.assertEqual((out[1].decode().split(), status["status"]),
                         (["thread", "child", "f", "42"], "Success"), out)

    def test_an_exec_has_the_containers_filter(self):
        self.running(seccomp_pod("same", {"type": "RuntimeDefault"}))
        self.assertEqual(self.seccomp_mode("same"), ["Seccomp:", "2", "Seccomp_filters:", "1"] * 2)
        self.running(seccomp_pod("bare", None))
        self.assertEqual(self.seccomp_mode("bare"), ["Seccomp:", "0", "Seccomp_filters:", "0"] * 2)

    def test_the_filters_loader_leaves_no_signal_ignored(self):
        # A runtime starts processes with every disposition the default: neither what the
        # fake was started with ignored (CI's shell: SIGQUIT) nor the loader's Python's own
        # SIGPIPE and SIGXFSZ (an exec keeps an ignored signal ignored).
        for name, profile in (("sig", {"type": "RuntimeDefault"}), ("sigbare", None)):
            self.running(seccomp_pod(name, profile))
            out, _, _, _ = self.run_exec(name, ["sh", "-c", "grep ^SigIgn /proc/self/status; "
                                                "grep ^SigIgn /proc/1/status"])
            self.assertEqual(out[1].decode().split(), ["SigIgn:", "0000000000000000"] * 2, name)

    def test_the_containers_command_runs_under_the_filter(self):
        pod = self.create(seccomp_pod("cmd", {"type": "RuntimeDefault"}, command=[
            "python3", "-c", PROBE, "keyctl", "clone3"]))
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Succeeded")
        log = self.c.request("GET", f"{PODS}/cmd/log").body.decode()
        self.assertEqual(log.split(), ["keyctl", "EPERM", "clone3", "ENOSYS"], events[-1])

    def test_the_container_level_profile_overrides_the_pods(self):
        body = seccomp_pod("override", {"type": "RuntimeDefault"})
        body["spec"]["containers"][0]["securityContext"]["seccompProfile"] = {
            "type": "Localhost", "localhostProfile": "deny-sysinfo.json"}
        self.running(body)
        self.assertEqual(self.probe("override", "sysinfo", "keyctl"),
                         {"sysinfo": "EPERM", "keyctl": "ok"})

    def test_localhost_profile_comes_from_the_seccomp_root(self):
        self.running(seccomp_pod("local", {"type": "Localhost",
                                           "localhostProfile": "deny-sysinfo.json"}))
        self.assertEqual(self.probe("local", "sysinfo", "getpriority_pgrp", "getpriority_self",
                                    "keyctl"),
                         {"sysinfo": "EPERM", "getpriority_pgrp": "EACCES",
                          "getpriority_self": "ok", "keyctl": "ok"})
        self.assertEqual(self.seccomp_mode("local"), ["Seccomp:", "2", "Seccomp_filters:", "1"] * 2)

    def test_the_repos_executor_profile_runs_python_and_bash(self):
        self.running(seccomp_pod("repo", {"type": "Localhost",
                                          "localhostProfile": "repo/executor.json"}))
        out, _, status, _ = self.run_exec("repo", ["bash", "-c", "python3 -c 'print(6 * 7)'"])
        self.assertEqual((out[1], status["status"]), (b"42\n", "Success"), out)
        self.assertEqual(self.probe("repo", "keyctl", "mount")["keyctl"], "EPERM")

    def test_a_missing_localhost_profile_is_create_container_error(self):
        pod = self.create(seccomp_pod("nofile", {"type": "Localhost",
                                                 "localhostProfile": "absent.json"}))
        events = self.until(pod, lambda e: "waiting" in e["object"]["status"].get(
            "containerStatuses", [{}])[0].get("state", {}) and e["object"]["status"][
            "containerStatuses"][0]["state"]["waiting"]["reason"] != "ContainerCreating")
        waiting = events[-1]["object"]["status"]["containerStatuses"][0]["state"]["waiting"]
        self.assertEqual(waiting["reason"], "CreateContainerError")
        self.assertIn(f'cannot load seccomp profile "{self.profiles.name}/absent.json"',
                      waiting["message"])
        self.assertEqual(events[-1]["object"]["status"]["phase"], "Pending")

    def test_the_filter_goes_on_where_runc_puts_it(self):
        profile = {"type": "Localhost", "localhostProfile": "deny-setgroups.json"}
        self.running(seccomp_pod("late", profile))  # no_new_privs: after the uid change
        out, _, status, _ = self.run_exec("late", ["id", "-u"])
        self.assertEqual((out[1], status["status"]), (b"65532\n", "Success"))
        body = seccomp_pod("early", profile)
        del body["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
        pod = self.create(body)
        events = self.until(pod, lambda e: e["object"]["status"].get("phase") == "Failed")
        state = events[-1]["object"]["status"]["containerStatuses"][0]["state"]
        self.assertEqual(state["terminated"]["reason"], "Error", state)
        log = self.c.request("GET", f"{PODS}/early/log").body.decode()
        self.assertIn("setgroups failed", log)

    def test_unconfined_has_no_filter(self):
        for name, profile in (("unconfined", {"type": "Unconfined"}), ("nofield", None)):
            self.running(seccomp_pod(name, profile))
            self.assertEqual(self.seccomp_mode(name),
                             ["Seccomp:", "0", "Seccomp_filters:", "0"] * 2)
            got = self.probe(name, *ALL_CALLS)
            self.assertEqual({k: got[k] for k in ("mount", "keyctl", "clone3")},
                             {"mount": "EINVAL", "keyctl": "ok", "clone3": "EINVAL"})
        if got["unshare_user"] != "ok":
            self.skipTest(f"this kernel refuses unprivileged user namespaces: "
                          f"{got['unshare_user']}")

    def test_localhost_without_a_profile_name_is_invalid(self):
        r = self.c.request("POST", PODS, seccomp_pod("noname", {"type": "Localhost"}))
        body = self.assert_status(r, 422, "Invalid")
        self.assertEqual(body["details"]["causes"][0]["field"],
                         "spec.securityContext.seccompProfile.localhostProfile")


class ImageFileTest(ServerTestCase):
    """--image-file: a file every image carries (the executor image's agent, in the e2e tests)."""
    flags = ("--image-file", f"/extra/this-test.py={os.path.abspath(__file__)}")

    def test_every_pod_sees_the_file_read_only(self):
        self.running(pod_json("img"))
        out, _, status, _ = self.run_exec("img", ["sh", "-c", "head -c 22 /extra/this-test.py; "
                                                  "echo x >> /extra/this-test.py"])
        self.assertEqual(out[1], b"#!/usr/bin/env python3", out[2])
        self.assertRegex(out[2], b"cannot create /extra/this-test.py: "
                                 b"(Read-only file system|Permission denied)")
        self.assertEqual(status["status"], "Failure")


class PodNetworkTest(ServerTestCase):
    """--pod-network isolated (the default): a pod reaches nothing but itself."""

    def test_the_api_server_is_out_of_reach(self):
        self.running(pod_json("netiso"))
        out, _, _, _ = self.run_exec("netiso", ["python3", "-c", CONNECT, str(self.c.port), "0"])
        self.assertEqual(out[1], b"ECONNREFUSED\n")
        out, _, _, _ = self.run_exec("netiso", ["cat", "/proc/net/dev"])
        self.assertEqual([line.split(":")[0].strip() for line in
                          out[1].decode().splitlines()[2:]], ["lo"])

    def test_loopback_is_the_pods_own(self):
        self.running(pod_json("srv", command=["python3", "-c", SERVE]))
        self.running(pod_json("other"))
        out, _, _, _ = self.run_exec("srv", ["python3", "-c", CONNECT, "8080", "300", "read"])
        self.assertEqual(out[1], b"connected hello from the pod\n")
        out, _, _, _ = self.run_exec("other", ["python3", "-c", CONNECT, "8080", "0"])
        self.assertEqual(out[1], b"ECONNREFUSED\n")


class HostPodNetworkTest(ServerTestCase):
    """--pod-network host: the pods share the host's network, as before."""
    flags = ("--pod-network", "host")

    def test_pods_share_the_hosts_network(self):
        with socket.socket() as probe:  # a port free on the host, for a pod's server
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
        self.running(pod_json("hsrv", command=["python3", "-c", SERVE.replace("8080", port)]))
        self.running(pod_json("hother"))
        out, _, _, _ = self.run_exec("hother", ["python3", "-c", CONNECT, port, "300", "read"])
        self.assertEqual(out[1], b"connected hello from the pod\n")
        out, _, _, _ = self.run_exec("hother", ["python3", "-c", CONNECT, str(self.c.port),
                                                "0"])
        self.assertEqual(out[1], b"connected\n")


class WatchHistoryTest(unittest.TestCase):
    """The store's watch, without a server: events compacted while a watch was still sending
    end it with 410 Expired (as an apiserver's watch cache does), never silently."""

    def test_compaction_during_a_watch_is_410_not_a_gap(self):
        import time
        st = store.Store(history=1)
        pod = {"metadata": {"namespace": NS, "name": "w", "labels": {}}, "spec": {},
               "status": {"phase": "Pending"}}
        st.add(pod)
        since = st.get(NS, "w")["metadata"]["resourceVersion"]
        events = st.watch(NS, [], [], since, time.time() + 5)
        st.update(NS, "w", lambda p: p["status"].update(phase="Running"))
        self.assertEqual(next(events)[1]["status"]["phase"], "Running")
        for phase in ("Succeeded", "Failed"):  # two writes, one kept: one is lost to the watch
            st.update(NS, "w", lambda p, ph=phase: p["status"].update(phase=ph))
        kind, obj = next(events)
        self.assertEqual((kind, obj["code"], obj["reason"]), ("ERROR", 410, "Expired"))


class QuantityTest(unittest.TestCase):
    def test_memory_quantities_are_bytes_rounded_up(self):
        for text, want in (("256Mi", 256 << 20), ("1G", 10 ** 9), ("1536", 1536),
                           ("1.5Gi", 3 << 29), ("1e3", 1000), (1536, 1536), ("100k", 100000),
                           ("0.1", 1)):
            self.assertEqual(cgroups.memory_bytes(text), want, text)
        for bad in ("12Q", "Mi", "1.5 Gi"):
            with self.assertRaises(ValueError):
                cgroups.memory_bytes(bad)

    def test_cpu_quantities_are_millicores(self):
        for text, want in (("500m", 500), ("1", 1000), ("2", 2000), ("0.25", 250), (1.5, 1500)):
            self.assertEqual(cgroups.milli_cpu(text), want, text)

    def test_a_pod_limit_needs_every_container_to_declare_it(self):
        def pod(*limits):
            return {"spec": {"containers": [{"resources": {"limits": lim}} for lim in limits]}}
        self.assertEqual(cgroups.pod_limits(pod({"memory": "64Mi", "cpu": "500m"},
                                                {"memory": "1Mi", "cpu": "1"})),
                         (65 << 20, 1500))
        self.assertEqual(cgroups.pod_limits(pod({"memory": "64Mi"}, {"cpu": "1"})),
                         (None, None))


class FramingTest(unittest.TestCase):
    def test_round_trip_all_length_forms_masked_and_not(self):
        import io
        for n in (0, 125, 126, 65535, 65536, 200000):
            payload = os.urandom(n)
            for masked in (True, False):
                frame = ws.encode_frame(ws.OP_BINARY, payload, masked)
                fin, op, got = ws.read_frame(io.BytesIO(frame), expect_masked=masked)
                self.assertEqual((fin, op, got), (True, ws.OP_BINARY, payload))

    def test_unmasked_client_frame_is_a_protocol_error(self):
        import io
        with self.assertRaises(ws.ProtocolError):
            ws.read_frame(io.BytesIO(ws.encode_frame(ws.OP_BINARY, b"x", False)), True)

    def test_fragments_are_joined(self):
        import io
        first = bytes([ws.OP_BINARY, 0x80 | 2]) + b"\0\0\0\0" + b"ab"
        last = bytes([0x80 | ws.OP_CONT, 0x80 | 1]) + b"\0\0\0\0" + b"c"
        self.assertEqual(ws.read_message(io.BytesIO(first + last), True),
                         (ws.OP_BINARY, b"abc"))

    def test_accept_key_rfc6455_example(self):
        self.assertEqual(ws.accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
                         "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")


if __name__ == "__main__":
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        print("skip: the fake API server's pods need root", file=sys.stderr)
        sys.exit(77)
    unittest.main(verbosity=2)
