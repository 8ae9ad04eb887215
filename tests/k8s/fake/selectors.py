"""Label and field selectors (the string forms of k8s.io/apimachinery/pkg/labels and fields)."""

import re

from .status import bad_request


def _split_top_level(text):
    """Split on commas that are not inside a set's parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


_SET = re.compile(r"^([^\s!=()]+)\s+(in|notin)\s+\((.*)\)$")
_EQ = re.compile(r"^([^\s!=]+)\s*(==|=|!=)\s*([^\s!=]*)$")
_KEY = re.compile(r"^(!?)([^\s!=()]+)$")


def parse_labels(text):
    """A list of predicates over a labels dict; raises a 400 Status on a malformed selector."""
    preds = []
    for req in _split_top_level(text or ""):
        if m := _SET.match(req):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if op == "in":
                preds.append(lambda l, k=key, vs=values: l.get(k) in vs)
            else:
                preds.append(lambda l, k=key, vs=values: l.get(k) not in vs)
        elif m := _EQ.match(req):
            key, op, value = m.groups()
            if op == "!=":
                preds.append(lambda l, k=key, v=value: l.get(k) != v)
            else:
                preds.append(lambda l, k=key, v=value: l.get(k) == v)
        elif m := _KEY.match(req):
            neg, key = m.groups()
            preds.append((lambda l, k=key: k not in l) if neg else (lambda l, k=key: k in l))
        else:
            raise bad_request(f'unable to parse requirement: found \'{req}\', expected: '
                              "a valid label selector")
    return preds


# The fields the pod registry lets you select on (pkg/registry/core/pod/strategy.go
# ToSelectableFields), as paths into the object.
POD_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.restartPolicy": ("spec", "restartPolicy"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.phase": ("status", "phase"),
    "status.podIP": ("status", "podIP"),
}
# What every other resource (custom resources included) selects on.
META_FIELDS = {k: POD_FIELDS[k] for k in ("metadata.name", "metadata.namespace")}


def parse_fields(text, fields=None):
    """Predicates over an object (a pod unless `fields` says otherwise); only =, == and !=
    exist for fields."""
    fields = POD_FIELDS if fields is None else fields
    preds = []
    for req in _split_top_level(text or ""):
        m = _EQ.match(req)
        if not m:
            raise bad_request(f'invalid selector: \'{req}\'; can\'t understand \'{req}\'')
        key, op, value = m.groups()
        if key not in fields:
            raise bad_request(f'field label not supported: {key}')
        path = fields[key]

        def get(obj, path=path):
            for p in path:
                obj = obj.get(p) or {}
            return obj if isinstance(obj, str) else ""
        if op == "!=":
            preds.append(lambda o, g=get, v=value: g(o) != v)
        else:
            preds.append(lambda o, g=get, v=value: g(o) == v)
    return preds


def matches(pod, label_preds, field_preds):
    labels = pod.get("metadata", {}).get("labels") or {}
    return all(p(labels) for p in label_preds) and all(p(pod) for p in field_preds)
