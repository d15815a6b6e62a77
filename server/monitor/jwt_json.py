"""Account JWT claims as nats-server shows them in /accountz ``decoded_jwt`` (monitor.go accountInfo).

nats-server does not echo the JWT's JSON: it decodes it into jwt v2's ``AccountClaims`` and Go's encoding/json
writes that struct back.  So what a reader sees is the struct, not the token: fields in struct order (embedded
structs flattened in place), a field Go does not know is gone, an ``omitempty`` number, string, bool, list or map
with its zero value is left out, a struct is always there (``"authorization": {}``, ``"default_permissions":
{"pub": {}, "sub": {}}``), maps come out with sorted keys, and the types with their own MarshalJSON (signing
keys, sampling rates) write their own form.  The tables below are those structs (nats-io/jwt v2
account_claims.go, claims.go, imports.go, exports.go, types.go, signingkeys.go, user_claims.go); :func:`go_json`
walks a decoded claim through them.

jwt.py has already refused a token whose fields have the wrong JSON types, so every value here fits its field.
"""
from __future__ import annotations

from typing import Any

# Field kinds.  A struct is a tuple of (json name, kind, omitempty); an embedded struct is spliced in as its fields.
STR, INT, BOOL = "str", "int", "bool"


def _list(item: Any) -> tuple:
    return ("list", item)


def _map(item: Any) -> tuple:
    return ("map", item)


def _ptr(struct: tuple) -> tuple:
    return ("ptr", struct)


_CLAIMS_DATA = (("aud", STR, True), ("exp", INT, True), ("jti", STR, True), ("iat", INT, True), ("iss", STR, True),
                ("name", STR, True), ("nbf", INT, True), ("sub", STR, True))
_INFO = (("description", STR, True), ("info_url", STR, True))
_GENERIC = (("tags", _list(STR), True), ("type", STR, True), ("version", INT, True))
_NATS_LIMITS = (("subs", INT, True), ("data", INT, True), ("payload", INT, True))
_ACCOUNT_LIMITS = (("imports", INT, True), ("exports", INT, True), ("wildcards", BOOL, True),
                   ("disallow_bearer", BOOL, True), ("conn", INT, True), ("leaf", INT, True))
_JS_LIMITS = (("mem_storage", INT, True), ("disk_storage", INT, True), ("streams", INT, True),
              ("consumer", INT, True), ("max_ack_pending", INT, True), ("mem_max_stream_bytes", INT, True),
              ("disk_max_stream_bytes", INT, True), ("max_bytes_required", BOOL, True))
_OPERATOR_LIMITS = (*_NATS_LIMITS, *_ACCOUNT_LIMITS, *_JS_LIMITS, ("tiered_limits", _map(_JS_LIMITS), True))
_PERMISSION = (("allow", _list(STR), True), ("deny", _list(STR), True))
_PERMISSIONS = (("pub", _PERMISSION, True), ("sub", _PERMISSION, True),
                ("resp", _ptr((("max", INT, False), ("ttl", INT, False))), True))
_USER_PERMISSION_LIMITS = (*_PERMISSIONS, ("src", _list(STR), True),
                           ("times", _list((("start", STR, True), ("end", STR, True))), True),
                           ("times_location", STR, True), *_NATS_LIMITS, ("bearer_token", BOOL, True),
                           ("proxy_required", BOOL, True), ("allowed_connection_types", _list(STR), True))
_USER_SCOPE = (("kind", STR, False), ("key", STR, False), ("role", STR, False),
               ("template", _USER_PERMISSION_LIMITS, False), ("description", STR, False))
_IMPORT = (("name", STR, True), ("subject", STR, True), ("account", STR, True), ("token", STR, True),
           ("to", STR, True), ("local_subject", STR, True), ("type", STR, True), ("share", BOOL, True),
           ("allow_trace", BOOL, True))
