#!/usr/bin/env python3
"""The fake API server's CustomResourceDefinitions, custom resources, garbage collection and its
agent-sandbox controller (--agent-sandbox), against kubectl and the raw wire: the official
agent-sandbox v0.5.6 CRDs (agent-sandbox/crds) apply, a warm pool fills with running pods, claims
adopt them (or cold-start), kubectl execs into a claimed pod, deleting a claim cascades.
Skips (77) without kubectl or root, except under CI=true."""

import json
import os
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake.agent_sandbox import name_hash  # noqa: E402
from fake.launcher import FakeServer, Kubectl, main_with_kubectl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CRDS = os.path.join(HERE, "agent-sandbox", "crds")
EXT = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default"
CORE = "/apis/agents.x-k8s.io/v1beta1/namespaces/default"
MERGE = {"Content-Type": "application/merge-patch+json"}

POD_SPEC = {
    "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{
        "name": "executor", "image": "registry.example/executor:1",
        "command": ["sh", "-c", "echo started; exec sleep 600"],
        "stdin": True, "stdinOnce": True,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}]}],
    "volumes": [{"name": "workspace", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]}


def template(name, labels=None):
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
            "metadata": {"name": name},
            "spec": {"networkPolicyManagement": "Unmanaged",
                     "podTemplate": {"metadata": {"labels": labels or {"app": "executor"}},
                                     "spec": POD_SPEC}}}


def pool(name, tpl, replicas):
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": tpl}}}


def claim(pool_name, name=None, **lifecycle):
    md = {"name": name} if name else {"generateName": "sandbox-claim-"}
    md["labels"] = {"agents.x-k8s.io/created-by": "fake-test"}
    spec = {"warmPoolRef": {"name": pool_name}}
    if lifecycle:
        spec["lifecycle"] = lifecycle
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
            "metadata": md, "spec": spec}


def ready(obj):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


