"""CustomResourceDefinitions (apiextensions.k8s.io/v1) and the custom resources they define, as
the apiextensions-apiserver serves them: discovery, OpenAPI v3 (enough for kubectl), create with
generateName, get, list, update with resourceVersion preconditions, merge patch, delete with
propagation policies, the status and scale subresources, structural pruning, defaulting and
validation (schema.py), Table output from additionalPrinterColumns.

Objects live in the shared Store under the resource "<plural>.<group>" (CRDs under
"customresourcedefinitions.apiextensions.k8s.io", namespace ""). A CRD whose conversion strategy
is Webhook is served in its storage version only: the fake converts nothing."""

import calendar
import copy
import re
import time
import uuid

from . import schema
from .pods import assign_name
from .status import ApiError, already_exists, bad_request, conflict, invalid, not_found
from .store import now_rfc3339

CRD_GROUP = "apiextensions.k8s.io"
CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MERGE = "application/merge-patch+json"
# What a real apiserver accepts for a PATCH of a custom resource (no strategic merge patch: a
# custom resource has no Go struct tags to steer it).
CR_PATCH_TYPES = ["application/json-patch+json", MERGE, "application/apply-patch+yaml"]
_IMMUTABLE_META = ("uid", "creationTimestamp", "namespace", "name", "generation",
                   "deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion")


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class Info:
    """One served group/version/resource of a CRD."""

    def __init__(self, crd, version):
        spec = crd["spec"]
        names = spec["names"]
        self.crd_name = crd["metadata"]["name"]
        self.crd_uid = crd["metadata"]["uid"]
        self.group, self.version = spec["group"], version["name"]
        self.kind, self.list_kind = names["kind"], names.get("listKind", names["kind"] + "List")
        self.plural, self.singular = names["plural"], names.get("singular",
                                                                 names["kind"].lower())
        self.short_names = names.get("shortNames") or []
        self.categories = names.get("categories") or []
        self.namespaced = spec.get("scope", "Namespaced") == "Namespaced"
        self.schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
        self.subresources = version.get("subresources") or {}
        self.columns = version.get("additionalPrinterColumns") or []
        self.resource = f"{self.plural}.{self.group}"
        self.api_version = f"{self.group}/{self.version}"
        self.deprecation = version.get("deprecationWarning") if version.get("deprecated") \
            else None

    @property
    def has_status(self):
        return "status" in self.subresources

    @property
    def scale(self):
        return self.subresources.get("scale")

    def discovery(self):
        verbs = ["delete", "deletecollection", "get", "list", "patch", "create", "update",
                 "watch"]
        out = [{"name": self.plural, "singularName": self.singular,
                "namespaced": self.namespaced, "kind": self.kind, "verbs": verbs,
                "storageVersionHash": "fake"}]
        if self.short_names:
            out[0]["shortNames"] = self.short_names
        if self.categories:
            out[0]["categories"] = self.categories
        if self.has_status:
            out.append({"name": f"{self.plural}/status", "singularName": "",
                        "namespaced": self.namespaced, "kind": self.kind,
                        "verbs": ["get", "patch", "update"]})
        if self.scale:
            out.append({"name": f"{self.plural}/scale", "singularName": "",
                        "namespaced": self.namespaced, "group": "autoscaling",
                        "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
        return out


def crd_causes(crd):
    """The checks of ValidateCustomResourceDefinition the fake makes."""
    causes = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "FieldValueRequired", "Required value")]
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    if not group or "." not in group:
        causes.append(("spec.group", "FieldValueInvalid",
                       f'Invalid value: "{group}": should be a domain with at least one dot'))
    for key in ("plural", "kind"):
        if not names.get(key):
            causes.append((f"spec.names.{key}", "FieldValueRequired", "Required value"))
    name = (crd.get("metadata") or {}).get("name", "")
    if names.get("plural") and group and name != f"{names['plural']}.{group}":
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(("spec.scope", "FieldValueNotSupported",
                       f'Unsupported value: "{spec.get("scope")}": supported values: '
                       '"Cluster", "Namespaced"'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(("spec.versions", "FieldValueInvalid",
                       "Invalid value: null: must have exactly one version marked as storage "
                       "version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(("spec.versions", "FieldValueInvalid",
                       "Invalid value: must have exactly one version marked as storage version"))
    return causes


class Registry:
    """The CRDs in the store, compiled (cached by their resourceVersions)."""

    def __init__(self, store):
        self.store = store
        self.cache_key = None
        self.served = {}  # (group, version, plural) -> Info
        self.by_resource = {}  # "<plural>.<group>" -> storage Info

    def refresh(self):
        crds = self.store.peek(CRD_RESOURCE)
        key = tuple((c["metadata"]["name"], c["metadata"]["resourceVersion"]) for c in crds)
        if key == self.cache_key:
            return
        served, by_resource = {}, {}
        for crd in crds:
            if crd["metadata"].get("deletionTimestamp"):
                continue
            conversion = (crd["spec"].get("conversion") or {}).get("strategy", "None")
            for v in crd["spec"]["versions"]:
                if not v.get("served", True):
                    continue
                if conversion != "None" and not v.get("storage"):
                    continue  # needs the conversion webhook, which the fake does not call
                info = Info(crd, v)
                served[(info.group, info.version, info.plural)] = info
                if v.get("storage"):
                    by_resource[info.resource] = info
        self.served, self.by_resource, self.cache_key = served, by_resource, key

    def lookup(self, group, version, plural):
        self.refresh()
        return self.served.get((group, version, plural))

    def storage(self, resource):
        self.refresh()
        return self.by_resource.get(resource)

    def groups(self):
        """[(group, [versions])] in a stable order, storage version first."""
        self.refresh()
        out = {}
        for (group, version, _), info in self.served.items():
            versions = out.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return sorted(out.items())

    def resources(self, group, version):
        self.refresh()
        return [r for (g, v, _), info in sorted(self.served.items())
                if g == group and v == version for r in info.discovery()]

    def openapi_paths(self):
        """OpenAPI v3 documents, "apis/<group>/<version>" -> doc, with a PATCH per kind that
        takes fieldValidation (kubectl then validates on the server) and the content types
        a custom resource's PATCH accepts (no strategic merge: kubectl sends a merge patch)."""
        self.refresh()
        docs = {}
        for (group, version, plural), info in self.served.items():
            doc = docs.setdefault(f"apis/{group}/{version}", {
                "openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger (fake)",
                                             "version": "v0.1.0"}, "paths": {}})
            path = (f"/apis/{group}/{version}/namespaces/{{namespace}}/{plural}/{{name}}"
                    if info.namespaced else f"/apis/{group}/{version}/{plural}/{{name}}")
            doc["paths"][path] = {"patch": {
                "x-kubernetes-group-version-kind": {"group": group, "version": version,
                                                    "kind": info.kind},
                "parameters": [{"name": "fieldValidation", "in": "query",
                                "schema": {"type": "string"}}],
                "requestBody": {"content": {t: {"schema": {"type": "object"}}
                                            for t in CR_PATCH_TYPES}},
                "responses": {"200": {"description": "OK"}}}}
        return docs


# -- printing ---------------------------------------------------------------------------------

def _age(stamp):
    try:
        seconds = int(time.time() - calendar.timegm(time.strptime(stamp,
                                                                  "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return "<unknown>"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


_FILTER = re.compile(r"^\[\?\(@\.([\w.-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def jsonpath(obj, path):
    """The JSONPath subset of printer columns: .a.b, [n], [*] and [?(@.k=='v')]. Returns the
    values found."""
    values, rest = [obj], path.strip()
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    while rest:
        if rest.startswith("."):
            m = re.match(r"^\.([\w-]+)", rest)
            if not m:
                return []
            values = [v[m.group(1)] for v in values if isinstance(v, dict) and m.group(1) in v]
            rest = rest[m.end():]
        elif m := _FILTER.match(rest):
            key, want = m.groups()
            out = []
            for v in values:
                for item in v if isinstance(v, list) else []:
                    got = item
                    for k in key.split("."):
                        got = got.get(k) if isinstance(got, dict) else None
                    if got is not None and str(got) == want:
                        out.append(item)
            values, rest = out, rest[m.end():]
        elif m := re.match(r"^\[(\*|-?\d+)\]", rest):
            out = []
            for v in values:
                if isinstance(v, list):
                    if m.group(1) == "*":
                        out.extend(v)
                    elif -len(v) <= int(m.group(1)) < len(v):
                        out.append(v[int(m.group(1))])
            values, rest = out, rest[m.end():]
        else:
            return []
    return values


def _cell(obj, column):
    values = jsonpath(obj, column.get("jsonPath", ""))
    if not values:
        return None
    if column.get("type") == "date":
        return _age(values[0])
    if len(values) == 1:
        v = values[0]
        return v if not isinstance(v, (dict, list)) else str(v)
    return ",".join(str(v) for v in values)


def table(items, resource_version, include_object, columns):
    """The Table of the apiextensions-apiserver's table convertor: Name, then the printer
    columns (type date as an age); the default is Name and Created At."""
    defs = [{"name": "Name", "type": "string", "format": "name",
             "description": "Name must be unique within a namespace.", "priority": 0}]
    if columns is None:
        columns = [{"name": "Created At", "type": "date", "jsonPath":
                    ".metadata.creationTimestamp"}]
        raw_dates = True
    else:
        raw_dates = False
    for c in columns:
        defs.append({"name": c["name"], "type": "string" if c.get("type") == "date"
                     else c.get("type", "string"), "format": c.get("format", ""),
                     "description": c.get("description", ""), "priority": c.get("priority", 0)})
    rows = []
    for obj in items:
        cells = [obj["metadata"]["name"]]
        for c in columns:
            if raw_dates and c.get("type") == "date":
                cells.append(obj["metadata"].get("creationTimestamp"))
            else:
                cells.append(_cell(obj, c))
        row = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": defs, "rows": rows}


# -- objects ----------------------------------------------------------------------------------

class Objects:
    """Create/update/patch/delete of CRDs and custom resources against the store. Every method
    raises ApiError as the apiserver would answer; `namespaces` are the ones that exist."""

    def __init__(self, store, namespaces):
        self.store = store
        self.namespaces = namespaces
        self.registry = Registry(store)

    # ---- shared helpers

    @staticmethod
    def _title(info):
        return f"{info.kind}.{info.group}" if info else "CustomResourceDefinition.apiextensions.k8s.io"

    def _check_name(self, obj, info, causes):
        name = obj["metadata"].get("name", "")
        if not name:
            causes.append(("metadata.name", "FieldValueRequired",
                           "Required value: name or generateName is required"))
        elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
                           "of lower case alphanumeric characters, '-' or '.', and must start and "
                           "end with an alphanumeric character"))

    def _structural(self, obj, info, strict):
        """Prune, default, validate: as the custom resource handler's decoder and strategy."""
        dropped = schema.prune(obj, info.schema)
        if dropped and strict:
            raise bad_request("strict decoding error: " + ", ".join(
                f'unknown field "{d}"' for d in dropped))
        schema.apply_defaults(obj, info.schema)
        causes = schema.validate({k: v for k, v in obj.items() if k != "metadata"},
                                 {**info.schema, "properties": {
                                     k: v for k, v in (info.schema.get("properties") or {}).items()
                                     if k != "metadata"}})
        return causes

    # ---- create

    def create(self, info, ns, obj, strict=False, dry_run=False):
        """info None: a CRD. Returns the stored object."""
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be an object")
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        want_kind = info.kind if info else "CustomResourceDefinition"
        want_version = info.api_version if info else f"{CRD_GROUP}/v1"
        if obj.get("kind") not in (None, want_kind) or \
                obj.get("apiVersion") not in (None, want_version):
            raise bad_request(f"the API version in the data ({obj.get('apiVersion')}) does not "
                              f"match the expected API version ({want_version})")
        obj["kind"], obj["apiVersion"] = want_kind, want_version
        name = assign_name(obj)
        causes = []
        self._check_name(obj, info, causes)
        if info and info.namespaced:
            if md.get("namespace") not in (None, "", ns):
                causes.append(("metadata.namespace", "FieldValueInvalid",
                               "Invalid value: the namespace of the object does not match the "
                               "namespace on the request"))
        if info:
            if info.has_status:
                obj.pop("status", None)
            causes += self._structural(obj, info, strict)
        else:
            causes += crd_causes(obj)
        if causes:
            raise invalid(self._title(info), name, causes)
        if info and info.namespaced and ns not in self.namespaces:
            raise not_found("namespaces", ns)
        for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "managedFields", "selfLink"):
            md.pop(key, None)
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        md["generation"] = 1
        if info and info.namespaced:
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if info is None:
            self._crd_status(obj)
        if dry_run:
            return obj
        created = self.store.add(obj, info.resource if info else CRD_RESOURCE)
        if created is None:
            raise already_exists(info.resource if info else CRD_RESOURCE, name)
        return created

    @staticmethod
    def _crd_status(crd):
        spec = crd["spec"]
        stamp = now_rfc3339()
        crd["status"] = {
            "acceptedNames": copy.deepcopy(spec["names"]),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": stamp},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted",
                 "lastTransitionTime": stamp}],
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")]}
        names = crd["status"]["acceptedNames"]
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")

    # ---- update and patch

    def _next(self, info, old, new, sub, strict):
        """The object an update of `old` to `new` stores (subresource sub: None, "status"),
        or raises. Returns (object, changed)."""
        name = old["metadata"]["name"]
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise bad_request("the body of the request must be an object")
        if sub == "status":
            out = copy.deepcopy(old)
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            # A status write may carry no metadata change but the resourceVersion check.
        else:
            out = copy.deepcopy(new)
            md = out.setdefault("metadata", {})
            for key in _IMMUTABLE_META:
                if key in old["metadata"]:
                    md[key] = old["metadata"][key]
                else:
                    md.pop(key, None)
            md.pop("managedFields", None)
            want_kind = info.kind if info else "CustomResourceDefinition"
            out["kind"] = want_kind
            out["apiVersion"] = info.api_version if info else f"{CRD_GROUP}/v1"
            if info is None or info.has_status:
                if "status" in old:
                    out["status"] = copy.deepcopy(old["status"])
                else:
                    out.pop("status", None)
        causes = []
        if info:
            causes = self._structural(out, info, strict and sub is None)
        else:
            causes = crd_causes(out)
            if out["spec"].get("group") != old["spec"].get("group"):
                causes.append(("spec.group", "FieldValueInvalid",
                               "Invalid value: field is immutable"))
        if causes:
            raise invalid(self._title(info), name, causes)
        body = {k: v for k, v in out.items() if k not in ("metadata", "status")}
        old_body = {k: v for k, v in old.items() if k not in ("metadata", "status")}
        if body != old_body:
            out["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if info is None and body != old_body:
            self._crd_status(out)
        return out, out != old

    def _write(self, info, ns, name, compute):
        """Apply compute(current) -> (new, changed) atomically; the stored object."""
        resource = info.resource if info else CRD_RESOURCE
        key_ns = ns if info and info.namespaced else ""
        result = {}

        def mutate(current):
            new, changed = compute(current)
            if not changed:
                result["same"] = copy.deepcopy(current)
                return False
            md = new["metadata"]
            if md.get("deletionTimestamp") and not md.get("finalizers"):
                result["remove"] = True
            current.clear()
            current.update(new)
        updated = self.store.update(key_ns, name, mutate, resource)
        if "same" in result:
            return result["same"]
        if updated is None:
            raise not_found(resource, name)
        if result.get("remove"):
            self.store.remove(key_ns, name, updated["metadata"]["uid"], resource)
        return updated

    def update(self, info, ns, name, body, sub=None, strict=False):
        resource = info.resource if info else CRD_RESOURCE
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be an object")
        md = body.get("metadata") or {}
        if md.get("name") not in (None, name):
            raise bad_request(f'the name of the object ({md.get("name")}) does not match the '
                              f"name on the URL ({name})")
        want = md.get("resourceVersion")
        if not want:
            raise invalid(self._title(info), name, [
                ("metadata.resourceVersion", "FieldValueInvalid",
                 "Invalid value: 0x0: must be specified for an update")])

        def compute(current):
            if current["metadata"]["resourceVersion"] != want:
                raise conflict(resource, name)
            return self._next(info, current, body, sub, strict)
        self.store.get(ns if info and info.namespaced else "", name, resource)  # 404 first
        return self._write(info, ns, name, compute)

    def patch(self, info, ns, name, content_type, patch, sub=None, strict=False):
        resource = info.resource if info else CRD_RESOURCE
        if content_type != MERGE:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media "
                           f"types include: {', '.join(CR_PATCH_TYPES)}"
                           if info else
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, "
                           "application/merge-patch+json, application/apply-patch+yaml, "
                           "application/strategic-merge-patch+json")
        if not isinstance(patch, dict):
            raise bad_request("the body of the request must be a JSON object")
        want = (patch.get("metadata") or {}).get("resourceVersion")

        def compute(current):
            if want is not None and current["metadata"]["resourceVersion"] != want:
                raise conflict(resource, name)
            return self._next(info, current, merge_patch(current, patch), sub, strict)
        self.store.get(ns if info and info.namespaced else "", name, resource)
        return self._write(info, ns, name, compute)

    # ---- scale

    @staticmethod
    def _path_get(obj, path):
        values = jsonpath(obj, path)
        return values[0] if values else None

    @staticmethod
    def _path_set(obj, path, value):
        keys = path.strip(".").split(".")
        for k in keys[:-1]:
            obj = obj.setdefault(k, {})
        obj[keys[-1]] = value

    def scale_of(self, info, obj):
        s = info.scale
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: obj["metadata"][k] for k in
                             ("name", "namespace", "uid", "resourceVersion",
                              "creationTimestamp") if k in obj["metadata"]},
                "spec": {"replicas": self._path_get(obj, s["specReplicasPath"]) or 0},
                "status": {"replicas": self._path_get(obj, s["statusReplicasPath"]) or 0,
                           **({"selector": self._path_get(obj, s["labelSelectorPath"]) or ""}
                              if s.get("labelSelectorPath") else {})}}

    def update_scale(self, info, ns, name, body, content_type=None):
        """PUT (content_type None) or merge PATCH of the Scale: only spec.replicas lands."""
        s = info.scale
        current = self.store.get(ns, name, info.resource)
        if content_type is not None:
            if content_type != MERGE:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted "
                               "media types include: " + ", ".join(CR_PATCH_TYPES))
            body = merge_patch(self.scale_of(info, current), body)
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a Scale object")
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise invalid("Scale.autoscaling", name, [
                ("spec.replicas", "FieldValueInvalid",
                 f"Invalid value: {replicas}: must be greater than or equal to 0")])
        want = (body.get("metadata") or {}).get("resourceVersion")

        def compute(cur):
            if want and cur["metadata"]["resourceVersion"] != want:
                raise conflict(info.resource, name)
            new = copy.deepcopy(cur)
            self._path_set(new, s["specReplicasPath"], replicas)
            return self._next(info, cur, new, None, False)
        return self.scale_of(info, self._write(info, ns, name, compute))
