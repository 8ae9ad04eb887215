#!/usr/bin/env python3
"""A fake Kubernetes API server for the tests: HTTPS with a bearer token, core/v1 pods
(create/get/list/watch/delete with Status errors and resourceVersions) on a fake node whose pods
really run (bubblewrap sandboxes with their emptyDir volumes), and the exec and attach
subresources over WebSocket (v5.channel.k8s.io and v4.channel.k8s.io). See README.md in this
directory.

    python3 tests/k8s/fake_apiserver.py --port 0 --state-dir DIR

prints one JSON line {"url", "ca", "token", "kubeconfig"} once it listens; DIR/kubeconfig is
ready for `kubectl --kubeconfig`."""

import argparse
import base64
import json
import os
import secrets
import select
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake import crds, pods, protobuf, table, websocket, yaml_lite  # noqa: E402
from fake.agent_sandbox import Controller as AgentSandboxController  # noqa: E402
from fake.gc import Collector  # noqa: E402
from fake.exec_stream import V4, V5, AttachStream, ExecStream  # noqa: E402
from fake.kubelet import Node  # noqa: E402
from fake.locked_tls import LockedTls  # noqa: E402
from fake.sandbox import IMAGE_DIRS  # noqa: E402
from fake.selectors import META_FIELDS, parse_fields, parse_labels  # noqa: E402
from fake.status import (ApiError, already_exists, bad_request, conflict,  # noqa: E402
                         forbidden, invalid, not_found, unauthorized)
from fake.store import Store, now_rfc3339  # noqa: E402
from fake.tls import make_certs  # noqa: E402

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake", "gitCommit": "fake",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
           "compiler": "gc", "platform": "linux/amd64"}

RESOURCES = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
    {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
     "verbs": ["get", "list"], "shortNames": ["ns"]},
    {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
     "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "watch"],
     "shortNames": ["po"], "categories": ["all"]},
    {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
     "verbs": ["create", "get"]},
    {"name": "pods/attach", "singularName": "", "namespaced": True, "kind": "PodAttachOptions",
     "verbs": ["create", "get"]},
    {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
     "verbs": ["get"]},
]}
USER = "system:serviceaccount:default:fake-client"
AGENT_SANDBOX_CRDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent-sandbox",
                                  "crds")
AUTHORIZATION = {"name": "authorization.k8s.io",
                 "versions": [{"groupVersion": "authorization.k8s.io/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": "authorization.k8s.io/v1", "version": "v1"}}
AUTHORIZATION_RESOURCES = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "authorization.k8s.io/v1",
    "resources": [{"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview",
                   "namespaced": False, "kind": "SelfSubjectAccessReview", "verbs": ["create"]}]}

# Kinds the fake knows by name only: kubectl's REST mapping (discovery) finds them and a GET of
# one is a 404, all that `kubectl apply --dry-run=client` asks (tests/helm/chart_test.py applies
# the chart and the kustomize manifests so). group/version -> (resource, kind, short names).
NAMED_ONLY = {
    "v1": [("services", "Service", ["svc"]), ("serviceaccounts", "ServiceAccount", ["sa"]),
           ("secrets", "Secret", []), ("configmaps", "ConfigMap", ["cm"])],
    "apps/v1": [("deployments", "Deployment", ["deploy"])],
    "rbac.authorization.k8s.io/v1": [("roles", "Role", []), ("rolebindings", "RoleBinding", [])],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy", ["netpol"])],
}


def _named_only_resources(group_version):
    return [{"name": resource, "singularName": kind.lower(), "namespaced": True, "kind": kind,
             "verbs": ["get"], "shortNames": short}
            for resource, kind, short in NAMED_ONLY[group_version]]


RESOURCES["resources"] += _named_only_resources("v1")
NAMED_GROUPS = [{"name": gv.split("/")[0],
                 "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                 "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]}}
                for gv in NAMED_ONLY if gv != "v1"]
NAMED_GROUP_RESOURCES = {gv: {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                              "resources": _named_only_resources(gv)}
                         for gv in NAMED_ONLY if gv != "v1"}


def _openapi_patch(path, group_version, kind):
    """A PATCH of `kind` taking fieldValidation: kubectl apply then leaves validation to the
    server (its QueryParamVerifierV3) instead of downloading /openapi/v2."""
    group, _, version = group_version.rpartition("/")
    return path, {"patch": {
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind},
        "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "OK"}}}}


def _openapi_doc(group_version, extra=()):
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    paths = dict(extra)
    for resource, kind, _ in NAMED_ONLY[group_version]:
        paths.update([_openapi_patch(f"{prefix}/namespaces/{{namespace}}/{resource}/{{name}}",
                                     group_version, kind)])
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (fake)", "version": "v1.32.0"},
            "paths": paths}


# Just enough OpenAPI v3 for kubectl apply: its validation asks whether PATCH on a kind takes the
# fieldValidation query parameter (kubectl's QueryParamVerifierV3) and, when it does, leaves
# validation to the server instead of downloading every schema.
OPENAPI_BY_PATH = {("api/v1" if gv == "v1" else f"apis/{gv}"): _openapi_doc(gv)
                   for gv in NAMED_ONLY}