class CrdApplyTest(unittest.TestCase, Kubectl):
    """A server without --agent-sandbox: the CRD files apply as on a real cluster."""

    def test_apply_get_api_resources_and_reapply(self):
        with tempfile.TemporaryDirectory(prefix="fake-k8s-crd-") as tmp, \
                FakeServer(os.path.join(tmp, "state")) as server:
            type(self).env = dict(os.environ, KUBECONFIG=server.info["kubeconfig"], HOME=tmp)
            out = self.kubectl_ok("apply", "-f", CRDS)
            self.assertEqual(out.count(" created"), 4, out)
            names = self.kubectl_ok("get", "crd", "-o", "name").split()
            self.assertIn("customresourcedefinition.apiextensions.k8s.io/"
                          "sandboxwarmpools.extensions.agents.x-k8s.io", names)
            resources = self.kubectl_ok("api-resources")
            for kind in ("Sandbox", "SandboxClaim", "SandboxTemplate", "SandboxWarmPool"):
                self.assertRegex(resources, rf"\s{kind}\n")
            self.assertIn("swp", resources)
            out = self.kubectl_ok("apply", "-f", CRDS)
            self.assertEqual(out.count(" unchanged"), 4, out)
            # Only the storage version is served (v1alpha1 needs the conversion webhook).
            client = server.client()
            groups = client.request("GET", "/apis").json()["groups"]
            ext = next(g for g in groups if g["name"] == "extensions.agents.x-k8s.io")
            self.assertEqual([v["version"] for v in ext["versions"]], ["v1beta1"])
            swp = client.request("GET", "/apis/extensions.agents.x-k8s.io/v1beta1").json()
            names = {r["name"] for r in swp["resources"]}
            self.assertTrue({"sandboxwarmpools/scale", "sandboxwarmpools/status",
                             "sandboxclaims/status", "sandboxtemplates"} <= names, names)
            self.assertNotIn("sandboxtemplates/status", names)
            # A custom resource of a CRD applied by kubectl, a Pod it owns, the GC.
            self.kubectl_ok("apply", "-f", "-", input=json.dumps(template("t1")).encode())
            tpl = client.request("GET", f"{EXT}/sandboxtemplates/t1").json()
            self.assertEqual(tpl["spec"]["envVarsInjectionPolicy"], "Disallowed")  # a default
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "owned", "ownerReferences": [{
                    "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                    "kind": "SandboxTemplate", "name": "t1",
                    "uid": tpl["metadata"]["uid"]}]}, "spec": POD_SPEC}
            self.assertEqual(client.request("POST", "/api/v1/namespaces/default/pods",
                                            pod).status, 201)
            self.kubectl_ok("wait", "--for=condition=Ready", "pod/owned", "--timeout=30s")
            self.kubectl_ok("delete", "sandboxtemplate", "t1")
            self.wait_gone(client, "/api/v1/namespaces/default/pods/owned")
            # Deleting the CRD deletes its objects.
            self.kubectl_ok("apply", "-f", "-", input=json.dumps(template("t2")).encode())
            self.kubectl_ok("delete", "crd", "sandboxtemplates.extensions.agents.x-k8s.io")
            self.assertEqual(client.request("GET", f"{EXT}/sandboxtemplates/t2").status, 404)

    def wait_gone(self, client, path, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if client.request("GET", path).status == 404:
                return
            time.sleep(0.1)
        self.fail(f"{path} is still there")


class AgentSandboxTest(unittest.TestCase, Kubectl):
    """One --agent-sandbox server for every case: template `tpl`, pool `pool` of 2."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fake-k8s-agent-sandbox-")
        cls.server = FakeServer(os.path.join(cls.tmp.name, "state"), "--agent-sandbox",
                                "--deny", "create:sandboxclaims:locked",
                                "--namespace", "locked").__enter__()
        cls.env = dict(os.environ, KUBECONFIG=cls.server.info["kubeconfig"],
                       HOME=cls.tmp.name)
        cls.client = cls.server.client()
        cls.apply(template("tpl"))
        cls.apply(pool("pool", "tpl", 2))

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    @classmethod
    def apply(cls, obj):
        return cls.kubectl_ok("apply", "-f", "-", input=json.dumps(obj).encode())

    def get(self, path):
        r = self.client.request("GET", path)
        return r.json() if r.status == 200 else None

    def until(self, what, fn, timeout=30):
        end = time.time() + timeout
        while True:
            value = fn()
            if value:
                return value
            if time.time() > end:
                self.fail(f"timed out waiting for {what}")
            time.sleep(0.1)

    def pool_ready(self, name="pool", n=2):
        def check():
            p = self.get(f"{EXT}/sandboxwarmpools/{name}")
            s = p.get("status") or {}
            return p if s.get("readyReplicas") == n and s.get("replicas") == n else None
        return self.until(f"pool {name} ready {n}", check)

    def create_claim(self, body):
        r = self.client.request("POST", f"{EXT}/sandboxclaims", body)
        self.assertEqual(r.status, 201, r.body)
        return r.json()

    def watch_ready(self, created, timeout=30):
        """As the official clients: one watch of the claim by name from the create's rv."""
        name = created["metadata"]["name"]
        path = (f"{EXT}/sandboxclaims?watch=1&fieldSelector=metadata.name%3D{name}"
                f"&resourceVersion={created['metadata']['resourceVersion']}"
                f"&timeoutSeconds={timeout}")
        for event in self.client.watch(path):
            obj = event["object"]
            self.assertEqual(obj["metadata"]["name"], name)
            self.assertNotEqual(event["type"], "DELETED")
            if ((obj.get("status") or {}).get("sandbox") or {}).get("name") and ready(obj):
                return obj
        self.fail(f"claim {name} not ready in {timeout}s")

    def test_1_warm_pool_fills(self):
        p = self.pool_ready()
        h = name_hash("pool")
        self.assertEqual(p["status"]["selector"], f"agents.x-k8s.io/warm-pool-sandbox={h}")
        sandboxes = self.get(f"{CORE}/sandboxes?labelSelector=agents.x-k8s.io/"
                             f"warm-pool-sandbox%3D{h}")["items"]
        self.assertEqual(len(sandboxes), 2)
        for sb in sandboxes:
            self.assertTrue(sb["metadata"]["name"].startswith("pool-"))
            self.assertEqual(sb["spec"]["operatingMode"], "Running")  # a schema default
            self.assertEqual(sb["metadata"]["ownerReferences"][0]["kind"], "SandboxWarmPool")
            self.assertTrue(ready(sb))
            pod = self.get(f"/api/v1/namespaces/default/pods/"
                           f"{sb['metadata']['annotations']['agents.x-k8s.io/pod-name']}")
            self.assertEqual(pod["status"]["phase"], "Running")
            self.assertEqual(pod["metadata"]["labels"]["agents.x-k8s.io/sandbox-name-hash"],
                             name_hash(sb["metadata"]["name"]))
            self.assertEqual(pod["metadata"]["labels"]["app"], "executor")
            self.assertEqual(pod["metadata"]["ownerReferences"][0]["uid"],
                             sb["metadata"]["uid"])
            self.assertEqual(sb["status"]["podIPs"], [pod["status"]["podIP"]])
        out = self.kubectl_ok("get", "swp", "pool")
        self.assertRegex(out, r"NAME\s+READY\s+DESIRED\s+AGE\npool\s+2\s+2\s+")
        self.assertIn("pool-", self.kubectl_ok("get", "sandboxes"))

    def test_2_claim_adopts_exec_and_delete_cascades(self):
        self.pool_ready()
        created = self.create_claim(claim("pool", shutdownPolicy="Delete",
                                          shutdownTime="2099-01-01T00:00:00Z"))
        c = self.watch_ready(created)
        sb_name = c["status"]["sandbox"]["name"]
        self.assertTrue(sb_name.startswith("pool-"), sb_name)
        sb = self.get(f"{CORE}/sandboxes/{sb_name}")
        self.assertEqual(sb["metadata"]["ownerReferences"][0]["uid"], c["metadata"]["uid"])
        labels = sb["metadata"]["labels"]
        self.assertNotIn("agents.x-k8s.io/warm-pool-sandbox", labels)
        self.assertEqual(labels["agents.x-k8s.io/launch-type"], "warm")
        self.assertEqual(labels["agents.x-k8s.io/claim-uid"], c["metadata"]["uid"])
        self.assertEqual(c["status"]["sandbox"]["podIPs"], sb["status"]["podIPs"])
        pod_name = sb["metadata"]["annotations"]["agents.x-k8s.io/pod-name"]
        self.until("the pod's pool label gone", lambda: "agents.x-k8s.io/warm-pool-sandbox"
                   not in self.get(f"/api/v1/namespaces/default/pods/{pod_name}")
                   ["metadata"]["labels"])
        self.assertEqual(self.kubectl_ok("exec", pod_name, "--", "sh", "-c",
                                         "echo hi from $(hostname)"), f"hi from {pod_name}\n")
        self.pool_ready()  # refilled
        self.kubectl_ok("delete", "sandboxclaim", c["metadata"]["name"])
        self.until("the sandbox gone", lambda: self.get(f"{CORE}/sandboxes/{sb_name}") is None)
        self.until("the pod gone",
                   lambda: self.get(f"/api/v1/namespaces/default/pods/{pod_name}") is None)

    def test_3_cold_start_and_not_found(self):
        self.apply(pool("empty", "tpl", 0))
        c = self.watch_ready(self.create_claim(claim("empty", name="cold-one")))
        self.assertEqual(c["status"]["sandbox"]["name"], "cold-one")
        sb = self.get(f"{CORE}/sandboxes/cold-one")
        self.assertEqual(sb["metadata"]["labels"]["agents.x-k8s.io/launch-type"], "cold")
        self.assertEqual(self.get("/api/v1/namespaces/default/pods/cold-one")["status"]["phase"],
                         "Running")
        self.client.request("DELETE", f"{EXT}/sandboxclaims/cold-one")
        self.until("cold pod gone",
                   lambda: self.get("/api/v1/namespaces/default/pods/cold-one") is None)
        missing = self.create_claim(claim("no-such-pool"))["metadata"]["name"]

        def reason():
            c = self.get(f"{EXT}/sandboxclaims/{missing}")
            return next((x["reason"] for x in (c.get("status") or {}).get("conditions") or []
                         if x["type"] == "Ready"), None)
        self.assertEqual(self.until("WarmPoolNotFound", reason), "WarmPoolNotFound")
        self.apply(pool("orphan-pool", "no-such-template", 1))
        missing = self.create_claim(claim("orphan-pool"))["metadata"]["name"]
        self.assertEqual(self.until("TemplateNotFound", reason), "TemplateNotFound")

    def test_4_concurrent_claims_get_distinct_sandboxes(self):
        self.pool_ready()
        results, errors = [], []

        def one():
            try:
                results.append(self.watch_ready(self.create_claim(claim("pool")), 45))
            except BaseException as e:  # noqa: B902 - reported below
                errors.append(e)
        threads = [threading.Thread(target=one) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        names = [c["status"]["sandbox"]["name"] for c in results]
        self.assertEqual(len(set(names)), 5, names)
        pods = set()
        for n in names:
            sb = self.get(f"{CORE}/sandboxes/{n}")
            pods.add(sb["metadata"]["annotations"]["agents.x-k8s.io/pod-name"])
        self.assertEqual(len(pods), 5)
        r = self.client.request("DELETE", f"{EXT}/sandboxclaims?labelSelector="
                                "agents.x-k8s.io/created-by%3Dfake-test")
        self.assertEqual(r.status, 200, r.body)
        for p in pods:
            self.until(f"pod {p} gone",
                       lambda p=p: self.get(f"/api/v1/namespaces/default/pods/{p}") is None)

    def test_5_claim_expiry_deletes_the_claim(self):
        soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
        c = self.create_claim(claim("pool", shutdownPolicy="Delete", shutdownTime=soon))
        self.until("the claim gone", lambda: self.get(
            f"{EXT}/sandboxclaims/{c['metadata']['name']}") is None, 20)

    def test_conflicts_status_defaults_and_validation(self):
        self.apply(pool("wire", "tpl", 0))
        p = self.pool_ready("wire", 0)  # the controller's status written
        # Schema defaults: of absent fields of present objects (not into absent objects).
        body = pool("defaulted", "no-such-template", 0)
        del body["spec"]["replicas"]
        body["spec"]["updateStrategy"] = {}
        r = self.client.request("POST", f"{EXT}/sandboxwarmpools", body).json()
        self.assertEqual((r["spec"]["replicas"], r["spec"]["updateStrategy"]["type"]),
                         (1, "OnReplenish"))
        stale = p["metadata"]["resourceVersion"]
        body = json.loads(json.dumps(p))
        body["spec"]["replicas"] = 0
        body["metadata"]["labels"] = {"x": "1"}
        r = self.client.request("PUT", f"{EXT}/sandboxwarmpools/wire", body)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["metadata"]["generation"], p["metadata"]["generation"])
        r = self.client.request("PUT", f"{EXT}/sandboxwarmpools/wire", body)
        self.assertEqual(r.status, 409)
        self.assertEqual((r.json()["reason"], r.json()["details"]["group"]),
                         ("Conflict", "extensions.agents.x-k8s.io"))
        self.assertIn("the object has been modified", r.json()["message"])
        r = self.client.request("PATCH", f"{EXT}/sandboxwarmpools/wire",
                                {"metadata": {"resourceVersion": stale},
                                 "spec": {"replicas": 0}}, MERGE)
        self.assertEqual(r.status, 409)
        r = self.client.request("PATCH", f"{EXT}/sandboxwarmpools/wire",
                                {"spec": {"replicas": 0}},
                                {"Content-Type": "application/strategic-merge-patch+json"})
        self.assertEqual(r.status, 415)
        # Status writes go to /status only; spec through /status is ignored.
        cur = self.get(f"{EXT}/sandboxwarmpools/wire")
        body = json.loads(json.dumps(cur))
        body["status"] = {"replicas": 7}
        body["spec"]["replicas"] = 5
        r = self.client.request("PUT", f"{EXT}/sandboxwarmpools/wire/status", body)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["replicas"], 0)
        r = self.client.request("PATCH", f"{EXT}/sandboxwarmpools/wire",
                                {"status": {"replicas": 9}, "spec": {"replicas": 1},
                                 "spec2": 1}, MERGE)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["replicas"], 1)
        self.assertNotEqual((r.json().get("status") or {}).get("replicas"), 9)
        self.assertNotIn("spec2", r.json())  # pruned
        self.assertEqual(r.json()["metadata"]["generation"], cur["metadata"]["generation"] + 1)
        # Scale.
        r = self.client.request("PATCH", f"{EXT}/sandboxwarmpools/wire/scale",
                                {"spec": {"replicas": 0}}, MERGE)
        self.assertEqual((r.status, r.json()["kind"], r.json()["spec"]["replicas"]),
                         (200, "Scale", 0), r.body)
        self.until("the scale's selector", lambda: self.get(
            f"{EXT}/sandboxwarmpools/wire/scale")["status"]["selector"] ==
            f"agents.x-k8s.io/warm-pool-sandbox={name_hash('wire')}")
        # Defaults and validation.
        c = self.create_claim(claim("wire", name="defaults", shutdownTime="2099-01-01T00:00:00Z"))
        self.assertEqual(c["spec"]["lifecycle"]["shutdownPolicy"], "Retain")
        bad = claim("wire", name="bad", shutdownPolicy="Sometimes")
        r = self.client.request("POST", f"{EXT}/sandboxclaims", bad)
        self.assertEqual(r.status, 422, r.body)
        cause = r.json()["details"]["causes"][0]
        self.assertEqual((cause["field"], cause["reason"]),
                         ("spec.lifecycle.shutdownPolicy", "FieldValueNotSupported"))
        r = self.client.request("POST", f"{EXT}/sandboxclaims",
                                {"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                                 "kind": "SandboxClaim", "metadata": {"name": "noref"},
                                 "spec": {}})
        self.assertEqual(r.status, 422)
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "spec.warmPoolRef")
        r = self.client.request("POST", f"{EXT}/sandboxwarmpools",
                                pool("neg", "tpl", -1))
        self.assertEqual(r.status, 422)
        # RBAC by plural.
        r = self.client.request("POST", EXT.replace("default", "locked") + "/sandboxclaims",
                                claim("pool"))
        self.assertEqual(r.status, 403)
        self.assertIn('cannot create resource "sandboxclaims" in API group '
                      '"extensions.agents.x-k8s.io"', r.json()["message"])

    def test_pod_recreated_unless_finished(self):
        self.apply(template("short", {"app": "short"}))
        self.client.request("POST", f"{CORE}/sandboxes", {
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "solo"},
            "spec": {"podTemplate": {"spec": POD_SPEC}}})
        first = self.until("solo's pod", lambda: self.get(
            "/api/v1/namespaces/default/pods/solo"))
        self.client.request("DELETE", "/api/v1/namespaces/default/pods/solo")
        self.until("a new pod", lambda: (self.get("/api/v1/namespaces/default/pods/solo") or
                                         first)["metadata"]["uid"] != first["metadata"]["uid"])
        spec = json.loads(json.dumps(POD_SPEC))
        spec["containers"][0]["command"] = ["true"]
        self.client.request("POST", f"{CORE}/sandboxes", {
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "done"}, "spec": {"podTemplate": {"spec": spec}}})

        def finished():
            sb = self.get(f"{CORE}/sandboxes/done")
            return any(c["type"] == "Finished" and c["status"] == "True"
                       for c in (sb.get("status") or {}).get("conditions") or [])
        self.until("done finished", finished)
        uid = self.get("/api/v1/namespaces/default/pods/done")["metadata"]["uid"]
        time.sleep(1.5)
        self.assertEqual(self.get("/api/v1/namespaces/default/pods/done")["metadata"]["uid"], uid)
        self.client.request("DELETE", f"{CORE}/sandboxes/solo?propagationPolicy=Foreground")
        self.until("solo gone", lambda: self.get(f"{CORE}/sandboxes/solo") is None)
        self.assertIsNone(self.get("/api/v1/namespaces/default/pods/solo"))


if __name__ == "__main__":
    main_with_kubectl("the fake API server's pods need")
