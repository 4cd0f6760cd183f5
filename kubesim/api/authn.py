"""Authentication by bearer token: the farm's admin token, and service-account tokens (legacy
token Secrets the token controller fills in, and TokenRequest tokens), HMAC-signed JWTs checked
against the Secret and ServiceAccount they name, so a deleted account's token stops working."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

from kubesim.store import Obj, Store, StoreError

SA_TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"
ADMIN_USER = "kubernetes-admin"
# A self-signed placeholder: clients that read ca.crt from a token Secret find a PEM there.
_CA_PEM = "-----BEGIN CERTIFICATE-----\nTUlJQnNpbS1jbHVzdGVyLWNh\n-----END CERTIFICATE-----\n"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return "system:masters" in self.groups


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def service_account_user(namespace: str, name: str) -> UserInfo:
    return UserInfo(f"system:serviceaccount:{namespace}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


class Authenticator:
    def __init__(self, store: Store, admin_token: str) -> None:
        self.store = store
        self.admin_token = admin_token
        self._key = secrets.token_bytes(32)

    # -- issuing ---------------------------------------------------------------------------
    def sign(self, claims: dict[str, Any]) -> str:
        header = _b64url(json.dumps({"alg": "HS256", "kid": "sim"}, separators=(",", ":")).encode())
        payload = _b64url(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        sig = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64url(sig)}"

    def legacy_token(self, namespace: str, sa_name: str, sa_uid: str, secret_name: str) -> str:
        return self.sign({
            "iss": "kubernetes/serviceaccount", "sub": f"system:serviceaccount:{namespace}:{sa_name}",
            "kubernetes.io/serviceaccount/namespace": namespace,
            "kubernetes.io/serviceaccount/secret.name": secret_name,
            "kubernetes.io/serviceaccount/service-account.name": sa_name,
            "kubernetes.io/serviceaccount/service-account.uid": sa_uid,
        })

    def bound_token(self, namespace: str, sa: Obj, expiration_seconds: int) -> tuple[str, float]:
        exp = self.store.clock.now() + expiration_seconds
        token = self.sign({
            "iss": "https://kubernetes.default.svc.cluster.local", "sub": f"system:serviceaccount:{namespace}:{sa['metadata']['name']}",
            "aud": ["https://kubernetes.default.svc.cluster.local"], "exp": int(exp),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": sa["metadata"]["name"],
                                                                         "uid": sa["metadata"]["uid"]}},
        })
        return token, exp

    def fill_token_secret(self, verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        """Admission hook: the token controller's job, done as the Secret is written."""
        if key != "secrets" or verb not in ("create", "update") or obj.get("type") != SA_TOKEN_TYPE:
            return
        meta = obj.get("metadata", {})
        sa_name = (meta.get("annotations") or {}).get(SA_NAME_ANNOTATION)
        if not sa_name or (obj.get("data") or {}).get("token"):
            return
        namespace = meta.get("namespace", "default")
        sa = self.store.try_get("serviceaccounts", namespace, sa_name)
        if sa is None:
            return
        meta.setdefault("annotations", {})[SA_UID_ANNOTATION] = sa["metadata"]["uid"]
        token = self.legacy_token(namespace, sa_name, sa["metadata"]["uid"], meta["name"])
        data = obj.setdefault("data", {})
        data["token"] = base64.b64encode(token.encode()).decode()
        data["namespace"] = base64.b64encode(namespace.encode()).decode()
        data["ca.crt"] = base64.b64encode(_CA_PEM.encode()).decode()

    def drop_tokens_of_deleted_accounts(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        """Store hook: the token controller deletes the token Secrets of a deleted ServiceAccount."""
        if verb != "delete" or key != "serviceaccounts" or old is None:
            return
        ns, name = old["metadata"].get("namespace", ""), old["metadata"]["name"]
        doomed = [s["metadata"]["name"] for s in self.store.iter_raw("secrets")
                  if s["metadata"].get("namespace") == ns and s.get("type") == SA_TOKEN_TYPE
                  and (s["metadata"].get("annotations") or {}).get(SA_NAME_ANNOTATION) == name]
        for secret in doomed:
            try:
                self.store.delete("secrets", ns, secret)
            except StoreError:
                pass

    # -- checking --------------------------------------------------------------------------
    def authenticate(self, authorization: str | None) -> UserInfo | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        token = authorization[7:].strip()
        if hmac.compare_digest(token, self.admin_token):
            return UserInfo(ADMIN_USER, ("system:masters", "system:authenticated"))
        claims = self._verify(token)
        if claims is None:
            return None
        if "kubernetes.io" in claims:
            bound = claims["kubernetes.io"]
            ns, sa_name, uid = bound["namespace"], bound["serviceaccount"]["name"], bound["serviceaccount"]["uid"]
            if claims.get("exp", 0) < self.store.clock.now():
                return None
        else:
            ns = claims.get("kubernetes.io/serviceaccount/namespace", "")
            sa_name = claims.get("kubernetes.io/serviceaccount/service-account.name", "")
            uid = claims.get("kubernetes.io/serviceaccount/service-account.uid", "")
            secret = self.store.try_get("secrets", ns, claims.get("kubernetes.io/serviceaccount/secret.name", ""))
            stored = ((secret or {}).get("data") or {}).get("token", "")
            if not stored or base64.b64decode(stored).decode() != token:
                return None
        sa = self.store.try_get("serviceaccounts", ns, sa_name)
        if sa is None or sa["metadata"]["uid"] != uid:
            return None
        return service_account_user(ns, sa_name)

    def _verify(self, token: str) -> dict[str, Any] | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64url(parts[2])):
                return None
            claims = json.loads(_unb64url(parts[1]))
        except (ValueError, json.JSONDecodeError):
            return None
        return claims if isinstance(claims, dict) else None
