"""NATS JWTs: decoding and checking operator, account and user claims (nats-io/jwt v2 claims.go, header.go,
account_claims.go, user_claims.go; nats-server jwt.go readOperatorJWT).

Theory of operation
-------------------
A NATS JWT is ``base64url(header).base64url(claims).base64url(signature)`` without padding.  The header is
``{"typ":"JWT","alg":"ed25519-nkey"}`` (v1 tokens say ``"ed25519"``); the signature is Ed25519 by the issuer's
nkey (``iss``) over the ASCII ``header.claims``.  Skiff decodes the JSON itself but leaves every signature check to
PyNaCl, with the public key read by ``nkey.decode_public_key`` (the ``nkeys`` package's CRC16): no hand-written
cryptography.

:func:`decode` returns :class:`Claims` only for a token whose signature verifies against its own ``iss`` and whose
issuer kind fits the claim type (an operator signs itself or is signed by an operator key; an account is signed by
an operator key; a user by an account key).  Whether that issuer is *trusted* is the caller's question
(operator.py): the trusted operators' keys for accounts, the account's key or signing keys for users.

Times (``exp``, ``nbf``, ``iat``) are Unix seconds.  jwt v2 ``Validate`` makes "claim is expired" (``exp`` in the
past) and "claim is not yet valid" (``nbf`` in the future) blocking errors; :meth:`Claims.time_error` says which.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass, field
from typing import Any

from .nkey import decode_public_key

JWT_PREFIX = "eyJ"  # nats-server jwtPrefix: what an inline JWT (rather than a file name) starts with
ALGORITHMS = ("ed25519-nkey", "ed25519")

# The kind of key that may issue each claim type (nats-io/jwt v2 *Claims.Validate / ExpectedPrefixes).
ISSUER_KINDS = {"operator": "O", "account": "O", "user": "A", "activation": "A", "generic": "OAU"}
SUBJECT_KINDS = {"operator": "O", "account": "A", "user": "U"}


class JWTError(ValueError):
    """A token that is not a well-formed, correctly signed NATS JWT of the expected type."""


@dataclass
class Claims:
    token: str
    header: dict
    payload: dict
    nats: dict = field(default_factory=dict)

    @property
    def type(self) -> str:
        # jwt v1 tokens (alg "ed25519") carry the type beside the standard claims, v2 ones under "nats";
        # nats-server still reads v1 (jwt v2 loadClaims), and clients' test fixtures use them.
        return str(self.nats.get("type") or self.payload.get("type") or "")

    @property
    def v1(self) -> bool:
        """A jwt v1 token (alg "ed25519"): a v1 user's absent limits are no limit once migrated."""
        return self.header.get("alg") == "ed25519"

    @property
    def subject(self) -> str:
        return str(self.payload.get("sub") or "")

    @property
    def issuer(self) -> str:
        return str(self.payload.get("iss") or "")

    @property
    def name(self) -> str:
        return str(self.payload.get("name") or "")

    @property
    def jti(self) -> str:
        return str(self.payload.get("jti") or "")

    @property
    def issued_at(self) -> int:
        return _int(self.payload.get("iat"))

    @property
    def expires(self) -> int:
        return _int(self.payload.get("exp"))

    @property
    def not_before(self) -> int:
        return _int(self.payload.get("nbf"))

    def time_error(self, now: float) -> str:
        """jwt v2 ClaimsData.Validate: the blocking time check that fails, or ""."""
        if self.expires > 0 and int(now) > self.expires:
            return "claim is expired"
        if self.not_before > 0 and self.not_before > int(now):
            return "claim is not yet valid"
        return ""

    def signing_keys(self) -> dict[str, dict | None]:
        """Operator or account signing keys: key -> scope (``{"kind": "user_scope", ...}``) or None when the key
        is not scoped (jwt v2 SigningKeys accepts both a plain string and a scope object)."""
        out: dict[str, dict | None] = {}
        for sk in self.nats.get("signing_keys") or []:
            if isinstance(sk, str):
                out[sk] = None
            elif isinstance(sk, dict) and isinstance(sk.get("key"), str):
                out[sk["key"]] = sk if sk.get("kind") == "user_scope" else None
        return out


def _b64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise JWTError("illegal base64 data") from None


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


# The Go types of the claims (nats-io/jwt v2): json.Unmarshal fails on a field of the wrong type, and nats-server
# then refuses the JWT ("Authorization Violation" for a user).  Skiff checks the same types, so a JWT nats-server
# cannot decode is never half-read here.  null is Go's zero value and passes; unknown fields are ignored as in Go.
STR, INT, BOOL, STRS, CIDRS, ANY = "string", "int64", "bool", "[]string", "CIDRList", "any"
_PERMISSION = {"allow": STRS, "deny": STRS}
_PERMISSIONS = {"pub": _PERMISSION, "sub": _PERMISSION, "resp": {"max": INT, "ttl": INT}}
_NATS_LIMITS = {"subs": INT, "data": INT, "payload": INT}
_JS_LIMITS = {"mem_storage": INT, "disk_storage": INT, "streams": INT, "consumer": INT, "max_ack_pending": INT,
              "mem_max_stream_bytes": INT, "disk_max_stream_bytes": INT, "max_bytes_required": BOOL}
