#!/usr/bin/env python3
"""The Helm chart packaging/helm/code-interpreter, rendered by render.py (CI has no helm):
(1) by default the objects of packaging/kubernetes less the Namespace, field by field where they
should agree (RBAC rules, the Deployment's env, probes, security contexts); (2) its values
(replicas, warm pool, API keys either way, networkPolicy and rbac off, ...); (3) what it and the
renderer refuse; (4) `kubectl apply --dry-run=client` of its objects, and of the kustomize
manifests, against the fake API server (tests/k8s). Skips (77) without kubectl or root, except
under CI=true."""

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

DEBIAN_PYTHON = "/usr/bin/python3"

try:
    import yaml
except ImportError:
    # Debian's python3-yaml lives in the system interpreter's dist-packages; run there.
    if os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != \
            os.path.realpath(DEBIAN_PYTHON) and not os.environ.get("HELM_TEST_REEXEC"):
        os.environ["HELM_TEST_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
    if os.environ.get("CI") != "true":
        print("skip: no python3-yaml", file=sys.stderr)
        sys.exit(77)
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(ROOT, "packaging", "helm", "code-interpreter")
KUSTOMIZE = os.path.join(ROOT, "packaging", "kubernetes")
RENDER = os.path.join(HERE, "render.py")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "k8s"))
sys.path.insert(0, os.path.join(ROOT, "tests", "packaging"))

import check_kubernetes_manifests as manifests  # noqa: E402
import render  # noqa: E402
from fake.launcher import FakeServer, main_with_kubectl  # noqa: E402

NS = "code-interpreter"
# Variables the chart sets besides the kustomize manifests' (their defaults are the daemon's).
CHART_ONLY_ENV = {"KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY", "KUBERNETES_SESSIONS_OUTLIVE_DAEMON",
                  "KUBERNETES_EXECUTOR_AGENT", "WARM_POOL_SIZE", "WARM_POOL_SIZE_BASH",
                  "WARM_POOL_SIZE_JAVASCRIPT", "WARM_POOL_SIZE_GO", "KUBERNETES_SHARED_WARM_POOL"}
KEY_A = "a" * 32
KEY_B = "b" * 32


