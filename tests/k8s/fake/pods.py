"""Pod admission: validation (422 Invalid), the restricted Pod Security Standard (403 Forbidden)
and the defaults the apiserver fills in. Pure functions over the JSON."""

import random
import re
import uuid

from .status import forbidden, invalid
from .store import now_rfc3339

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# generateName suffixes use consonants and digits without vowels (apiserver names.go), so a random
# name never spells a word.
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def assign_name(pod):
    md = pod.setdefault("metadata", {})
    if not md.get("name") and md.get("generateName"):
        md["name"] = md["generateName"] + "".join(random.choice(_SUFFIX_CHARS) for _ in range(5))
    return md.get("name", "")


def validate(pod, namespace):
    """Raise 422 Invalid with field causes for what the fake checks (a subset of the real
    ValidatePodCreate: names, containers, images, volume references, metadata namespace)."""
    causes = []
    md = pod.get("metadata") or {}
    name = md.get("name", "")
    if pod.get("kind") not in (None, "Pod"):
        causes.append(("kind", "FieldValueInvalid", f'Invalid value: "{pod.get("kind")}"'))
    if not name:
        causes.append(("metadata.name", "FieldValueRequired",
                       "Required value: name or generateName is required"))
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                       "lower case alphanumeric characters, '-' or '.', and must start and end "
                       "with an alphanumeric character"))
    if md.get("namespace") not in (None, "", namespace):
        causes.append(("metadata.namespace", "FieldValueInvalid",
                       "Invalid value: the namespace of the object does not match the "
                       "namespace on the request"))
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for i, v in enumerate(spec.get("volumes") or []):
        if not v.get("name"):
            causes.append((f"spec.volumes[{i}].name", "FieldValueRequired", "Required value"))
        if len([k for k in v if k != "name"]) != 1:
            causes.append((f"spec.volumes[{i}]", "FieldValueRequired",
                           "Required value: must specify a volume type"))
    if not containers:
        causes.append(("spec.containers", "FieldValueRequired", "Required value"))
    seen = set()
    for i, c in enumerate(containers):
        where = f"spec.containers[{i}]"
        cname = c.get("name", "")
        if not cname:
            causes.append((f"{where}.name", "FieldValueRequired", "Required value"))
        elif not _DNS1123_LABEL.match(cname) or len(cname) > 63:
            causes.append((f"{where}.name", "FieldValueInvalid",
                           f'Invalid value: "{cname}": a lowercase RFC 1123 label'))
        elif cname in seen:
            causes.append((f"{where}.name", "FieldValueDuplicate",
                           f'Duplicate value: "{cname}"'))
        seen.add(cname)
        if not c.get("image"):
            causes.append((f"{where}.image", "FieldValueRequired", "Required value"))
        for j, m in enumerate(c.get("volumeMounts") or []):
            if m.get("name") not in volumes:
                causes.append((f"{where}.volumeMounts[{j}].name", "FieldValueNotFound",
                               f'Not found: "{m.get("name")}"'))
            if not str(m.get("mountPath", "")).startswith("/"):
                causes.append((f"{where}.volumeMounts[{j}].mountPath", "FieldValueRequired",
                               "Required value: must be an absolute path"))
    causes += _seccomp_causes("spec.securityContext", spec.get("securityContext"))
    for i, c in enumerate(containers):
        causes += _seccomp_causes(f"spec.containers[{i}].securityContext",
                                  c.get("securityContext"))
    if spec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never"):
        causes.append(("spec.restartPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{spec.get("restartPolicy")}"'))
    if causes:
        raise invalid("Pod", name, causes)


def _seccomp_causes(where, sc):
    """ValidateSeccompProfileField: a known type, and a relative localhostProfile without ".."
    exactly when the type is Localhost."""
    profile = (sc or {}).get("seccompProfile")
    if not profile:
        return []
    where += ".seccompProfile"
    kind, name = profile.get("type"), profile.get("localhostProfile")
    if kind not in ("Localhost", "RuntimeDefault", "Unconfined"):
        return [(f"{where}.type", "FieldValueNotSupported",
                 f'Unsupported value: "{kind}": supported values: "Localhost", '
                 '"RuntimeDefault", "Unconfined"')]
    if kind != "Localhost":
        return [] if name is None else [(f"{where}.localhostProfile", "FieldValueInvalid",
                                         "Invalid value: can only be set when seccomp type is "
                                         "Localhost")]
    if not name:
        return [(f"{where}.localhostProfile", "FieldValueRequired",
                 "Required value: must be set when seccomp type is Localhost")]
    if name.startswith("/") or ".." in name.split("/"):
        return [(f"{where}.localhostProfile", "FieldValueInvalid",
                 f'Invalid value: "{name}": must be a relative path without ".."')]
    return []


def effective(container, pod_sc, field):
    """A securityContext field as the kubelet resolves it: the container's, else the pod's."""
    sc = container.get("securityContext") or {}
    return sc[field] if field in sc else pod_sc.get(field)


def restricted_violations(pod):
    """The checks of the restricted Pod Security Standard (pod-security-admission policy/
    check_*.go), in its message wording."""
    spec = pod.get("spec") or {}
    pod_sc = spec.get("securityContext") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    out = []
    for ns_field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(ns_field):
            out.append(f"host namespaces ({ns_field}=true)")
    bad = [c["name"] for c in containers
           if (c.get("securityContext") or {}).get("allowPrivilegeEscalation") is not False]
    if bad:
        out.append("allowPrivilegeEscalation != false (" + _containers(bad) +
                   " must set securityContext.allowPrivilegeEscalation=false)")
    bad = [c["name"] for c in containers
           if "ALL" not in (((c.get("securityContext") or {}).get("capabilities") or {})
                            .get("drop") or [])]
    if bad:
        out.append("unrestricted capabilities (" + _containers(bad) +
                   ' must set securityContext.capabilities.drop=["ALL"])')
    bad = [c["name"] for c in containers
           if set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
           - {"NET_BIND_SERVICE"}]
    if bad:
        out.append("unrestricted capabilities (" + _containers(bad) +
                   " must not include capabilities beyond NET_BIND_SERVICE)")
    bad = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    if bad:
        out.append("restricted volume types (volumes " + ", ".join(f'"{b}"' for b in bad) +
                   ' use restricted volume type "hostPath")')
    bad = [c["name"] for c in containers if effective(c, pod_sc, "runAsNonRoot") is not True]
    if bad:
        out.append("runAsNonRoot != true (pod or " + _containers(bad) +
                   " must set securityContext.runAsNonRoot=true)")
    bad = [c["name"] for c in containers if effective(c, pod_sc, "runAsUser") == 0]
    if bad:
        out.append("runAsUser=0 (" + _containers(bad) + " must not set runAsUser=0)")
    bad = [c["name"] for c in containers
           if (effective(c, pod_sc, "seccompProfile") or {}).get("type")
           not in ("RuntimeDefault", "Localhost")]
    if bad:
        out.append("seccompProfile (pod or " + _containers(bad) +
                   ' must set securityContext.seccompProfile.type to "RuntimeDefault" or '
                   '"Localhost")')
    if any((c.get("securityContext") or {}).get("privileged") for c in containers):
        out.append("privileged (containers must not set securityContext.privileged=true)")
    return out


def _containers(names):
    quoted = ", ".join(f'"{n}"' for n in names)
    return ("container " if len(names) == 1 else "containers ") + quoted


def admit_restricted(pod):
    violations = restricted_violations(pod)
    if violations:
        name = pod["metadata"]["name"]
        raise forbidden(f'pods "{name}" is forbidden: violates PodSecurity "restricted:latest": '
                        + ", ".join(violations), "pods", name)


def _pull_policy(image):
    tag = image.rsplit("/", 1)[-1]
    return "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent"


def _qos(containers):
    res = [c.get("resources") or {} for c in containers]
    if not any(r.get("limits") or r.get("requests") for r in res):
        return "BestEffort"
    for r in res:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        for k in ("cpu", "memory"):
            if k not in limits or requests.get(k, limits[k]) != limits[k]:
                return "Burstable"
    return "Guaranteed"


def apply_defaults(pod, namespace):
    """The fields the apiserver sets on create, so clients that read them back see them."""
    md = pod["metadata"]
    md["namespace"] = namespace
    md["uid"] = str(uuid.uuid4())
    md["creationTimestamp"] = now_rfc3339()
    md.pop("resourceVersion", None)
    pod["kind"], pod["apiVersion"] = "Pod", "v1"
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for c in spec["containers"]:
        c.setdefault("imagePullPolicy", _pull_policy(c["image"]))
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
        res = c["resources"]
        if res.get("limits") and not res.get("requests"):
            res["requests"] = dict(res["limits"])  # requests default to limits
    pod["status"] = {"phase": "Pending", "qosClass": _qos(spec["containers"])}
