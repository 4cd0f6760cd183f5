"""Kubernetes Status errors the API server returns, with the real reasons and message wording."""

from __future__ import annotations

from typing import Any

from kubesim.store import StoreError


def qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def bad_request(message: str) -> StoreError:
    return StoreError(400, "BadRequest", message)


def unauthorized() -> StoreError:
    return StoreError(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, plural: str, group: str, namespace: str, name: str = "",
              subresource: str = "") -> StoreError:
    res = qualified(plural, group)
    who = f'{res} "{name}"' if name else res
    resource = f"{plural}/{subresource}" if subresource else plural
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    msg = f'{who} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {scope}'
    details: dict[str, Any] = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return StoreError(403, "Forbidden", msg, details)


def forbidden_path(user: str, verb: str, path: str) -> StoreError:
    return StoreError(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"')


def not_found_path() -> StoreError:
    return StoreError(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed(verb: str, what: str) -> StoreError:
    return StoreError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({verb} {what})")


def unsupported_media(content_type: str) -> StoreError:
    return StoreError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got "{content_type}")')


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> StoreError:
    """causes: (reason, field, message) such as ("FieldValueRequired", "spec.containers", "Required value")."""
    qualified_kind = f"{kind}.{group}" if group else kind
    text = ", ".join(f"{field}: {message}" for _, field, message in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    return StoreError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', {
        "name": name, "group": group, "kind": kind,
        "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes],
    })


def success(kind: str, name: str, group: str = "", uid: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
