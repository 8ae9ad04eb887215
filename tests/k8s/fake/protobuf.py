"""The little of Kubernetes' protobuf encoding the fake reads: kubectl 1.32 sends built-in types
as application/vnd.kubernetes.protobuf (k8s.io/apimachinery runtime/serializer/protobuf): the
magic "k8s\\0", then a runtime.Unknown whose `raw` is the object's own message. Only what a
SelfSubjectAccessReview carries is decoded; the fake always answers in JSON (clients accept it)."""

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# runtime.Unknown: typeMeta 1 (apiVersion 1, kind 2), raw 2.
# authorization/v1 SelfSubjectAccessReview: spec 2; its spec: resourceAttributes 1.
RESOURCE_ATTRIBUTES = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource",
                       6: "subresource", 7: "name"}


def _varint(data, i):
    value, shift = 0, 0
    while True:
        if i >= len(data):
            raise ValueError("a varint runs past the end")
        b = data[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def fields(data):
    """{field number: [values]} of one message: bytes for length-delimited fields, ints for
    varints; other wire types are skipped."""
    out, i = {}, 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            length, i = _varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire in (1, 5):
            value, i = None, i + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"wire type {wire} is not one the fake reads")
        out.setdefault(number, []).append(value)
    return out


def _one(msg, number, default=b""):
    return msg.get(number, [default])[-1]


def access_review(body):
    """A protobuf SelfSubjectAccessReview as the JSON object a client would have sent."""
    if not body.startswith(MAGIC):
        raise ValueError("no k8s protobuf magic")
    unknown = fields(body[len(MAGIC):])
    type_meta = fields(_one(unknown, 1))
    review = fields(_one(unknown, 2))
    attrs = fields(_one(fields(_one(review, 2)), 1))
    return {"apiVersion": _one(type_meta, 1).decode(), "kind": _one(type_meta, 2).decode(),
            "spec": {"resourceAttributes": {name: _one(attrs, n).decode()
                                            for n, name in RESOURCE_ATTRIBUTES.items()
                                            if n in attrs}}}
