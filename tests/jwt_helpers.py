"""Issue NATS operator, account and user JWTs and ``.creds`` files for tests, as nsc would (nats-io/jwt v2).

Keys are made and JWTs signed with the ``nkeys`` package (Ed25519 through PyNaCl); nothing here is hand-written
cryptography.  The claims carry the defaults ``jwt.NewAccountClaims`` / ``jwt.NewUserClaims`` write (every limit
-1, JetStream off), so a test states only what it changes.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import nkeys
from nacl.signing import SigningKey

_PREFIX = {"O": nkeys.PREFIX_BYTE_OPERATOR, "A": nkeys.PREFIX_BYTE_ACCOUNT, "U": nkeys.PREFIX_BYTE_USER}
HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


@dataclass
class Key:
    kp: Any

    @property
    def public(self) -> str:
        return self.kp.public_key.decode()

    @property
    def seed(self) -> str:
        return self.kp.seed.decode()

    def sign(self, data: bytes) -> bytes:
        return self.kp.sign(data)


def new_key(kind: str) -> Key:
    """A fresh operator ("O"), account ("A") or user ("U") key pair."""
    raw = bytes(SigningKey.generate())
    seed = nkeys.encode_seed(raw, _PREFIX[kind])
    return Key(nkeys.from_seed(bytearray(seed)))


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _claims(payload: dict, signer: Key) -> str:
    """The claims chunk: iat, iss and the jti computed as jwt v2 does (base32 SHA-512/256 of the claims with an
    empty jti)."""
    payload = dict(payload)
    payload.setdefault("iat", int(time.time()))
    payload["iss"] = signer.public
    payload["jti"] = ""
    try:
        h = hashlib.new("sha512_256")
    except ValueError:  # pragma: no cover - OpenSSL without SHA-512/256
        h = hashlib.sha256()
    h.update(json.dumps(payload, separators=(",", ":")).encode())
    payload["jti"] = base64.b32encode(h.digest()).decode().rstrip("=")
    return _b64(json.dumps(payload, separators=(",", ":")).encode())


def encode(payload: dict, signer: Key) -> str:
    """Sign ``payload`` as a jwt v2 token: the signature covers header and claims."""
    head = _b64(json.dumps(HEADER, separators=(",", ":")).encode())
    body = _claims(payload, signer)
    sig = signer.sign(f"{head}.{body}".encode())
    return f"{head}.{body}.{_b64(sig)}"


def encode_v1(payload: dict, signer: Key) -> str:
    """A jwt v1 token, as nsc 1.x wrote them: header alg ``ed25519``, the claim type (and tags) beside the standard
    claims rather than under ``nats``, the signature over the claims chunk alone (jwt v1 Claims.Encode)."""
    head = _b64(json.dumps({"typ": "jwt", "alg": "ed25519"}, separators=(",", ":")).encode())
    body = _claims(payload, signer)
    return f"{head}.{body}.{_b64(signer.sign(body.encode()))}"


def operator_jwt(op: Key, *, system_account: str = "", signing_keys: list[str] | None = None,
                 strict: bool = False, name: str = "OP", **nats: Any) -> str:
    n: dict[str, Any] = {"type": "operator", "version": 2}
    if system_account:
        n["system_account"] = system_account
    if signing_keys:
        n["signing_keys"] = signing_keys
    if strict:
        n["strict_signing_key_usage"] = True
    n.update(nats)
    return encode({"sub": op.public, "name": name, "nats": n}, op)


DEFAULT_ACCOUNT_LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
                          "conn": -1, "leaf": -1}


def account_jwt(acc: Key, signer: Key, *, name: str = "A", limits: dict | None = None, jetstream: dict | None = None,
                signing_keys: list | None = None, revocations: dict | None = None, exp: int = 0,
                default_permissions: dict | None = None, **nats: Any) -> str:
    lim = dict(DEFAULT_ACCOUNT_LIMITS)
    lim.update({"mem_storage": 0, "disk_storage": 0, "streams": 0, "consumer": 0})
    if jetstream:
        lim.update(jetstream)
    if limits:
        lim.update(limits)
    n: dict[str, Any] = {"type": "account", "version": 2, "limits": lim,
                         "default_permissions": default_permissions or {"pub": {}, "sub": {}}}
    if signing_keys:
        n["signing_keys"] = signing_keys
    if revocations:
        n["revocations"] = revocations
    n.update(nats)
    payload: dict[str, Any] = {"sub": acc.public, "name": name, "nats": n}
    if exp:
        payload["exp"] = exp
    return encode(payload, signer)


def user_jwt(user: Key, signer: Key, *, issuer_account: str = "", name: str = "u", pub: dict | None = None,
             sub: dict | None = None, resp: dict | None = None, bearer: bool = False, exp: int = 0, nbf: int = 0,
             iat: int | None = None, limits: dict | None = None, scoped: bool = False, **nats: Any) -> str:
    """A user JWT; ``scoped``: for a scoped signing key, which requires no permissions and no limits at all (nsc
    leaves them out; -1 would count as set)."""
    n: dict[str, Any] = {"type": "user", "version": 2}
    if not scoped:
        n.update({"pub": pub or {}, "sub": sub or {}, "subs": -1, "data": -1, "payload": -1})
    if limits:
        n.update(limits)
    if resp:
        n["resp"] = resp
    if bearer:
        n["bearer_token"] = True
    if issuer_account:
        n["issuer_account"] = issuer_account
    n.update(nats)
    payload: dict[str, Any] = {"sub": user.public, "name": name, "nats": n}
    if exp:
        payload["exp"] = exp
    if nbf:
        payload["nbf"] = nbf
    if iat is not None:
        payload["iat"] = iat
    return encode(payload, signer)


def creds(token: str, user: Key) -> str:
    """A ``.creds`` file's text (jwt v2 FormatUserConfig: the end lines have six dashes)."""
    return ("-----BEGIN NATS USER JWT-----\n" f"{token}\n" "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n" f"{user.seed}\n" "------END USER NKEY SEED------\n\n"
            "*************************************************************\n")


def write_creds(path: str, token: str, user: Key) -> str:
    with open(path, "w") as f:
        f.write(creds(token, user))
    os.chmod(path, 0o600)
    return path


def activation_jwt(importer: Key, signer: Key, subject: str, kind: str = "stream", *, issuer_account: str = "",
                   exp: int = 0, iat: int | None = None, name: str = "") -> str:
    """An activation token (nsc generate activation): ``signer`` (the exporting account, or one of its signing keys
    with ``issuer_account``) lets ``importer`` import ``subject`` of type ``kind`` ("stream" or "service")."""
    n: dict[str, Any] = {"type": "activation", "version": 2, "subject": subject, "kind": kind}
    if issuer_account:
        n["issuer_account"] = issuer_account
    payload: dict[str, Any] = {"sub": importer.public, "name": name or subject, "nats": n}
    if exp:
        payload["exp"] = exp
    if iat is not None:
        payload["iat"] = iat
    return encode(payload, signer)