OPENAPI_BY_PATH["api/v1"] = _openapi_doc("v1", [
    _openapi_patch("/api/v1/namespaces/{namespace}/pods/{name}", "v1", "Pod"),
    _openapi_patch("/api/v1/namespaces/{name}", "v1", "Namespace")])
OPENAPI_BY_PATH[f"apis/{crds.CRD_GROUP}/v1"] = {
    "openapi": "3.0.0", "info": {"title": "Kubernetes (fake)", "version": "v1.32.0"},
    "paths": dict([_openapi_patch(f"/apis/{crds.CRD_GROUP}/v1/customresourcedefinitions/{{name}}",
                                  f"{crds.CRD_GROUP}/v1", "CustomResourceDefinition")])}
CRD_API_GROUP = {"name": crds.CRD_GROUP,
                 "versions": [{"groupVersion": f"{crds.CRD_GROUP}/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": f"{crds.CRD_GROUP}/v1", "version": "v1"}}
CRD_RESOURCES = {"kind": "APIResourceList", "apiVersion": "v1",
                 "groupVersion": f"{crds.CRD_GROUP}/v1", "resources": [
                     {"name": "customresourcedefinitions",
                      "singularName": "customresourcedefinition", "namespaced": False,
                      "kind": "CustomResourceDefinition", "shortNames": ["crd", "crds"],
                      "categories": ["api-extensions"],
                      "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                                "update", "watch"]},
                     {"name": "customresourcedefinitions/status", "singularName": "",
                      "namespaced": False, "kind": "CustomResourceDefinition",
                      "verbs": ["get", "patch", "update"]}]}


def not_found_path():
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource", {})


def _truthy(value):
    return value in ("1", "true", "True")


class FakeApiServer:
    def __init__(self, args):
        self.args = args
        self.token = args.token or secrets.token_hex(16)
        self.store = Store(args.watch_history)
        self.node = Node(self.store, args.state_dir, args.pod_pids_limit, args.seccomp_root,
                         args.pod_network, dict(args.image_file or []),
                         dict(args.image_link or []))
        self.namespaces = set(args.namespace or ["default"]) | {"default", "kube-system"}
        self.restricted = set(args.restricted or [])
        self.denied = set(args.deny or [])  # "verb:resource", e.g. "create:pods"
        self.protocols = [p for p in (V5, V4) if not (p == V5 and args.no_v5)]
        self.objects = crds.Objects(self.store, self.namespaces)  # CRDs and custom resources
        self.collector = Collector(self)
        self.collector.start()

    def create_pod(self, ns, pod, dry_run=False):
        """Pod admission and creation, for a client's POST and for controllers alike: names,
        validation, the namespace, restricted PSS, defaults, quota; then the node runs it."""
        if not isinstance(pod, dict):
            raise bad_request("the body of the request must be a Pod object")
        name = pods.assign_name(pod)
        pods.validate(pod, ns)
        if ns not in self.namespaces:
            raise not_found("namespaces", ns)
        if ns in self.restricted:
            pods.admit_restricted(pod)
        pods.apply_defaults(pod, ns)
        self.admit_quota(ns, name)
        if dry_run:
            return pod
        created = self.store.add(pod)
        if created is None:
            raise already_exists("pods", name)
        self.node.start_pod(created)
        return created

    def admit_quota(self, ns, name):
        """The ResourceQuota admission's refusal when --max-pods pods already exist in ns
        (terminal pods do not count, as in the quota evaluator)."""
        limit = self.args.max_pods
        if limit is None:
            return
        items, _ = self.store.list(ns, [], [])
        used = sum(1 for p in items if p["status"].get("phase") not in ("Succeeded", "Failed"))
        if used >= limit:
            raise forbidden(f'pods "{name}" is forbidden: exceeded quota: fake-quota, '
                            f"requested: pods=1, used: pods={used}, limited: pods={limit}",
                            "pods", name)

    @staticmethod
    def grace(pod, options, query_grace=None):
        if query_grace is not None:
            grace = int(query_grace)
        elif options and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        else:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        # The pod registry forces 0 for a pod no node runs, or one that has finished.
        if not pod["spec"].get("nodeName") or pod["status"].get("phase") in ("Succeeded",
                                                                            "Failed"):
            grace = 0
        return max(grace, 0)

    def delete_pod(self, ns, name, options, query_grace=None):
        """A pod's deletion (a client's DELETE or the garbage collector's); returns the body."""
        pod = self.store.get(ns, name)
        uid = pod["metadata"]["uid"]
        grace = self.grace(pod, options, query_grace)
        if grace == 0:
            # A forced delete: the object goes at once (nobody lists it any more), then its
            # containers are stopped (the kubelet's part; here before the answer).
            gone = self.store.remove(ns, name, uid)
            if gone is None:
                raise not_found("pods", name)
            self.node.stop_pod(uid, 0)
            return gone
        if pod["metadata"].get("deletionTimestamp"):
            return pod  # already terminating

        def mark(p):
            p["metadata"]["deletionTimestamp"] = now_rfc3339(grace)
            p["metadata"]["deletionGracePeriodSeconds"] = grace
        marked = self.store.update(ns, name, mark)
        self.finish_delete(ns, name, uid, grace)
        return marked or pod

    def finish_delete(self, ns, name, uid, grace):
        """In the background, as the kubelet does: stop the containers within the grace period,
        then remove the object."""
        def finish():
            self.node.stop_pod(uid, grace)
            self.store.remove(ns, name, uid)
        threading.Thread(target=finish, daemon=True).start()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    api = None  # FakeApiServer, set on the subclass made in main()

    def setup(self):
        # Not StreamRequestHandler's socket files: exec and attach streams read and write the
        # connection from several threads, and only LockedTls makes that safe over TLS.
        self.connection = LockedTls(self.request)
        self.rfile = self.connection.reader()
        self.wfile = self.connection.writer()

    def log_message(self, fmt, *args):
        if self.api.args.verbose:
            sys.stderr.write("fake-apiserver: " + fmt % args + "\n")

    # -- plumbing ---------------------------------------------------------------------------

    def _send_json(self, code, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _raw_body(self):
        """The request's body, once; b"" after. Every answer, refusals too, reads it whole so
        that the connection's next request starts where this one ended."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length and not self.body_read else b""
        self.body_read = True
        return raw

    def _body(self):
        raw = self._raw_body()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise bad_request(f"the body of the request was in an unknown format: {e}") from None

    def _dispatch(self, method):
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        self.q = {k: v[-1] for k, v in query.items()}
        self.q_all = query
        self.body_read = False
        parts = [p for p in url.path.split("/") if p]
        try:
            if parts in (["healthz"], ["livez"], ["readyz"]):
                return self._send_text(200, "ok")
            if self.headers.get("Authorization", "") != f"Bearer {self.api.token}":
                raise unauthorized()
            self._route(method, parts)
        except ApiError as e:
            if not self.close_connection:
                self._raw_body()
            self._send_json(e.code, e.body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # a fake's bug: say so in a Status, not a dropped connection
            traceback.print_exc()
            self.close_connection = True
            try:
                self._send_json(500, ApiError(500, "InternalError",
                                              f"fake apiserver error: {e!r}").body)
            except OSError:
                pass

    def _send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def _denied(self, verb, resource, namespace):
        denied = self.api.denied
        return f"{verb}:{resource}" in denied or f"{verb}:{resource}:{namespace}" in denied

    def _authorize(self, verb, resource, namespace, name=None, group=""):
        """--deny's RBAC; `resource` is the plural (with /subresource), as in a Role."""
        if self._denied(verb, resource, namespace):
            plural = resource.split("/")[0]
            qualified = f"{plural}.{group}" if group else plural
            what = f'{qualified} "{name}"' if name else qualified
            where = (f' in the namespace "{namespace}"' if namespace or not group
                     else " at the cluster scope")
            error = forbidden(f'{what} is forbidden: User "{USER}" cannot {verb} resource '
                              f'"{resource}" in API group "{group}"{where}', plural, name)
            if group:
                error.body["details"]["group"] = group
            raise error

    # -- routes -----------------------------------------------------------------------------

    def _route(self, method, parts):
        if method == "GET" and parts == ["version"]:
            return self._send_json(200, VERSION)
        if method == "GET" and parts == ["api"]:
            host = self.headers.get("Host", "")
            return self._send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                         "serverAddressByClientCIDRs": [
                                             {"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})
        if method == "GET" and parts == ["apis"]:
            return self._send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                         "groups": [AUTHORIZATION] + NAMED_GROUPS +
                                         [CRD_API_GROUP] + self._custom_groups()})
        if method == "GET" and parts == ["apis", "authorization.k8s.io", "v1"]:
            return self._send_json(200, AUTHORIZATION_RESOURCES)
        if method == "POST" and parts == ["apis", "authorization.k8s.io", "v1",
                                          "selfsubjectaccessreviews"]:
            return self._access_review()
        if method == "GET" and parts == ["api", "v1"]:
            return self._send_json(200, RESOURCES)
        if method == "GET" and parts[:2] == ["openapi", "v3"]:
            docs = dict(OPENAPI_BY_PATH, **self.api.objects.registry.openapi_paths())
            if parts == ["openapi", "v3"]:
                return self._send_json(200, {"paths": {
                    p: {"serverRelativeURL": f"/openapi/v3/{p}?hash=fake{self.api.store.rv}"}
                    for p in docs}})
            if "/".join(parts[2:]) in docs:
                return self._send_json(200, docs["/".join(parts[2:])])
        if parts[:1] == ["apis"] and len(parts) >= 3 and \
                "/".join(parts[1:3]) not in NAMED_GROUP_RESOURCES and \
                parts[1] != "authorization.k8s.io":
            return self._route_custom(method, parts)
        if method == "GET" and len(parts) == 3 and parts[0] == "apis" and \
                "/".join(parts[1:]) in NAMED_GROUP_RESOURCES:
            return self._send_json(200, NAMED_GROUP_RESOURCES["/".join(parts[1:])])
        if method == "GET":
            self._get_named_only(parts)
        if parts[:2] != ["api", "v1"] or len(parts) < 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {})
        rest = parts[2:]
        if rest == ["namespaces"] and method == "GET":
            return self._send_json(200, {"kind": "NamespaceList", "apiVersion": "v1",
                                         "metadata": {"resourceVersion": str(self.api.store.rv)},
                                         "items": [self._namespace(n)
                                                   for n in sorted(self.api.namespaces)]})
        if len(rest) == 2 and rest[0] == "namespaces" and method == "GET":
            if rest[1] not in self.api.namespaces:
                raise not_found("namespaces", rest[1])
            return self._send_json(200, self._namespace(rest[1]))
        if rest == ["pods"] and method == "GET":
            return self._list_or_watch(None)
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == "pods":
            ns, sub = rest[1], rest[3:]
            if not sub:
                if method == "GET":
                    return self._list_or_watch(ns)
                if method == "POST":
                    return self._create(ns)
                if method == "DELETE":
                    return self._delete_collection(ns)
            elif len(sub) == 1:
                if method == "GET":
                    self._authorize("get", "pods", ns, sub[0])
                    pod = self.api.store.get(ns, sub[0])
                    if "as=Table" in self.headers.get("Accept", ""):
                        return self._send_json(200, table.pod_table(
                            [pod], pod["metadata"]["resourceVersion"], self.q.get("includeObject")))
                    return self._send_json(200, pod)
                if method == "DELETE":
                    return self._delete(ns, sub[0])
                if method == "PATCH":
                    return self._patch(ns, sub[0])
            elif len(sub) == 2 and sub[1] == "exec" and method in ("GET", "POST"):
                return self._exec(ns, sub[0], "get" if method == "GET" else "create")
            elif len(sub) == 2 and sub[1] == "attach" and method in ("GET", "POST"):
                return self._attach(ns, sub[0], "get" if method == "GET" else "create")
            elif len(sub) == 2 and sub[1] == "log" and method == "GET":
                return self._log(ns, sub[0])
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource "
                           "(the fake serves pods create/get/list/watch/patch/delete, exec, "
                           "attach, log)", {})
        raise ApiError(404, "NotFound", "the server could not find the requested resource", {})

    # -- CustomResourceDefinitions and custom resources ---------------------------------------

    def _custom_groups(self):
        return [{"name": group,
                 "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                 "preferredVersion": {"groupVersion": f"{group}/{versions[0]}",
                                      "version": versions[0]}}
                for group, versions in self.api.objects.registry.groups()]

    def _route_custom(self, method, parts):
        objects = self.api.objects
        group, version, rest = parts[1], parts[2], parts[3:]
        if group == crds.CRD_GROUP and version == "v1":
            if not rest and method == "GET":
                return self._send_json(200, CRD_RESOURCES)
            if rest[:1] == ["customresourcedefinitions"] and len(rest) <= 3:
                return self._custom(method, None, "", rest[1:])
            raise not_found_path()
        if not rest:
            if method == "GET" and objects.registry.resources(group, version):
                return self._send_json(200, {
                    "kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}",
                    "resources": objects.registry.resources(group, version)})
            raise not_found_path()
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, plural, tail = rest[1], rest[2], rest[3:]
        else:
            ns, plural, tail = None, rest[0], rest[1:]
        info = objects.registry.lookup(group, version, plural)
        if info is None or len(tail) > 2 or (ns is not None and not info.namespaced) or \
                (ns is None and info.namespaced and tail):
            raise not_found_path()
        return self._custom(method, info, ns, tail)

    def _custom(self, method, info, ns, tail):
        """A CRD (info None) or custom resource request: tail is [], [name] or
        [name, subresource]."""
        objects, store = self.api.objects, self.api.store
        resource = info.resource if info else crds.CRD_RESOURCE
        plural, group = resource.split(".", 1)
        key_ns = ns if info and info.namespaced else ""
        auth_ns = ns or ""
        strict = self.q.get("fieldValidation") == "Strict"
        dry_run = self.q.get("dryRun") == "All"
        accept_table = "as=Table" in self.headers.get("Accept", "")
        columns = (info.columns or [{"name": "Age", "type": "date",
                                     "jsonPath": ".metadata.creationTimestamp"}]) if info else None
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip()

        def auth(verb, name=None, sub=None):
            self._authorize(verb, f"{plural}/{sub}" if sub else plural, auth_ns, name, group)

        if not tail:
            if method == "GET":
                labels = parse_labels(self.q.get("labelSelector"))
                fields = parse_fields(self.q.get("fieldSelector"), META_FIELDS)
                if _truthy(self.q.get("watch")):
                    auth("watch")
                    return self._watch(ns, labels, fields, resource)
                auth("list")
                items, rv = store.list(ns, labels, fields, resource)
                if accept_table:
                    return self._send_json(200, crds.table(items, rv, self.q.get("includeObject"),
                                                           columns))
                kind = info.list_kind if info else "CustomResourceDefinitionList"
                api_version = info.api_version if info else f"{crds.CRD_GROUP}/v1"
                return self._send_json(200, {"kind": kind, "apiVersion": api_version,
                                             "metadata": {"resourceVersion": rv},
                                             "items": items})
            if method == "POST":
                auth("create")
                return self._send_json(201, objects.create(info, ns, self._body(), strict,
                                                           dry_run))
            if method == "DELETE":
                auth("deletecollection")
                options = self._body() or {}
                items, rv = store.list(ns, parse_labels(self.q.get("labelSelector")),
                                       parse_fields(self.q.get("fieldSelector"), META_FIELDS),
                                       resource)
                for obj in items:
                    try:
                        self.api.collector.delete(resource, key_ns, obj["metadata"]["name"],
                                                  options, self.q.get("propagationPolicy"))
                    except ApiError:
                        pass
                return self._send_json(200, {"kind": "Status", "apiVersion": "v1",
                                             "metadata": {}, "status": "Success"})
            raise method_not_allowed()
        name, sub = tail[0], (tail[1] if len(tail) == 2 else None)
        if sub == "status" and (info is None or info.has_status):
            if method == "GET":
                auth("get", name, sub)
                return self._send_json(200, store.get(key_ns, name, resource))
            if method == "PUT":
                auth("update", name, sub)
                return self._send_json(200, objects.update(info, key_ns, name, self._body(),
                                                           "status"))
            if method == "PATCH":
                auth("patch", name, sub)
                return self._send_json(200, objects.patch(info, key_ns, name, content_type,
                                                          self._body(), "status"))
            raise method_not_allowed()
        if sub == "scale" and info is not None and info.scale:
            if method == "GET":
                auth("get", name, sub)
                return self._send_json(200, objects.scale_of(info, store.get(key_ns, name,
                                                                             resource)))
            if method in ("PUT", "PATCH"):
                auth("update" if method == "PUT" else "patch", name, sub)
                return self._send_json(200, objects.update_scale(
                    info, key_ns, name, self._body(),
                    content_type if method == "PATCH" else None))
            raise method_not_allowed()
        if sub is not None:
            raise not_found_path()
        if method == "GET":
            auth("get", name)
            obj = store.get(key_ns, name, resource)
            if accept_table:
                return self._send_json(200, crds.table([obj], obj["metadata"]["resourceVersion"],
                                                       self.q.get("includeObject"), columns))
            return self._send_json(200, obj)
        if method == "PUT":
            auth("update", name)
            return self._send_json(200, objects.update(info, key_ns, name, self._body(), None,
                                                       strict))
        if method == "PATCH":
            auth("patch", name)
            return self._send_json(200, objects.patch(info, key_ns, name, content_type,
                                                      self._body(), None, strict))
        if method == "DELETE":
            auth("delete", name)
            return self._send_json(200, self.api.collector.delete(
                resource, key_ns, name, self._body(), self.q.get("propagationPolicy")))
        raise method_not_allowed()

    @staticmethod
    def _get_named_only(parts):
        """GET of one object of a NAMED_ONLY kind: there never is one (404 NotFound)."""
        prefix, rest = (parts[:2], parts[2:]) if parts[:1] == ["api"] else (parts[:3], parts[3:])
        group_version = "/".join(prefix[1:])
        if len(rest) == 4 and rest[0] == "namespaces" and group_version in NAMED_ONLY and \
                rest[2] in [r for r, _, _ in NAMED_ONLY[group_version]]:
            raise not_found(rest[2], rest[3])

    def _access_review(self):
        """A SelfSubjectAccessReview of resourceAttributes, decided by --deny as requests are."""
        if self.headers.get("Content-Type", "").startswith(protobuf.CONTENT_TYPE):
            try:
                review = protobuf.access_review(self._raw_body())
            except (ValueError, UnicodeDecodeError) as e:
                raise bad_request(f"the protobuf body could not be read: {e}") from None
        else:
            review = self._body() or {}
        if review.get("kind") != "SelfSubjectAccessReview":
            raise bad_request("the body is not a SelfSubjectAccessReview")
        attrs = (review.get("spec") or {}).get("resourceAttributes")
        if not isinstance(attrs, dict) or not attrs.get("verb") or not attrs.get("resource"):
            raise ApiError(422, "Invalid", "SelfSubjectAccessReview is invalid: "
                           "spec.resourceAttributes: verb and resource are required", {})
        resource = attrs["resource"] + (f"/{attrs['subresource']}"
                                        if attrs.get("subresource") else "")
        denied = self._denied(attrs["verb"], resource, attrs.get("namespace", ""))
        # RBAC has no words for a refusal (no rule allowed it), so a denial has no reason.
        review["status"] = ({"allowed": False} if denied
                            else {"allowed": True, "reason": "allowed by the fake"})
        review.setdefault("metadata", {})["creationTimestamp"] = None
        return self._send_json(201, review)

    @staticmethod
    def _namespace(name):
        return {"kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    def _list_or_watch(self, ns):
        labels = parse_labels(self.q.get("labelSelector"))
        fields = parse_fields(self.q.get("fieldSelector"))
        if _truthy(self.q.get("watch")):
            self._authorize("watch", "pods", ns or "")
            return self._watch(ns, labels, fields)
        self._authorize("list", "pods", ns or "")
        items, rv = self.api.store.list(ns, labels, fields)
        if "as=Table" in self.headers.get("Accept", ""):
            return self._send_json(200, table.pod_table(items, rv, self.q.get("includeObject")))
        self._send_json(200, {"kind": "PodList", "apiVersion": "v1",
                              "metadata": {"resourceVersion": rv}, "items": items})

    def _watch(self, ns, labels, fields, resource="pods"):
        timeout = int(self.q.get("timeoutSeconds") or 1800)
        events = self.api.store.watch(ns, labels, fields, self.q.get("resourceVersion"),
                                      time.time() + timeout, resource)
        first = next(events, None)  # a bad resourceVersion is a 400 before any 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True

        def emit(event):
            data = json.dumps({"type": event[0], "object": event[1]}).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        try:
            if first:
                emit(first)
            for event in events:
                if event:
                    emit(event)
                elif select.select([self.connection], [], [], 0)[0]:
                    break  # the client closed (it sends nothing else on a watch)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def _create(self, ns):
        self._authorize("create", "pods", ns)
        self._send_json(201, self.api.create_pod(ns, self._body(),
                                                 self.q.get("dryRun") == "All"))

    def _patch(self, ns, name):
        """A merge patch (RFC 7386; a strategic merge patch is the same for what it may change)
        of the pod's labels and annotations, the only fields the fake lets change. A
        metadata.resourceVersion in the patch is a precondition: another one is 409 Conflict,
        which is how two replicas claim one pooled pod without both getting it."""
        self._authorize("patch", "pods", ns, name)
        kind = self.headers.get("Content-Type", "").split(";")[0].strip()
        if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media "
                           f"types include: application/merge-patch+json, "
                           f"application/strategic-merge-patch+json (the fake's; not {kind!r})")
        patch = self._body()
        if not isinstance(patch, dict):
            raise bad_request("the body of the request must be a JSON object")
        metadata = patch.get("metadata") or {}
        other = sorted([f"metadata.{k}" for k in metadata
                        if k not in ("labels", "annotations", "resourceVersion")] +
                       [k for k in patch if k != "metadata"])
        if other:
            raise invalid("Pod", name, [(other[0], "FieldValueForbidden",
                                         "Forbidden: the fake patches metadata.labels and "
                                         "metadata.annotations only")])
        for field in ("labels", "annotations"):
            value = metadata.get(field)
            if value is not None and (not isinstance(value, dict) or not all(
                    isinstance(v, str) or v is None for v in value.values())):
                raise bad_request(f"metadata.{field} must map names to strings (or null)")
        want = metadata.get("resourceVersion")
        self.api.store.get(ns, name)  # 404 first

        def apply(pod):
            if want is not None and pod["metadata"]["resourceVersion"] != want:
                raise conflict("pods", name)
            for field in ("labels", "annotations"):
                target = pod["metadata"].setdefault(field, {})
                for key, value in (metadata.get(field) or {}).items():
                    if value is None:
                        target.pop(key, None)
                    else:
                        target[key] = value
        patched = self.api.store.update(ns, name, apply)
        if patched is None:
            raise not_found("pods", name)
        self._send_json(200, patched)

    def _delete(self, ns, name):
        self._authorize("delete", "pods", ns, name)
        options = self._body()
        self._send_json(200, self.api.delete_pod(ns, name, options,
                                                 self.q.get("gracePeriodSeconds")))

    def _delete_collection(self, ns):
        self._authorize("deletecollection", "pods", ns)
        options = self._body()
        items, _ = self.api.store.list(ns, parse_labels(self.q.get("labelSelector")),
                                       parse_fields(self.q.get("fieldSelector")))
        for pod in items:
            self.api.finish_delete(ns, pod["metadata"]["name"], pod["metadata"]["uid"],
                                   self.api.grace(pod, options, self.q.get("gracePeriodSeconds")))
        _, rv = self.api.store.list(ns, [], [])
        self._send_json(200, {"kind": "PodList", "apiVersion": "v1",
                              "metadata": {"resourceVersion": rv}, "items": items})

    def _container(self, pod):
        containers = [c["name"] for c in pod["spec"]["containers"]]
        name = self.q.get("container")
        pod_name = pod["metadata"]["name"]
        if not name:
            if len(containers) != 1:
                raise bad_request(f"a container name must be specified for pod {pod_name}, "
                                  f"choose one of: [{' '.join(containers)}]")
            name = containers[0]
        if name not in containers:
            raise bad_request(f"container {name} is not valid for pod {pod_name}")
        return name

    def _log(self, ns, name):
        self._authorize("get", "pods/log", ns, name)
        pod = self.api.store.get(ns, name)
        container = self._container(pod)
        path = os.path.join(self.api.args.state_dir, "pods", pod["metadata"]["uid"],
                            f"{container}.log")
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except OSError:
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                              "ContainerCreating") from None
        self._send_text(200, text)

    def _exec(self, ns, name, verb):
        command = self.q_all.get("command") or []
        sandbox, want, protocol = self._upgrade(ns, name, verb, "pods/exec", command)

        def start():
            if not sandbox.resolve(command[0]):
                return (f'failed to exec in container: failed to start exec: OCI runtime exec '
                        f'failed: exec failed: unable to start container process: exec: '
                        f'"{command[0]}": executable file not found in $PATH: unknown')
            try:
                return sandbox.exec(command, want["stdin"], want["stdout"], want["stderr"])
            except ProcessLookupError:
                return f'container not found ("{sandbox.name}")'  # stopped since the check
        ExecStream(self.rfile, self.connection, protocol).run(
            start, want["stdin"], want["stdout"], want["stderr"])

    def _attach(self, ns, name, verb):
        sandbox, want, protocol = self._upgrade(ns, name, verb, "pods/attach")
        AttachStream(self.rfile, self.connection, protocol).attach(
            sandbox, want["stdin"], want["stdout"], want["stderr"])

    def _upgrade(self, ns, name, verb, resource, command=None):
        """The checks exec and attach share, then the WebSocket upgrade; returns the container's
        sandbox, the streams asked for and the subprotocol chosen. `command`: exec's."""
        self._authorize(verb, resource, ns, name)
        pod = self.api.store.get(ns, name)
        container = self._container(pod)
        if command is not None and not command:
            raise bad_request("you must specify at least 1 command")
        want = {k: _truthy(self.q.get(k)) for k in ("stdin", "stdout", "stderr", "tty")}
        if want["tty"]:
            raise bad_request("tty is not supported by the fake API server")
        if not (want["stdin"] or want["stdout"] or want["stderr"]):
            raise bad_request("you must specify at least 1 of stdin, stdout, stderr")
        if not pod["spec"].get("nodeName"):
            raise bad_request(f"pod {name} does not have a host assigned")
        phase = pod["status"].get("phase")
        if phase in ("Succeeded", "Failed"):
            what = "exec into" if command is not None else "attach to"
            raise bad_request(f"cannot {what} a container in a completed pod; current phase "
                              f"is {phase}")
        if self.headers.get("Upgrade", "").lower() != "websocket":
            raise bad_request(f'unable to upgrade connection: the fake API server speaks '
                              f'WebSocket ({", ".join(self.api.protocols)}), not '
                              f'"{self.headers.get("Upgrade", "")}"')
        offered = [p.strip() for h in self.headers.get_all("Sec-WebSocket-Protocol") or []
                   for p in h.split(",") if p.strip()]
        chosen = next((p for p in self.api.protocols if p in offered), None)
        if chosen is None:
            raise bad_request(f"unable to upgrade connection: requested protocol(s) are not "
                              f"supported: {offered}; supported protocols are "
                              f"{self.api.protocols}")
        worker = self.api.node.worker(pod["metadata"]["uid"])
        sandbox = worker and worker.containers.get(container)
        if not sandbox or not sandbox.running():
            raise bad_request(f'unable to upgrade connection: container not found ("{container}")')
        key = self.headers.get("Sec-WebSocket-Key", "")
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", websocket.accept_key(key))
        self.send_header("Sec-WebSocket-Protocol", chosen)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        return sandbox, want, chosen


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, handler, context):
        self.context = context
        super().__init__(address, handler)

    def handle_error(self, request, client_address):
        # A client that rejects our certificate or hangs up mid-request is not a server fault.
        if not isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError, EOFError)):
            super().handle_error(request, client_address)

    def get_request(self):
        sock, addr = self.socket.accept()
        # Headers and body go out in separate writes; without NODELAY, Nagle and the client's
        # delayed ACK add 40 ms to every response.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The TLS handshake happens on the connection's thread (the first read), so one slow
        # client does not stall accept().
        return self.context.wrap_socket(sock, server_side=True,
                                        do_handshake_on_connect=False), addr


