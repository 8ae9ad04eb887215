"""metav1.Status error bodies, as the apiserver writes them (k8s.io/apimachinery/pkg/api/errors)."""


class ApiError(Exception):
    """Raised by handlers; the server answers with .code and the Status .body."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code = code
        self.body = failure(code, reason, message, details)


def failure(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _details(kind, name):
    """A resource "<plural>.<group>" (a custom resource's) is details kind <plural> and group
    <group>, as the apiserver's qualified resource; "pods" stays as it is."""
    plural, _, group = kind.partition(".")
    details = {"name": name, "group": group, "kind": plural} if group else \
        {"name": name, "kind": kind}
    return details


def not_found(kind, name):
    return ApiError(404, "NotFound", f'{kind} "{name}" not found', _details(kind, name))


def already_exists(kind, name):
    return ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists',
                    _details(kind, name))


def conflict(kind, name):
    """An update whose metadata.resourceVersion is not the object's (optimistic concurrency)."""
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind} "{name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again", _details(kind, name))


def invalid(kind, name, causes):
    """causes: [(field, reason, message)], e.g. ("spec.containers[0].image", "FieldValueRequired",
    "Required value")."""
    text = ", ".join(f"{field}: {message}" for field, _, message in causes)
    message = f'{kind} "{name}" is invalid: ' + (f"[{text}]" if len(causes) > 1 else text)
    return ApiError(422, "Invalid", message, {
        "name": name, "kind": kind,
        "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes]})


def forbidden(message, kind, name=None):
    details = {"kind": kind}
    if name:
        details["name"] = name
    return ApiError(403, "Forbidden", message, details)


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def unauthorized():
    return ApiError(401, "Unauthorized", "Unauthorized")