_EXPORT = (("name", STR, True), ("subject", STR, True), ("type", STR, True), ("token_req", BOOL, True),
           ("revocations", _map(INT), True), ("response_type", STR, True), ("response_threshold", INT, True),
           ("service_latency", "latency", True), ("account_token_position", INT, True),
           ("advertise", BOOL, True), ("allow_trace", BOOL, True), *_INFO)
_ACCOUNT = (("imports", _list(_ptr(_IMPORT)), True), ("exports", _list(_ptr(_EXPORT)), True),
            ("limits", _OPERATOR_LIMITS, True), ("signing_keys", "signing_keys", True),
            ("revocations", _map(INT), True), ("default_permissions", _PERMISSIONS, True),
            ("mappings", _map(_list((("subject", STR, False), ("weight", INT, True), ("cluster", STR, True)))),
             True),
            ("authorization", (("auth_users", _list(STR), True), ("allowed_accounts", _list(STR), True),
                               ("xkey", STR, True)), True),
            ("trace", "trace", True), ("cluster_traffic", STR, True), *_INFO, *_GENERIC)
ACCOUNT_CLAIMS = (*_CLAIMS_DATA, ("nats", _ACCOUNT, True))

_ZERO = {STR: "", INT: 0, BOOL: False}


def go_json(payload: dict) -> dict:
    """An account JWT's payload as nats-server's /accountz writes its decoded ``AccountClaims``."""
    return _struct(ACCOUNT_CLAIMS, payload)


def _struct(fields: tuple, v: Any) -> dict:
    v = v if isinstance(v, dict) else {}
    out: dict = {}
    for name, kind, omitempty in fields:
        present, value = _value(kind, v.get(name))
        if present or not omitempty:
            out[name] = value
    return out


def _value(kind: Any, v: Any) -> tuple[bool, Any]:
    """(whether omitempty keeps it, the value Go writes) for one field."""
    if kind in _ZERO:
        value = _ZERO[kind] if v is None else v
        return value != _ZERO[kind], value
    if kind == "signing_keys":
        return _signing_keys(v)
    if kind == "latency":  # *ServiceLatency; SamplingRate writes 0 as "headers" (exports.go MarshalJSON)
        if not isinstance(v, dict):
            return False, None
        sampling = v.get("sampling") or 0
        return True, {"sampling": "headers" if sampling in (0, "headers") else sampling,
                      "results": v.get("results") or ""}
    if kind == "trace":  # *MsgTrace; Account.Validate (run before nats-server encodes it) makes 0 sampling 100
        if not isinstance(v, dict):
            return False, None
        out = {"dest": v.get("dest") or "", "sampling": v.get("sampling") or 100}
        return True, {k: x for k, x in out.items() if x}
    if isinstance(kind, tuple) and kind[0] == "list":
        if v is None:
            return False, None
        return len(v) > 0, [_value(kind[1], x)[1] for x in v]
    if isinstance(kind, tuple) and kind[0] == "map":
        if v is None:
            return False, None
        return len(v) > 0, {k: _value(kind[1], v[k])[1] for k in sorted(v)}
    if isinstance(kind, tuple) and kind[0] == "ptr":
        if v is None:
            return False, None
        return True, _struct(kind[1], v)
    return True, _struct(kind, v)  # a struct: omitempty never leaves one out


def _signing_keys(v: Any) -> tuple[bool, Any]:
    """SigningKeys.MarshalJSON: sorted by key, a plain key as its string, a scoped one as its UserScope (whose
    template starts from NewUserScope's unlimited subs, data and payload)."""
    if not v:
        return False, None
    keys: dict[str, Any] = {}
    for sk in v:
        if isinstance(sk, str):
            keys[sk] = None
        elif isinstance(sk, dict) and isinstance(sk.get("key"), str):
            keys[sk["key"]] = sk
    out: list = []
    for k in sorted(keys):
        scope = keys[k]
        if scope is None:
            out.append(k)
            continue
        template = {"subs": -1, "data": -1, "payload": -1, **(scope.get("template") or {})}
        out.append(_struct(_USER_SCOPE, {**scope, "template": template}))
    return len(keys) > 0, out