def write_kubeconfig(path, url, ca_path, token):
    with open(ca_path, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
              "clusters": [{"name": "fake", "cluster": {
                  "server": url, "certificate-authority-data": ca}}],
              "users": [{"name": "fake", "user": {"token": token}}],
              "contexts": [{"name": "fake", "context": {
                  "cluster": "fake", "user": "fake", "namespace": "default"}}]}
    with open(path, "w") as f:
        json.dump(config, f, indent=1)  # JSON is YAML: kubectl reads it


def image_file(text):
    """--image-file's PATH=HOST_FILE. PATH is outside the host's directories that images are
    made of: those are bound read-only, so a mount point cannot be made in them."""
    inside, sep, host = text.partition("=")
    top = inside.split("/")[1] if inside.startswith("/") else ""
    if not sep or not top or top in IMAGE_DIRS or not os.path.isfile(host):
        raise argparse.ArgumentTypeError(
            f"{text!r}: want /PATH=EXISTING_HOST_FILE, PATH outside /{', /'.join(IMAGE_DIRS)}")
    return inside, os.path.abspath(host)


def image_link(text):
    """--image-link's PATH=TARGET: a symbolic link every image carries (outside IMAGE_DIRS)."""
    inside, sep, target = text.partition("=")
    top = inside.split("/")[1] if inside.startswith("/") else ""
    if not sep or not top or top in IMAGE_DIRS or not target:
        raise argparse.ArgumentTypeError(
            f"{text!r}: want /PATH=TARGET, PATH outside /{', /'.join(IMAGE_DIRS)}")
    return inside, target


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--state-dir", required=True, help="certificates, kubeconfig, pod volumes")
    p.add_argument("--token", help="the bearer token (default: random)")
    p.add_argument("--namespace", action="append",
                   help="a namespace that exists (repeatable; default and kube-system always)")
    p.add_argument("--restricted", action="append", metavar="NS",
                   help="enforce the restricted Pod Security Standard in NS (403 on violation)")
    p.add_argument("--deny", action="append", metavar="VERB:RESOURCE",
                   help='RBAC denial, "VERB:RESOURCE[:NAMESPACE]", e.g. "create:pods/exec" '
                        "(403 Forbidden)")
    p.add_argument("--watch-history", type=int, default=2000,
                   help="events kept for watches; an older resourceVersion gets 410 Gone")
    p.add_argument("--max-pods", type=int, metavar="N",
                   help="a ResourceQuota of N pods in every namespace (403 exceeded quota)")
    p.add_argument("--no-v5", action="store_true",
                   help="negotiate v4.channel.k8s.io only, as a pre-1.30 cluster does")
    p.add_argument("--pod-pids-limit", type=int, default=1024, metavar="N",
                   help="pids.max of every pod's cgroup, as the kubelet's podPidsLimit "
                        "(default 1024; -1: unlimited)")
    p.add_argument("--seccomp-root", metavar="DIR",
                   help="the kubelet's seccomp directory: a Localhost profile is DIR/<its "
                        "localhostProfile> (default: STATE_DIR/seccomp)")
    p.add_argument("--pod-network", choices=("isolated", "host"), default="isolated",
                   help="isolated (default): each pod has its own network namespace with only "
                        "lo, as under a deny-all NetworkPolicy; host: pods share the host's")
    p.add_argument("--image-file", action="append", type=image_file, metavar="PATH=HOST_FILE",
                   help="a file every image carries at PATH besides the host's /usr, /etc, /opt "
                        "and /var (repeatable), e.g. the agent of the executor image")
    p.add_argument("--image-link", action="append", type=image_link, metavar="PATH=TARGET",
                   help="a symbolic link every image carries at PATH (repeatable), e.g. the "
                        "executor image's /home/user -> /workspace")
    p.add_argument("--crd", action="append", metavar="FILE",
                   help="a CustomResourceDefinition file (YAML or JSON; repeatable) loaded at "
                        "start as if applied")
    p.add_argument("--agent-sandbox", action="store_true",
                   help="load the vendored agent-sandbox CRDs (agent-sandbox/crds) and run a "
                        "minimal agent-sandbox controller (fake/agent_sandbox.py)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    # A runtime starts containers and execs with every signal's default action: what this
    # process was started with ignored (a shell's `&` ignores SIGINT and SIGQUIT) is not theirs.
    # Python's own SIGPIPE and SIGXFSZ stay (Popen restores them in children).
    for sig in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE,
                                         signal.SIGXFSZ}:
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if os.geteuid() != 0:
        sys.exit("fake_apiserver: pods need root (bind mounts and nsenter into the sandbox)")
    args.state_dir = os.path.abspath(args.state_dir)
    os.makedirs(args.state_dir, exist_ok=True)
    args.seccomp_root = os.path.abspath(args.seccomp_root or
                                        os.path.join(args.state_dir, "seccomp"))
    os.makedirs(args.seccomp_root, exist_ok=True)
    ca, cert, key = make_certs(args.state_dir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["http/1.1"])  # no h2: a WebSocket upgrade needs HTTP/1.1

    api = FakeApiServer(args)
    crd_files = list(args.crd or [])
    if args.agent_sandbox:
        crd_files += sorted(os.path.join(AGENT_SANDBOX_CRDS, f)
                            for f in os.listdir(AGENT_SANDBOX_CRDS) if f.endswith(".yaml"))
    for path in crd_files:
        with open(path) as f:
            for doc in yaml_lite.load_all(f.read()):
                try:
                    api.objects.create(None, "", doc)
                except ApiError as e:
                    sys.exit(f"fake_apiserver: {path}: {e.body['message']}")
    if args.agent_sandbox:
        AgentSandboxController(api).start()
    handler = type("BoundHandler", (Handler,), {"api": api})
    server = Server((args.host, args.port), handler, context)
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"https://{host}:{server.server_address[1]}"
    kubeconfig = os.path.join(args.state_dir, "kubeconfig")
    write_kubeconfig(kubeconfig, url, ca, api.token)
    # "cgroups": where this server's pod cgroups live (one directory per pod uid), for tests
    # and for a sweep after a crash (launcher.sweep).
    info = {"url": url, "ca": ca, "token": api.token, "kubeconfig": kubeconfig,
            "cgroups": api.node.cgroup_parents, "seccomp_root": args.seccomp_root,
            "pod_network": args.pod_network}
    with open(os.path.join(args.state_dir, "server.json"), "w") as f:
        json.dump(info, f)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(json.dumps(info), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        api.store.close()
        api.node.shutdown()
        server.server_close()


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
