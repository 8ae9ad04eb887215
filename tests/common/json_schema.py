"""A checker for the subset of JSON Schema (2020-12) that docs/openapi.json uses, for the tests
that hold requests and responses against the document (tests/docs/check_readme_requests.py,
tests/e2e/test_api.py). A keyword outside the subset is an error, never silently ignored, so the
document cannot grow a rule these tests would not check.
"""
import re

# Keywords that only describe: they constrain nothing.
ANNOTATIONS = {"description", "default", "format", "examples", "contentMediaType", "title"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    # A JSON integer is an integer to the daemon's parser; 1.0 is not (docs/api.md "Conventions").
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class Checker:
    """Validates values against schemas of one document, whose "#/..." $refs it follows."""

    def __init__(self, document):
        self.document = document

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError("unsupported $ref %r" % ref)
            node = self.document
            for part in ref[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def errors(self, value, schema, where="$"):
        """Every way `value` breaks `schema`, as "<json path>: <why>" lines (empty: it is valid)."""
        schema = self.resolve(schema)
        found = []
        for key in schema:
            if key not in ANNOTATIONS and key not in self.KEYWORDS:
                raise ValueError("%s: keyword %r is outside the checked subset" % (where, key))
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else types
            if not any(TYPES[t](value) for t in types):
                return ["%s: %r is not %s" % (where, value, " or ".join(types))]
        if "enum" in schema and value not in schema["enum"]:
            found.append("%s: %r is not one of %r" % (where, value, schema["enum"]))
        if "const" in schema and value != schema["const"]:
            found.append("%s: %r is not %r" % (where, value, schema["const"]))
        if TYPES["number"](value):
            if "minimum" in schema and value < schema["minimum"]:
                found.append("%s: %r is below %r" % (where, value, schema["minimum"]))
            if "maximum" in schema and value > schema["maximum"]:
                found.append("%s: %r is above %r" % (where, value, schema["maximum"]))
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            found.append("%s: %r does not match %r" % (where, value, schema["pattern"]))
        if isinstance(value, list) and "items" in schema:
            for i, item in enumerate(value):
                found += self.errors(item, schema["items"], "%s[%d]" % (where, i))
        if isinstance(value, dict):
            found += self._object_errors(value, schema, where)
        for part in schema.get("allOf", []):
            found += self.errors(value, part, where)
        return found

    def _object_errors(self, value, schema, where):
        found = ["%s: %r is required" % (where, name)
                 for name in schema.get("required", []) if name not in value]
        properties = schema.get("properties", {})
        for name, item in value.items():
            if name in properties:
                found += self.errors(item, properties[name], "%s.%s" % (where, name))
            elif schema.get("additionalProperties", True) is False:
                found.append("%s: %r is not a documented field" % (where, name))
        return found

    KEYWORDS = {"$ref", "type", "enum", "const", "minimum", "maximum", "pattern", "items",
                "properties", "required", "additionalProperties", "allOf"}
