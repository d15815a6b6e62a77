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
ISSUER_KINDS = {"operator": "O", "account": "O", "user": "A", "activation": "AO", "generic": "OAU"}
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
        """A jwt v1 token: its type beside the standard claims, not under "nats" (jwt v2 identifier.Version; nsc 1.x
        also wrote alg "ed25519", which is not what decides).  Its signature covers the claims alone, a v1 user's
        absent limits are no limit once migrated, and a v1 account is migrated (:func:`_migrate_v1_account`)."""
        return bool(self.payload.get("type"))

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
UINT, EXPORT_TYPE = "uint", "ExportType"  # ExportType unmarshals "stream" / "service" only (jwt v2 types.go)
_PERMISSION = {"allow": STRS, "deny": STRS}
_PERMISSIONS = {"pub": _PERMISSION, "sub": _PERMISSION, "resp": {"max": INT, "ttl": INT}}
_NATS_LIMITS = {"subs": INT, "data": INT, "payload": INT}
_JS_LIMITS = {"mem_storage": INT, "disk_storage": INT, "streams": INT, "consumer": INT, "max_ack_pending": INT,
              "mem_max_stream_bytes": INT, "disk_max_stream_bytes": INT, "max_bytes_required": BOOL}
_GENERIC = {"tags": STRS, "type": STR, "version": INT}
# jwt v2 imports.go Import / exports.go Export: the fields an account JWT's imports and exports decode into.
_IMPORT = {"name": STR, "subject": STR, "account": STR, "token": STR, "to": STR, "local_subject": STR,
           "type": EXPORT_TYPE, "share": BOOL, "allow_trace": BOOL}
_EXPORT = {"name": STR, "subject": STR, "type": EXPORT_TYPE, "token_req": BOOL, "revocations": ("map", INT),
           "response_type": STR, "response_threshold": INT, "service_latency": ANY, "account_token_position": UINT,
           "advertise": BOOL, "allow_trace": BOOL, "description": STR, "info_url": STR}