_GENERIC = {"tags": STRS, "type": STR, "version": INT}
SCHEMAS: dict[str, dict] = {
    "claims": {"aud": STR, "exp": INT, "jti": STR, "iat": INT, "iss": STR, "name": STR, "nbf": INT, "sub": STR},
    "user": {**_GENERIC, **_PERMISSIONS, **_NATS_LIMITS, "src": CIDRS, "times": ("list", {"start": STR, "end": STR}),
             "times_location": STR, "bearer_token": BOOL, "proxy_required": BOOL, "allowed_connection_types": STRS,
             "issuer_account": STR},
    "account": {**_GENERIC, "imports": ("list", ANY), "exports": ("list", ANY),
                "limits": {**_NATS_LIMITS, **_JS_LIMITS, "imports": INT, "exports": INT, "wildcards": BOOL,
                           "disallow_bearer": BOOL, "conn": INT, "leaf": INT, "tiered_limits": ("map", _JS_LIMITS)},
                "signing_keys": ("list", ANY), "revocations": ("map", INT), "default_permissions": _PERMISSIONS,
                "mappings": ("map", ANY), "description": STR, "info_url": STR, "cluster_traffic": STR},
    "operator": {**_GENERIC, "signing_keys": STRS, "account_server_url": STR, "operator_service_urls": STRS,
                 "system_account": STR, "assert_server_version": STR, "strict_signing_key_usage": BOOL},
}


def _typed(v: Any, t: Any) -> bool:
    if v is None or t == ANY:
        return True
    if t == STR:
        return isinstance(v, str)
    if t == INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if t == BOOL:
        return isinstance(v, bool)
    if t == CIDRS and isinstance(v, str):  # jwt v2 CIDRList also takes one comma-separated string
        return True
    if t in (STRS, CIDRS):  # jwt v2 StringList / TagList
        return isinstance(v, list) and all(x is None or isinstance(x, str) for x in v)
    if isinstance(t, tuple):
        kind, item = t
        if kind == "list":
            return isinstance(v, list) and all(_typed(x, item) for x in v)
        return isinstance(v, dict) and all(_typed(x, item) for x in v.values())
    return isinstance(v, dict) and all(_typed(v[k], kt) for k, kt in t.items() if k in v)


def decode(token: str, expected: str | None = None) -> Claims:
    """Decode ``token`` and check its signature against its issuer (jwt v2 Decode).  ``expected`` is the claim
    type it must have ("operator", "account", "user")."""
    if not isinstance(token, str):
        raise JWTError("expected a string token")
    token = token.strip()
    parts = token.split(".")
    if len(parts) != 3:
        raise JWTError("expected 3 chunks")
    try:
        header = json.loads(_b64(parts[0]))
        payload = json.loads(_b64(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise JWTError("can't parse JWT") from None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise JWTError("can't parse JWT")
    if str(header.get("typ", "")).upper() != "JWT":
        raise JWTError(f"not supported type {header.get('typ')!r}")
    if header.get("alg") not in ALGORITHMS:
        raise JWTError(f"unexpected {header.get('alg')!r} algorithm")
    nats = payload.get("nats")
    if not isinstance(nats, dict):
        if nats is not None:
            raise JWTError("json: cannot unmarshal nats claims")
        nats = {}
    claims = Claims(token, header, payload, nats)
    kind = claims.type
    if expected is not None and kind != expected:
        raise JWTError(f"not {expected} claim")
    if not _typed(payload, SCHEMAS["claims"]) or (kind in SCHEMAS and not _typed(nats, SCHEMAS[kind])):
        raise JWTError(f"json: cannot unmarshal {kind or 'generic'} claims")
    iss = claims.issuer
    allowed = ISSUER_KINDS.get(kind, "OAU")
    if not iss or iss[0] not in allowed or decode_public_key(iss, iss[0]) is None:
        raise JWTError("claim failed issuer check")
    sub_kind = SUBJECT_KINDS.get(kind)
    if sub_kind is not None and (not claims.subject or decode_public_key(claims.subject, sub_kind) is None):
        raise JWTError(f"subject is not a valid {kind} public key")
    if header.get("alg") == "ed25519":  # jwt v1 signed the payload chunk alone
        if not verify(iss, parts[1].encode(), _b64(parts[2])):
            raise JWTError("claim failed V1 signature verification")
    elif not verify(iss, (parts[0] + "." + parts[1]).encode(), _b64(parts[2])):
        raise JWTError("claim failed V2 signature verification")
    return claims


def verify(public_key: str, data: bytes, sig: bytes) -> bool:
    """Ed25519 check by PyNaCl."""
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    raw = decode_public_key(public_key, public_key[:1])
    if raw is None:
        return False
    try:
        VerifyKey(raw).verify(data, sig)
        return True
    except (BadSignatureError, ValueError):
        return False


def parse_decorated(text: str) -> str:
    """jwt v2 ParseDecoratedJWT: the first ``-----BEGIN ...-----`` block of a creds/jwt file, else the text."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("---") and "BEGIN" in s and s.endswith("---"):
            for nxt in lines[i + 1:]:
                if nxt.strip():
                    return nxt.strip()
    return text.strip()


def read_operator_jwt(value: str) -> tuple[str, Claims]:
    """nats-server readOperatorJWT: ``value`` is a file name, or the JWT inline when it starts with ``eyJ``."""
    try:
        with open(value, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        if not value.startswith(JWT_PREFIX):
            # Go's syscall error texts are lower case ("no such file or directory").
            raise JWTError(f"open {value}: {(os.strerror(e.errno) if e.errno else str(e)).lower()}") from None
        text = value
    token = parse_decorated(text)
    return token, decode(token, "operator")