def helm(*sets, release="code-interpreter", files=(), set_strings=()):
    """The chart's objects, as `helm template RELEASE CHART -n code-interpreter --set ...`."""
    text = render.render(CHART, release, NS, files, sets, set_strings)
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize():
    out = subprocess.run(["kubectl", "kustomize", KUSTOMIZE], check=True, capture_output=True,
                         text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def kinds(docs):
    return sorted(d["kind"] for d in docs)


def container(docs):
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def env(docs):
    return {e["name"]: e for e in container(docs)["env"]}


def env_values(docs):
    return {name: e.get("value") for name, e in env(docs).items()}


class DefaultRenderTest(unittest.TestCase):
    """(1) The default values render what kubectl kustomize renders, less the Namespace."""

    @classmethod
    def setUpClass(cls):
        cls.chart = helm()
        cls.kustomize = kustomize()

    def pair(self, kind):
        return one(self.chart, kind), one(self.kustomize, kind)

    def test_kinds_and_names(self):
        wanted = [d for d in self.kustomize if d["kind"] != "Namespace"]
        self.assertEqual(kinds(self.chart), kinds(wanted))
        self.assertEqual(sorted((d["kind"], d["metadata"]["name"]) for d in self.chart),
                         sorted((d["kind"], d["metadata"]["name"]) for d in wanted))
        for d in self.chart:
            self.assertEqual(d["metadata"]["namespace"], NS, d["kind"])
            self.assertEqual(d["metadata"]["labels"]["app.kubernetes.io/part-of"],
                             "code-interpreter", d["kind"])

    def test_rbac_is_role_yaml(self):
        role, theirs = self.pair("Role")
        self.assertEqual(role["rules"], theirs["rules"])
        binding, theirs = self.pair("RoleBinding")
        self.assertEqual(binding["roleRef"], theirs["roleRef"])
        self.assertEqual(binding["subjects"], theirs["subjects"])
        account, theirs = self.pair("ServiceAccount")
        self.assertEqual(account["automountServiceAccountToken"],
                         theirs["automountServiceAccountToken"])
        # The Role grants exactly what src/k8s calls (the manifests' own check).
        findings = []
        manifests.check_rbac(self.chart, findings)
        self.assertEqual(findings, [])

    def test_deployment_env(self):
        ours, theirs = env(self.chart), env(self.kustomize)
        self.assertEqual(set(ours) - set(theirs), CHART_ONLY_ENV)
        self.assertEqual(set(theirs) - set(ours), set())
        for name, entry in theirs.items():
            self.assertEqual(ours[name], entry, name)
        self.assertEqual(ours["EXECUTOR_BACKEND"]["value"], "kubernetes")
        for name in ("POD_NAME", "POD_UID", "POD_NAMESPACE", "KUBERNETES_EXECUTOR_NAMESPACE"):
            self.assertIn("fieldRef", ours[name]["valueFrom"], name)
        self.assertEqual({k: ours[k]["value"] for k in CHART_ONLY_ENV}, {
            "KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY": "IfNotPresent",
            "KUBERNETES_SESSIONS_OUTLIVE_DAEMON": "true", "KUBERNETES_EXECUTOR_AGENT": "true",
            "WARM_POOL_SIZE": "2", "WARM_POOL_SIZE_BASH": "1", "WARM_POOL_SIZE_JAVASCRIPT": "1",
            "WARM_POOL_SIZE_GO": "1", "KUBERNETES_SHARED_WARM_POOL": "false"})

    def test_deployment_fields(self):
        ours, theirs = self.pair("Deployment")
        self.assertEqual(ours["spec"]["replicas"], theirs["spec"]["replicas"])
        pod, their_pod = ours["spec"]["template"]["spec"], theirs["spec"]["template"]["spec"]
        for field in ("serviceAccountName", "enableServiceLinks", "securityContext", "volumes"):
            self.assertEqual(pod[field], their_pod[field], field)
        c, theirs_c = container(self.chart), container(self.kustomize)
        for field in ("name", "image", "imagePullPolicy", "args", "ports", "livenessProbe",
                      "readinessProbe", "resources", "securityContext", "volumeMounts"):
            self.assertEqual(c[field], theirs_c[field], field)
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/health")
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/ready")
        # The pods are kustomize's, plus the release: two releases in a namespace stay apart.
        labels = ours["spec"]["template"]["metadata"]["labels"]
        self.assertEqual(labels, {**theirs["spec"]["template"]["metadata"]["labels"],
                                  "app.kubernetes.io/instance": "code-interpreter"})
        self.assertEqual(ours["spec"]["selector"]["matchLabels"], labels)
        findings = []
        manifests.check_restricted("chart", ours["spec"]["template"], findings)
        self.assertEqual(findings, [])

    def test_service_and_network_policy(self):
        ours, theirs = self.pair("Service")
        self.assertEqual(ours["spec"]["ports"], theirs["spec"]["ports"])
        self.assertEqual(ours["spec"]["sessionAffinity"], theirs["spec"]["sessionAffinity"])
        labels = one(self.chart, "Deployment")["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(manifests.selects({"matchLabels": ours["spec"]["selector"]}, labels))
        ours, theirs = self.pair("NetworkPolicy")
        self.assertEqual(ours["spec"], theirs["spec"])
        findings = []
        manifests.check_network_policy(self.chart, labels, findings)
        self.assertEqual(findings, [])


class ValuesTest(unittest.TestCase):
    """(2) Each value does what values.yaml says, and nothing else."""

    def test_replicas_images_and_warm_pool(self):
        docs = helm("replicas=3", "image.repository=registry.example/ci,image.tag=1.2",
                    "executor.image.repository=registry.example/exec,executor.image.tag=7",
                    "warmPool.python=0,warmPool.bash=3,warmPool.javascript=0,warmPool.go=5",
                    "warmPool.shared=true")
        self.assertEqual(one(docs, "Deployment")["spec"]["replicas"], 3)
        self.assertEqual(container(docs)["image"], "registry.example/ci:1.2")
        values = env_values(docs)
        self.assertEqual(values["KUBERNETES_EXECUTOR_IMAGE"], "registry.example/exec:7")
        self.assertEqual([values[k] for k in ("WARM_POOL_SIZE", "WARM_POOL_SIZE_BASH",
                                              "WARM_POOL_SIZE_JAVASCRIPT", "WARM_POOL_SIZE_GO")],
                         ["0", "3", "0", "5"])
        self.assertEqual(values["KUBERNETES_SHARED_WARM_POOL"], "true")

    def test_agent_sandbox_mode(self):
        pods = helm()
        self.assertNotIn("KUBERNETES_SANDBOX_API", env_values(pods))
        rules = one(pods, "Role")["rules"]
        self.assertFalse([r for r in rules if "agents.x-k8s.io" in r["apiGroups"][0]])
        docs = helm("sandboxApi=agent-sandbox")
        self.assertEqual(env_values(docs)["KUBERNETES_SANDBOX_API"], "agent-sandbox")
        granted = {(g, res): r["verbs"] for r in one(docs, "Role")["rules"]
                   for g in r["apiGroups"] for res in r["resources"]}
        ext = "extensions.agents.x-k8s.io"
        self.assertEqual(granted[(ext, "sandboxtemplates")], ["create", "get", "patch"])
        self.assertEqual(granted[(ext, "sandboxwarmpools")], ["create", "get", "patch"])
        self.assertEqual(granted[(ext, "sandboxclaims")],
                         ["create", "get", "list", "watch", "delete"])
        self.assertEqual(granted[("agents.x-k8s.io", "sandboxes")], ["get"])
        # The pods rules stay: sessions are pods, and every execution attaches to its pod.
        self.assertEqual(granted[("", "pods/attach")], ["create", "get"])
        self.assertEqual(granted[("", "pods")], one(pods, "Role")["rules"][0]["verbs"])

    def test_executor_options_become_kubernetes_variables(self):
        docs = helm("executor.netAdminLockdown=true", "executor.agent=false",
                    "executor.sessionsOutliveDaemon=false", "executor.runtimeClass=gvisor",
                    r"executor.nodeSelector=pool=sandbox\,zone=a",
                    "executor.tolerations=sandbox=true:NoSchedule",
                    "executor.seccompProfile=profiles/code-interpreter.json",
                    "executor.imagePullSecrets=regcred", "executor.image.pullPolicy=Always")
        values = env_values(docs)
        self.assertEqual({k: values[k] for k in values if k.startswith("KUBERNETES_")
                          and k not in ("KUBERNETES_EXECUTOR_NAMESPACE",
                                        "KUBERNETES_EXECUTOR_IMAGE",
                                        "KUBERNETES_SHARED_WARM_POOL")}, {
            "KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN": "true",
            "KUBERNETES_EXECUTOR_AGENT": "false",
            "KUBERNETES_SESSIONS_OUTLIVE_DAEMON": "false",
            "KUBERNETES_EXECUTOR_RUNTIME_CLASS": "gvisor",
            "KUBERNETES_EXECUTOR_NODE_SELECTOR": "pool=sandbox,zone=a",
            "KUBERNETES_EXECUTOR_TOLERATIONS": "sandbox=true:NoSchedule",
            "KUBERNETES_EXECUTOR_SECCOMP_PROFILE": "profiles/code-interpreter.json",
            "KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS": "regcred",
            "KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY": "Always"})

    def test_api_keys_from_an_existing_secret(self):
        docs = helm("apiKeys.existingSecret=my-keys", "apiKeys.secretKey=keys.txt")
        self.assertNotIn("Secret", kinds(docs))
        self.assertEqual(env_values(docs)["API_KEYS_FILE"],
                         "/etc/code-interpreter/api-keys/keys.txt")
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        volume = next(v for v in pod["volumes"] if v["name"] == "api-keys")
        self.assertEqual(volume["secret"]["secretName"], "my-keys")
        self.assertEqual(volume["secret"]["defaultMode"], 0o440)
        mount = next(m for m in container(docs)["volumeMounts"] if m["name"] == "api-keys")
        # The directory, never a subPath: the kubelet updates the file, the daemon re-reads it.
        self.assertEqual(mount, {"name": "api-keys", "mountPath": "/etc/code-interpreter/api-keys",
                                 "readOnly": True})

    def test_api_keys_rendered_into_a_secret(self):
        values = os.path.join(self.tmp(), "keys.yaml")
        with open(values, "w") as f:
            yaml.safe_dump({"apiKeys": {"create": True, "keys": [
                {"name": "alice", "key": KEY_A, "limits": "sessions=4 files_mb=200"},
                {"name": "bob", "key": KEY_B}]}}, f)
        docs = helm(release="ci", files=[values])
        secret = one(docs, "Secret")
        self.assertEqual(secret["metadata"]["name"], "ci-code-interpreter-api-keys")
        text = base64.b64decode(secret["data"]["api-keys"]).decode()
        self.assertEqual([line for line in text.splitlines() if not line.startswith("#")],
                         [f"alice {KEY_A} sessions=4 files_mb=200", f"bob {KEY_B}"])
        self.assertTrue(text.endswith("\n"))
        self.assertEqual(env_values(docs)["API_KEYS_FILE"],
                         "/etc/code-interpreter/api-keys/api-keys")
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        self.assertIn({"name": "api-keys", "secret": {"secretName": "ci-code-interpreter-api-keys",
                                                      "defaultMode": 0o440}}, pod["volumes"])
        # The same through --set, as a user without a values file would.
        docs = helm(f"apiKeys.create=true,apiKeys.keys[0].name=carol,apiKeys.keys[0].key={KEY_A}")
        self.assertIn(f"carol {KEY_A}\n",
                      base64.b64decode(one(docs, "Secret")["data"]["api-keys"]).decode())

    def test_api_keys_mistakes_fail(self):
        for sets, message in [
                (["apiKeys.create=true"], "apiKeys.keys is empty"),
                (["apiKeys.create=true,apiKeys.existingSecret=x",
                  f"apiKeys.keys[0].name=a,apiKeys.keys[0].key={KEY_A}"], "not both"),
                (["apiKeys.create=true,apiKeys.keys[0].name=alice"], "every entry needs a key")]:
            with self.assertRaises(render.RenderError, msg=sets) as caught:
                helm(*sets)
            self.assertIn(message, str(caught.exception))
            self.assertIn("execution error at (code-interpreter/templates/", str(caught.exception))

    def test_no_api_keys_by_default(self):
        docs = helm()
        self.assertNotIn("API_KEYS_FILE", env(docs))
        volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
        self.assertNotIn("api-keys", [v["name"] for v in volumes])

    def test_network_policy_and_rbac_off(self):
        self.assertNotIn("NetworkPolicy", kinds(helm("networkPolicy.enabled=false")))
        docs = helm("rbac.create=false")
        self.assertEqual(kinds(docs), ["Deployment", "NetworkPolicy", "Service", "ServiceAccount"])

    def test_service_account_of_your_own(self):
        docs = helm("serviceAccount.create=false,serviceAccount.name=sandboxer")
        self.assertNotIn("ServiceAccount", kinds(docs))
        self.assertEqual(one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"],
                         "sandboxer")
        self.assertEqual(one(docs, "RoleBinding")["subjects"][0]["name"], "sandboxer")
        with self.assertRaises(render.RenderError) as caught:
            helm("serviceAccount.create=false")
        self.assertIn("serviceAccount.name", str(caught.exception))

    def test_release_name_prefixes_the_objects(self):
        docs = helm(release="ci")
        self.assertEqual({d["metadata"]["name"] for d in docs},
                         {"ci-code-interpreter", "ci-code-interpreter-executors-deny-all"})
        self.assertEqual(one(docs, "Service")["spec"]["selector"]["app.kubernetes.io/instance"],
                         "ci")
        self.assertEqual(one(docs, "RoleBinding")["roleRef"]["name"], "ci-code-interpreter")
        docs = helm("fullnameOverride=sandbox", release="ci")
        self.assertEqual(one(docs, "Deployment")["metadata"]["name"], "sandbox")

    def test_extra_env_scheduling_and_file_store(self):
        values = os.path.join(self.tmp(), "more.yaml")
        with open(values, "w") as f:
            yaml.safe_dump({"extraEnv": [{"name": "MODEL_API_KEY", "valueFrom": {
                "secretKeyRef": {"name": "llm", "key": "token"}}}],
                "tolerations": [{"key": "sandbox", "operator": "Exists"}],
                "podAnnotations": {"example.com/scrape": "true"}}, f)
        docs = helm("env.WARM_IMPORTS=numpy\\,pandas", "nodeSelector.pool=daemons",
                    "fileStore.existingClaim=files-rwx", files=[values],
                    set_strings=["env.MAX_SESSIONS=010"])
        entries = container(docs)["env"]
        self.assertEqual(entries[-3:], [
            {"name": "MAX_SESSIONS", "value": "010"},
            {"name": "WARM_IMPORTS", "value": "numpy,pandas"},
            {"name": "MODEL_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm",
                                                                     "key": "token"}}}])
        template = one(docs, "Deployment")["spec"]["template"]
        self.assertEqual(template["spec"]["nodeSelector"], {"pool": "daemons"})
        self.assertEqual(template["spec"]["tolerations"], [{"key": "sandbox",
                                                            "operator": "Exists"}])
        self.assertEqual(template["metadata"]["annotations"], {"example.com/scrape": "true"})
        self.assertIn({"name": "files", "persistentVolumeClaim": {"claimName": "files-rwx"}},
                      template["spec"]["volumes"])

    def tmp(self):
        d = tempfile.TemporaryDirectory(prefix="helm-chart-test-")
        self.addCleanup(d.cleanup)
        return d.name


