#!/usr/bin/env python3
"""Checks what `kubectl kustomize packaging/kubernetes` renders (issue #11 item 6).

- every pod template meets the restricted Pod Security Standard;
- the Role grants exactly the verbs the kubernetes backend uses, nothing cluster-wide;
- the NetworkPolicy isolates executor pods for ingress and egress and selects the labels the
  backend puts on them, and never the daemon;
- the Service and the Deployment agree on the daemon's labels; probes use /health and /ready.

Exit 0 when all hold, 1 with one line per finding, 77 (meson: skipped) when kubectl is absent
outside CI (CI=true: a missing kubectl is a failure).
"""
import os
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What the backend calls (src/k8s/): pods create/get/list/watch/delete, exec and attach (an
# execution pod's agent) as WebSocket GETs (create is checked for them as well by newer API
# servers).
EXPECTED_RULES = {("", "pods"): {"create", "get", "list", "watch", "patch", "delete"},
                  ("", "pods/exec"): {"create", "get"},
                  ("", "pods/attach"): {"create", "get"}}
# The labels of executor pods (src/k8s/pod_spec.h): app=code-interpreter, component in these.
EXECUTOR_APP = "code-interpreter"
EXECUTOR_COMPONENTS = {"executor", "session"}
ALLOWED_ADDED_CAPS = {"NET_BIND_SERVICE"}


def render():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl is not installed", file=sys.stderr)
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    out = subprocess.run([kubectl, "kustomize", os.path.join(ROOT, "packaging", "kubernetes")],
                         check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def pod_templates(docs):
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield d["metadata"]["name"], d["spec"]["template"]
        elif d["kind"] == "Pod":
            yield d["metadata"]["name"], d


def check_restricted(name, template, findings):
    spec = template["spec"]
    psc = spec.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            findings.append(f"{name}: {key} is set")
    for v in spec.get("volumes", []):
        if "hostPath" in v:
            findings.append(f"{name}: hostPath volume {v['name']}")
    if psc.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        findings.append(f"{name}: pod seccompProfile is not RuntimeDefault or Localhost")
    for c in spec.get("initContainers", []) + spec["containers"]:
        csc = c.get("securityContext", {})
        where = f"{name}/{c['name']}"
        if not (csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            findings.append(f"{where}: runAsNonRoot is not true")
        if csc.get("runAsUser", psc.get("runAsUser")) == 0:
            findings.append(f"{where}: runs as uid 0")
        if csc.get("privileged"):
            findings.append(f"{where}: privileged")
        if csc.get("allowPrivilegeEscalation") is not False:
            findings.append(f"{where}: allowPrivilegeEscalation is not false")
        caps = csc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            findings.append(f"{where}: capabilities do not drop ALL")
        extra = set(caps.get("add", [])) - ALLOWED_ADDED_CAPS
        if extra:
            findings.append(f"{where}: adds capabilities {sorted(extra)}")
        if csc.get("readOnlyRootFilesystem") is not True:
            findings.append(f"{where}: root filesystem is writable")


def check_rbac(docs, findings):
    kinds = {d["kind"] for d in docs}
    for wide in ("ClusterRole", "ClusterRoleBinding"):
        if wide in kinds:
            findings.append(f"a {wide} is granted: the backend needs nothing cluster-wide")
    roles = [d for d in docs if d["kind"] == "Role"]
    if len(roles) != 1:
        findings.append(f"expected one Role, found {len(roles)}")
        return
    granted = {}
    for rule in roles[0]["rules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                granted.setdefault((group, resource), set()).update(rule.get("verbs", []))
    if granted != EXPECTED_RULES:
        findings.append(f"Role grants {granted}, the backend uses {EXPECTED_RULES}")
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    if not any(b["roleRef"]["name"] == roles[0]["metadata"]["name"] for b in bindings):
        findings.append("no RoleBinding binds the Role")


def selects(selector, labels):
    for k, v in selector.get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions", []):
        value = labels.get(e["key"])
        if e["operator"] == "In" and value not in e["values"]:
            return False
        if e["operator"] == "NotIn" and value in e["values"]:
            return False
        if e["operator"] == "Exists" and value is None:
            return False
    return True


def check_network_policy(docs, daemon_labels, findings):
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    if not policies:
        findings.append("no NetworkPolicy isolates the executors")
        return
    for component in sorted(EXECUTOR_COMPONENTS):
        labels = {"app": EXECUTOR_APP, "component": component}
        isolating = [p for p in policies
                     if selects(p["spec"]["podSelector"], labels)
                     and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
                     and not p["spec"].get("ingress") and not p["spec"].get("egress")]
        if not isolating:
            findings.append(f"no deny-all policy selects executor pods with component={component}")
    for p in policies:
        if daemon_labels and selects(p["spec"]["podSelector"], daemon_labels):
            findings.append(f"NetworkPolicy {p['metadata']['name']} also isolates the daemon")


def main():
    docs = render()
    findings = []
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    for ns in namespaces:
        if ns["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") != "restricted":
            findings.append(f"namespace {ns['metadata']['name']} does not enforce restricted")
    templates = list(pod_templates(docs))
    if not templates:
        findings.append("no pod template rendered")
    for name, t in templates:
        check_restricted(name, t, findings)
    check_rbac(docs, findings)
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    daemon_labels = deployments[0]["spec"]["template"]["metadata"]["labels"] if deployments else {}
    check_network_policy(docs, daemon_labels, findings)
    for d in deployments:
        c = d["spec"]["template"]["spec"]["containers"][0]
        if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/health":
            findings.append(f"{d['metadata']['name']}: liveness probe is not GET /health")
        if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/ready":
            findings.append(f"{d['metadata']['name']}: readiness probe is not GET /ready")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        if env.get("EXECUTOR_BACKEND") != "kubernetes":
            findings.append(f"{d['metadata']['name']}: EXECUTOR_BACKEND is not kubernetes")
    for svc in (d for d in docs if d["kind"] == "Service"):
        if not any(selects({"matchLabels": svc["spec"]["selector"]},
                           dep["spec"]["template"]["metadata"]["labels"]) for dep in deployments):
            findings.append(f"Service {svc['metadata']['name']} selects no Deployment's pods")
    for f in findings:
        print(f)
    print(f"{len(docs)} objects checked, {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