SCHEMAS: dict[str, dict] = {
    "claims": {"aud": STR, "exp": INT, "jti": STR, "iat": INT, "iss": STR, "name": STR, "nbf": INT, "sub": STR},
    "user": {**_GENERIC, **_PERMISSIONS, **_NATS_LIMITS, "src": CIDRS, "times": ("list", {"start": STR, "end": STR}),
             "times_location": STR, "bearer_token": BOOL, "proxy_required": BOOL, "allowed_connection_types": STRS,
             "issuer_account": STR},
    "account": {**_GENERIC, "imports": ("list", _IMPORT), "exports": ("list", _EXPORT),
                "limits": {**_NATS_LIMITS, **_JS_LIMITS, "imports": INT, "exports": INT, "wildcards": BOOL,
                           "disallow_bearer": BOOL, "conn": INT, "leaf": INT, "tiered_limits": ("map", _JS_LIMITS)},
                "signing_keys": ("list", ANY), "revocations": ("map", INT), "default_permissions": _PERMISSIONS,
                "mappings": ("map", ANY), "description": STR, "info_url": STR, "cluster_traffic": STR},
    "activation": {**_GENERIC, "subject": STR, "kind": EXPORT_TYPE, "issuer_account": STR},
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
    if t == UINT:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0
    if t == EXPORT_TYPE:
        return v in ("stream", "service")
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
    if kind == "account" and claims.v1:
        if not _typed(payload.get("tags"), STRS) or not _typed(nats.get("signing_keys"), STRS):
            raise JWTError("json: cannot unmarshal account claims")
        claims.nats = nats = _migrate_v1_account(payload, nats)
    if not _typed(payload, SCHEMAS["claims"]) or (kind in SCHEMAS and not _typed(nats, SCHEMAS[kind])):
        raise JWTError(f"json: cannot unmarshal {kind or 'generic'} claims")
    iss = claims.issuer
    allowed = ISSUER_KINDS.get(kind, "OAU")
    if not iss or iss[0] not in allowed or decode_public_key(iss, iss[0]) is None:
        raise JWTError("claim failed issuer check")
    sub_kind = SUBJECT_KINDS.get(kind)
    if sub_kind is not None and (not claims.subject or decode_public_key(claims.subject, sub_kind) is None):
        raise JWTError(f"subject is not a valid {kind} public key")
    if claims.v1:  # jwt v1 signed the payload chunk alone
        if not verify(iss, parts[1].encode(), _b64(parts[2])):
            raise JWTError("claim failed V1 signature verification")
    elif not verify(iss, (parts[0] + "." + parts[1]).encode(), _b64(parts[2])):
        raise JWTError("claim failed V2 signature verification")
    return claims


# What a jwt v1 account keeps (jwt v2 decoder_account.go v1NatsAccount): its limits are NatsLimits + AccountLimits.
_V1_ACCOUNT_LIMITS = ("subs", "data", "payload", "imports", "exports", "wildcards", "disallow_bearer", "conn", "leaf")


def _migrate_v1_account(payload: dict, nats: dict) -> dict:
    """jwt v2 v1AccountClaims.migrateV1: the account as a v2 "nats" section.  The type and tags move in from beside
    the standard claims, imports, exports, signing keys and revocations are kept, the limits lose everything but
    the NATS and account limits (so no JetStream), anything else under "nats" is dropped (default_permissions,
    mappings...), and the version is 1."""
    limits = nats.get("limits")
    out: dict = {"imports": nats.get("imports"), "exports": nats.get("exports"),
                 "limits": {k: limits[k] for k in _V1_ACCOUNT_LIMITS if k in limits} if isinstance(limits, dict)
                 else limits,
                 "signing_keys": nats.get("signing_keys"), "revocations": nats.get("revocations"),
                 "tags": payload.get("tags"), "type": payload.get("type"), "version": 1}
    return {k: v for k, v in out.items() if v is not None}


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


# ---------------------------------------------------------------------------- imports and exports (jwt v2)
def _q(s: Any) -> str:
    """Go's %q of a string (what the validation messages quote subjects with)."""
    return json.dumps(str(s), ensure_ascii=False)


def has_wildcards(s: str) -> bool:
    """jwt v2 Subject.HasWildCards."""
    return s.endswith(".>") or ".*." in s or s.endswith(".*") or s.startswith("*.") or s in ("*", ">")


def is_contained_in(s: str, other: str) -> bool:
    """jwt v2 Subject.IsContainedIn: every subject ``s`` matches is matched by ``other``."""
    o, m = other.split("."), s.split(".")
    if len(m) > len(o) and o[-1] != ">":
        return False
    if len(m) < len(o):
        return False
    for i, tok in enumerate(o):
        if i == len(o) - 1 and tok == ">":
            return True
        if tok != m[i] and tok != "*":
            return False
    return True


def to_subject(renaming: str) -> str:
    """jwt v2 RenamingSubject.ToSubject: ``$N`` references read as ``*``."""
    return ".".join("*" if len(t) > 1 and t[0] == "$" and t[1:].isdigit() else t for t in renaming.split("."))


def _subject_errors(v: str, errs: list[str]) -> None:
    """jwt v2 Subject.Validate."""
    if v == "":
        errs.append("subject cannot be empty")
        return
    if " " in v:
        errs.append(f"subject {_q(v)} cannot have spaces")
    if v[0] == "." or v[-1] == ".":
        errs.append(f"subject {_q(v)} cannot start or end with a `.`")
    if ".." in v:
        errs.append(f"subject {_q(v)} cannot contain consecutive `.`")


def _trace_errors(trace: Any, errs: list[str]) -> None:
    """jwt v2 AccountClaims.Validate on ``trace`` (message tracing): present, even as ``{}``, it needs a valid
    publish subject and a sampling in 0..100 (an account whose JWT fails this is not loaded by nats-server)."""
    if not isinstance(trace, dict):
        return
    dest = str(trace.get("dest") or "")
    tvr: list[str] = []
    _subject_errors(dest, tvr)
    if tvr:
        errs.append(f"the account Trace.Destination {tvr[0]}")
    if has_wildcards(dest):
        errs.append(f"the account Trace.Destination subject {_q(dest)} is not a valid publish subject")
    sampling = trace.get("sampling") or 0
    if isinstance(sampling, int) and not 0 <= sampling <= 100:
        errs.append(f"the account Trace.Sampling value '{sampling}' is not valid, should be in the range [1..100]")


def _renaming_errors(s: str, frm: str, errs: list[str]) -> None:
    """jwt v2 RenamingSubject.Validate: ``s`` renames ``frm``; its ``*`` and ``$N`` must account for every ``*``
    of ``frm``, and both end in ``>`` or neither does."""
    _subject_errors(s, errs)
    if frm == "":
        errs.append("subject cannot be empty")
    if " " in s:
        errs.append(f"subject {_q(s)} cannot have spaces")

    def suffix(x: str) -> bool:
        return x == ">" or x.endswith(".>")

    if suffix(s) != suffix(frm):
        errs.append("both, renaming subject and subject, need to end or not end in >")
    from_cnt = 1 if frm == "*" else sum(1 for t in frm.split(".") if t == "*")
    ref = 0
    for tk in s.split("."):
        if tk == "*":
            ref += 1
        if len(tk) < 2:
            continue
        if tk[0] == "$" and tk[1:].isdigit():
            if int(tk[1:]) > from_cnt:
                errs.append(f"Reference ${int(tk[1:])} in {_q(s)} reference * in {_q(frm)} that do not exist")
            else:
                ref += 1
    if ref != from_cnt:
        errs.append("subject does not contain enough * or reference wildcards $[0-9]")


def _type_name(t: Any) -> str:
    return t if t in ("stream", "service") else "unknown"


def import_errors(im: dict, account: str, errs: list[str]) -> None:
    """jwt v2 Import.Validate (the activation token's own times are not checked here: validateWithTimeChecks
    false; nats-server checks them when it wires the import, accounts.go checkActivation)."""
    kind = im.get("type")
    if kind not in ("stream", "service"):
        errs.append(f"invalid import type: {_q(_type_name(kind))}")
    if kind == "service" and im.get("allow_trace"):
        errs.append("AllowTrace only valid for stream import")
    if not im.get("account"):
        errs.append("account to import from is not specified")
    subject = str(im.get("subject") or "")
    _subject_errors(subject, errs)
    local = str(im.get("local_subject") or "")
    if local:
        _renaming_errors(local, subject, errs)
        if im.get("to"):
            errs.append("Local Subject replaces To")
    if im.get("share") and kind != "service":
        errs.append(f"sharing information (for latency tracking) is only valid for services: {_q(subject)}")
    token = im.get("token") or ""
    if not token:
        return
    try:
        act = decode(token, "activation")
    except JWTError:
        errs.append(f"import {_q(subject)} contains an invalid activation token")
        return
    n = act.nats
    if not (act.issuer == im.get("account") or n.get("issuer_account") == im.get("account")):
        errs.append(f"activation token doesn't match account for import {_q(subject)}")
    if act.subject != account:
        errs.append(f"activation token doesn't match account it is being included in, {_q(subject)}")
    if n.get("kind") != kind:
        errs.append(f"mismatch between token import type {_type_name(n.get('kind'))} and type of import "
                    f"{_type_name(kind)}")
    activation_errors(act, errs)
    subj = str(im.get("to") or "") if kind == "service" and im.get("to") else subject
    act_subject = str(n.get("subject") or "")
    if not is_contained_in(subj, act_subject):
        errs.append(f"activation token import subject {_q(act_subject)} doesn't match import {_q(subject)}")


def activation_errors(act: Claims, errs: list[str]) -> None:
    """jwt v2 Activation.Validate and the issuer_account check of ActivationClaims.validateWithTimeChecks."""
    n = act.nats
    if n.get("kind") not in ("stream", "service"):
        errs.append(f"invalid import type: {_q(_type_name(n.get('kind')))}")
    _subject_errors(str(n.get("subject") or ""), errs)
    ia = n.get("issuer_account") or ""
    if ia and decode_public_key(ia, "A") is None:
        errs.append("account_id is not an account public key")


def _export_errors(ex: dict, errs: list[str]) -> None:
    """jwt v2 Export.Validate."""
    kind = ex.get("type")
    service = kind == "service"
    rt = ex.get("response_type") or ""
    if kind not in ("stream", "service"):
        errs.append(f"invalid export type: {_q(_type_name(kind))}")
    if service and rt not in ("", "Singleton", "Stream", "Chunked"):
        errs.append(f"invalid response type for service: {_q(rt)}")
    if kind == "stream":
        if rt:
            errs.append(f"invalid response type for stream: {_q(rt)}")
        if ex.get("allow_trace"):
            errs.append("AllowTrace only valid for service export")
    threshold = ex.get("response_threshold") or 0
    if threshold < 0:
        errs.append("negative response threshold is invalid")
    if threshold > 0 and not service:
        errs.append("response threshold only valid for services")
    subject = str(ex.get("subject") or "")
    _subject_errors(subject, errs)
    pos = ex.get("account_token_position") or 0
    if pos > 0:
        if not has_wildcards(subject):
            errs.append(f"Account Token Position can only be used with wildcard subjects: {subject}")
        else:
            toks = subject.split(".")
            if pos > len(toks):
                errs.append(f"Account Token Position {pos} exceeds length of subject '{subject}'")
            elif toks[pos - 1] != "*":
                errs.append(f"Account Token Position {pos} matches '{toks[pos - 1]}' but must match a * in: "
                            f"{subject}")


def account_errors(claims: Claims) -> list[str]:
    """The blocking errors jwt v2 AccountClaims.Validate finds in an account JWT's imports and exports (and the
    operator's import/export limits on them).  nats-server does not load an account with any of them
    (server.go verifyAccountClaims: ErrAccountValidation) and answers a push with "jwt validation failed"."""
    n = claims.nats
    errs: list[str] = []
    imports = n.get("imports") or []
    by_account: dict[str, list[str]] = {}
    for im in imports:
        if im is None:
            errs.append("null import is not allowed")
            continue
        if im.get("type") == "service":
            acc = str(im.get("account") or "")
            sub = str(im.get("to") or "") or to_subject(str(im.get("local_subject") or "")) or \
                str(im.get("subject") or "")
            seen = by_account.setdefault(acc, [])
            for other in seen:
                if is_contained_in(sub, other) or is_contained_in(other, sub):
                    errs.append(f"overlapping subject namespace for {_q(sub)} and {_q(other)} in same account "
                                f"{_q(acc)}")
            if sub in seen:
                errs.append(f"overlapping subject namespace for {_q(sub)} in account {_q(acc)}")
            else:
                seen.append(sub)
        import_errors(im, claims.subject, errs)
    exports = n.get("exports") or []
    subjects: dict[str, list[str]] = {"service": [], "stream": []}
    for ex in exports:
        if ex is None:
            errs.append("null export is not allowed")
            continue
        subjects["service" if ex.get("type") == "service" else "stream"].append(str(ex.get("subject") or ""))
        _export_errors(ex, errs)
    for kind in ("service", "stream"):  # isContainedIn: an export inside another export of the same kind
        subs = subjects[kind]
        found: dict[str, str] = {}
        for i, ns in enumerate(subs):
            for j, s in enumerate(subs):
                if i != j and is_contained_in(ns, s) and s not in found:
                    found[s] = ns
        for k, v in found.items():
            errs.append(f"{kind} export subject {_q(k)} already exports {_q(v)}")
    _trace_errors(n.get("trace"), errs)
    limits = n.get("limits") or {}
    n_imp, n_exp = limits.get("imports", 0), limits.get("exports", 0)
    if n_imp is None:
        n_imp = 0
    if n_exp is None:
        n_exp = 0
    # Account.Validate checks the import limit twice, the first time only when the limits are not all zero values.
    if any(v for v in limits.values()) and n_imp >= 0 and len(imports) > n_imp:
        errs.append("the account contains more imports than allowed by the operator")
    if n_imp != -1 and len(imports) > n_imp:
        errs.append("the account contains more imports than allowed by the operator")
    if n_exp != -1:
        if len(exports) > n_exp:
            errs.append("the account contains more exports than allowed by the operator")
        if not limits.get("wildcards"):
            for ex in exports:
                if ex is not None and has_wildcards(str(ex.get("subject") or "")):
                    errs.append("the account contains wildcard exports that are not allowed by the operator")
    return errs