class RefusalTest(unittest.TestCase):
    """(3) What the chart refuses (with helm's wording) and what the renderer does not know."""

    def test_sandbox_api_mistakes_fail(self):
        r = subprocess.run([sys.executable, RENDER, "ci", CHART, "--set",
                            "sandboxApi=agent-sandbox,warmPool.shared=true"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertRegex(r.stderr, r"^Error: execution error at \(code-interpreter/templates/"
                                   r"_helpers\.tpl:\d+\): warmPool\.shared: with sandboxApi "
                                   r"agent-sandbox .*set it false")
        with self.assertRaises(render.RenderError) as caught:
            helm("sandboxApi=kata")
        self.assertIn("sandboxApi: must be pods or agent-sandbox", str(caught.exception))

    def test_unsupported_constructs_are_refused_naming_template_and_line(self):
        cases = [('{{ printf "%s" .Values.image.tag }}', 'function "printf" is not supported'),
                 ("{{ .Capabilities.KubeVersion.Version }}", ".Capabilities is not supported"),
                 ("{{ .Release.Service }}", ".Release.Service is not supported"),
                 ('{{ .Files.Get "x" }}', ".Files is not supported"),
                 ("{{/* a comment */}}", "comments"),
                 ('{{ template "code-interpreter.labels" . }}', "template is not supported"),
                 ("{{ $x := 1 }}", "variable assignment"),
                 ("{{ if .Values.a }}a{{ else if .Values.b }}b{{ end }}", "else if"),
                 ("{{ toJson .Values }}", 'function "toJson"'),
                 ('{{ (include "code-interpreter.labels" .).x }}', "field .x applied"),
                 ("{{ quote `raw` }}", "unsupported character '`'"),
                 ("{{ .Values.image | upper }}", 'function "upper"'),
                 ("{{ range .Values.env }}", "range has no {{ end }}")]
        for text, message in cases:
            with self.subTest(text=text):
                chart = self.chart_with("extra.yaml", f"# line 1\n# line 2\nx: {text}\n")
                with self.assertRaises(render.RenderError) as caught:
                    render.render(chart, "ci")
                self.assertIn("code-interpreter/templates/extra.yaml:3)", str(caught.exception))
                self.assertIn(message, str(caught.exception))

    def test_other_files_in_templates_are_refused(self):
        chart = self.chart_with("NOTES.txt", "Thanks\n")
        with self.assertRaises(render.RenderError) as caught:
            render.render(chart, "ci")
        self.assertIn("templates/NOTES.txt: only templates/*.yaml and templates/_*.tpl",
                      str(caught.exception))

    def chart_with(self, name, text):
        d = tempfile.TemporaryDirectory(prefix="helm-chart-test-")
        self.addCleanup(d.cleanup)
        chart = os.path.join(d.name, "code-interpreter")
        shutil.copytree(CHART, chart)
        with open(os.path.join(chart, "templates", name), "w") as f:
            f.write(text)
        return chart


class RendererTest(unittest.TestCase):
    """The renderer's Go template semantics, on a chart of one template."""

    def render(self, template, values="", *sets):
        d = tempfile.TemporaryDirectory(prefix="helm-render-test-")
        self.addCleanup(d.cleanup)
        os.mkdir(os.path.join(d.name, "templates"))
        for name, text in [("Chart.yaml", "apiVersion: v2\nname: t\nversion: 1.0.0\n"),
                           ("values.yaml", values),
                           ("templates/t.yaml", "kind: T\n" + template)]:
            with open(os.path.join(d.name, name), "w") as f:
                f.write(text)
        out = render.render(d.name, "rel", "ns", (), sets)
        return out.split("# Source: t/templates/t.yaml\nkind: T\n", 1)[1]

    def test_trimming_range_with_and_else(self):
        values = "m: {b: 2, a: 1}\nl: [x, y]\nempty: []\n"
        self.assertEqual(self.render("r: |\n  {{- range $k, $v := .Values.m }}\n  {{ $k }}={{ $v }}"
                                     "\n  {{- end }}\n", values), "r: |\n  a=1\n  b=2\n")
        self.assertEqual(self.render("r: {{ range .Values.l }}{{ . }}{{ end }}"
                                     "{{ range .Values.empty }}no{{ else }}-none{{ end }}\n",
                                     values), "r: xy-none\n")
        self.assertEqual(self.render("r: {{ with .Values.m }}{{ .a }}{{ $.Release.Name }}"
                                     "{{ end }}{{ with .Values.nope }}x{{ else }}-{{ end }}\n",
                                     values), "r: 1rel-\n")

    def test_functions(self):
        out = self.render('a: {{ .Values.s | quote }}\nb: {{ default "d" .Values.none }}\n'
                          "c: {{ toYaml .Values.m | nindent 2 }}\n"
                          'd: {{ and .Values.s (eq .Values.n 3) (not .Values.f) }}\n'
                          'e: {{ or .Values.f .Values.none "x" }}\n'
                          'f: {{ ne .Values.s "x" }}{{ .Values.none }}\n'
                          'g: {{ "é\\n" | b64enc }}\n',
                          's: "q\\"\\n"\nn: 3\nf: false\nm: {z: [1, 2], a: {}}\n')
        self.assertEqual(yaml.safe_load(out), {
            "a": 'q"\n', "b": "d", "c": {"a": {}, "z": [1, 2]}, "d": True, "e": "x",
            "f": True, "g": base64.b64encode("é\n".encode()).decode()})

    def test_values_merge_like_helm(self):
        out = self.render("r: {{ toYaml .Values | nindent 2 }}\n",
                          "a: {b: 1, c: 2}\nd: [1]\ne: keep\n",
                          "a.b=null,a.x=true,d={3,4},f[1].g=0", "e=007,h=-5")
        self.assertEqual(yaml.safe_load(out)["r"], {"a": {"c": 2, "x": True}, "d": [3, 4],
                                                    "e": "007", "f": [None, {"g": 0}],
                                                    "h": -5})

    def test_runtime_errors_name_the_line(self):
        for template, message in [("r: {{ .Values.a.b }}\n", "nil pointer evaluating"),
                                  ('r: {{ eq .Values.n "3" }}\n', "incompatible types"),
                                  ("r: {{ .Values.m }}\n", "use toYaml"),
                                  ('r: {{ include "nope" . }}\n', 'no template "nope"')]:
            with self.assertRaises(render.RenderError, msg=template) as caught:
                self.render(template, "n: 3\nm: {a: 1}\n")
            self.assertIn("t/templates/t.yaml:2", str(caught.exception))
            self.assertIn(message, str(caught.exception))


class DryRunTest(unittest.TestCase):
    """(4) kubectl's client dry run of the chart's and the kustomize manifests' objects against
    the fake API server: discovery maps every kind, a GET finds none, so all are created."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="helm-chart-dry-run-")
        cls.server = FakeServer(os.path.join(cls.tmp.name, "state")).__enter__()
        cls.env = dict(os.environ, KUBECONFIG=cls.server.info["kubeconfig"],
                       HOME=cls.tmp.name)  # no ~/.kube cache from elsewhere

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def apply(self, manifests_text, *flags):
        r = subprocess.run(["kubectl", "apply", "--dry-run=client", *flags, "-f", "-"],
                           input=manifests_text, capture_output=True, text=True, env=self.env,
                           timeout=120)
        return r.returncode, r.stdout.splitlines(), r.stderr

    def assert_created(self, text, names):
        code, lines, err = self.apply(text)
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(lines), sorted(f"{n} created (dry run)" for n in names))

    def test_chart_defaults(self):
        out = subprocess.run([sys.executable, RENDER, "ci", CHART, "--namespace", "sandboxes"],
                             check=True, capture_output=True, text=True).stdout
        self.assert_created(out, [
            "serviceaccount/ci-code-interpreter", "role.rbac.authorization.k8s.io/"
            "ci-code-interpreter", "rolebinding.rbac.authorization.k8s.io/ci-code-interpreter",
            "service/ci-code-interpreter", "deployment.apps/ci-code-interpreter",
            "networkpolicy.networking.k8s.io/ci-code-interpreter-executors-deny-all"])

    def test_chart_with_every_option(self):
        out = render.render(CHART, "ci", "sandboxes", (), [
            f"apiKeys.create=true,apiKeys.keys[0].name=alice,apiKeys.keys[0].key={KEY_A}",
            "replicas=2,fileStore.existingClaim=files,executor.runtimeClass=gvisor",
            "nodeSelector.pool=a,tolerations[0].key=b,tolerations[0].operator=Exists",
            "env.WARM_IMPORTS=numpy,imagePullSecrets[0].name=regcred",
            "sandboxApi=agent-sandbox"])
        code, lines, err = self.apply(out)
        self.assertEqual(code, 0, err)
        self.assertIn("secret/ci-code-interpreter-api-keys created (dry run)", lines)
        self.assertEqual(len(lines), 7)

    def test_kustomize_manifests(self):
        out = subprocess.run(["kubectl", "kustomize", KUSTOMIZE], check=True,
                             capture_output=True, text=True).stdout
        self.assert_created(out, [
            "namespace/code-interpreter", "serviceaccount/code-interpreter",
            "role.rbac.authorization.k8s.io/code-interpreter",
            "rolebinding.rbac.authorization.k8s.io/code-interpreter",
            "service/code-interpreter", "deployment.apps/code-interpreter",
            "networkpolicy.networking.k8s.io/code-interpreter-executors-deny-all"])

    def test_a_kind_the_server_does_not_serve_is_refused(self):
        # The check has teeth: kubectl maps each object through the fake's discovery (without
        # --validate=false it stops earlier, on the OpenAPI the fake does not have for apps/v2).
        code, _, err = self.apply("apiVersion: apps/v2\nkind: Deployment\nmetadata: {name: x}\n",
                                  "--validate=false")
        self.assertNotEqual(code, 0)
        self.assertIn('no matches for kind "Deployment" in version "apps/v2"', err)


if __name__ == "__main__":
    main_with_kubectl("the fake API server needs")
