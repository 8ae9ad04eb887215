"""Structural OpenAPI v3 schemas of CustomResourceDefinitions, as the apiserver applies them to
custom resources (k8s.io/apiextensions-apiserver/pkg/apiserver/schema): pruning of unknown
fields, defaulting, and validation of type, required, enum, minimum/maximum, lengths, pattern and
maxItems, with the field paths and wording of its 422 causes. Not done: CEL rules
(x-kubernetes-validations), format checks, list-type uniqueness, oneOf/allOf/not."""

import copy
import json
import re

_TYPES = {"string": str, "boolean": bool, "object": dict, "array": list}


def _is_type(value, kind):
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    t = _TYPES.get(kind)
    return t is None or isinstance(value, t)


def _field(path):
    return path or "<root>"


def prune(obj, schema, path="", root=True, dropped=None):
    """Drop fields the schema does not declare (in place); their paths go to `dropped`."""
    dropped = [] if dropped is None else dropped
    if not isinstance(schema, dict):
        return dropped
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-int-or-string"):
            return dropped
        keep = set()
        if root or schema.get("x-kubernetes-embedded-resource"):
            keep = {"apiVersion", "kind", "metadata"}
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if schema.get("x-kubernetes-preserve-unknown-fields") and not props:
            return dropped
        for key in list(obj):
            sub = f"{path}.{key}" if path else key
            if key in keep:
                continue  # ObjectMeta is the apiserver's, not the schema's
            if props and key in props:
                prune(obj[key], props[key], sub, False, dropped)
            elif isinstance(extra, dict):
                prune(obj[key], extra, sub, False, dropped)
            elif extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            else:
                dropped.append(sub)
                del obj[key]
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            prune(item, schema["items"], f"{path}[{i}]", False, dropped)
    return dropped


def apply_defaults(obj, schema):
    """Fill `default`s of absent properties (in place), top-down, into defaulted values too."""
    if not isinstance(schema, dict):
        return
    if isinstance(obj, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_defaults(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in obj.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


def _show(value):
    return json.dumps(value) if isinstance(value, str) else \
        ("null" if value is None else json.dumps(value))


def validate(obj, schema, path="", causes=None):
    """[(field, reason, message)] as the apiserver's validation reports them."""
    causes = [] if causes is None else causes
    if not isinstance(schema, dict):
        return causes
    name = _field(path)
    if obj is None:
        if not schema.get("nullable") and schema.get("type"):
            causes.append((name, "FieldValueTypeInvalid",
                           f'Invalid value: "null": {name} in body must be of type '
                           f'{schema["type"]}: "null"'))
        return causes
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(obj, str) or _is_type(obj, "integer")):
            causes.append((name, "FieldValueTypeInvalid",
                           f'Invalid value: {_show(obj)}: {name} in body must be of type '
                           "integer,string"))
        return causes
    kind = schema.get("type")
    if kind and not _is_type(obj, kind):
        got = {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
            type(obj), "number" if isinstance(obj, float) else "integer")
        causes.append((name, "FieldValueTypeInvalid",
                       f'Invalid value: "{got}": {name} in body must be of type {kind}: '
                       f'"{got}"'))
        return causes
    if "enum" in schema and obj not in schema["enum"]:
        causes.append((name, "FieldValueNotSupported",
                       f"Unsupported value: {_show(obj)}: supported values: " +
                       ", ".join(_show(v) for v in schema["enum"])))
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if "minimum" in schema and obj < schema["minimum"]:
            causes.append((name, "FieldValueInvalid",
                           f"Invalid value: {obj}: {name} in body should be greater than or "
                           f"equal to {schema['minimum']}"))
        if "maximum" in schema and obj > schema["maximum"]:
            causes.append((name, "FieldValueInvalid",
                           f"Invalid value: {obj}: {name} in body should be less than or "
                           f"equal to {schema['maximum']}"))
    if isinstance(obj, str):
        if "maxLength" in schema and len(obj) > schema["maxLength"]:
            causes.append((name, "FieldValueTooLong",
                           f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(obj) < schema["minLength"]:
            causes.append((name, "FieldValueInvalid",
                           f'Invalid value: "{obj}": {name} in body should be at least '
                           f"{schema['minLength']} chars long"))
        if "pattern" in schema:
            try:
                ok = re.search(schema["pattern"], obj)
            except re.error:
                ok = True
            if not ok:
                causes.append((name, "FieldValueInvalid",
                               f'Invalid value: "{obj}": {name} in body should match '
                               f"'{schema['pattern']}'"))
    if isinstance(obj, dict):
        for req in schema.get("required") or []:
            if req not in obj:
                sub = f"{path}.{req}" if path else req
                causes.append((sub, "FieldValueRequired", "Required value"))
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            sub = f"{path}.{key}" if path else key
            if key in props:
                validate(value, props[key], sub, causes)
            elif isinstance(extra, dict):
                validate(value, extra, sub, causes)
    if isinstance(obj, list):
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            causes.append((name, "FieldValueTooMany",
                           f"Too many: {len(obj)}: must have at most {schema['maxItems']} "
                           "items"))
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(obj):
                validate(item, schema["items"], f"{path}[{i}]", causes)
    return causes
