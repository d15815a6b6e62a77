"""Nkey public keys, nonces and CONNECT signatures (nats-server nkey.go, auth.go; nats-io/nkeys strkey.go).

The cryptography is the `nkeys` package's (Ed25519 through PyNaCl, and its CRC16); this module only reads the
public-key string, which that package can make but not parse: base32 (no padding) of
``[prefix byte][32-byte Ed25519 key][CRC16 little-endian]``.
"""
from __future__ import annotations

import base64
import binascii
import secrets

NONCE_RAW_LEN = 11  # nats-server nonceRawLen: 11 random bytes, base64url without padding -> 15 characters

# First letter of a public key -> nkeys prefix byte.
PREFIXES = {"U": 20 << 3, "A": 0, "O": 14 << 3, "N": 13 << 3, "C": 2 << 3}


def new_nonce() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(NONCE_RAW_LEN)).rstrip(b"=").decode()


def decode_public_key(key: str, kind: str = "U") -> bytes | None:
    """The raw Ed25519 key of ``key`` if it is a valid public nkey of ``kind`` ("U" user, "A" account...)."""
    import nkeys

    if not isinstance(key, str) or not key or key[0] != kind:
        return None
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != PREFIXES[kind]:
        return None
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if nkeys.crc16(bytearray(body)) != crc:
        return None
    return bytes(body[1:])


def is_public_key(key: str, kind: str = "U") -> bool:
    return decode_public_key(key, kind) is not None


def verify_signature(public_key: str, nonce: str, sig: str) -> bool:
    """Did the holder of ``public_key`` sign ``nonce``?  ``sig`` is base64url without padding, or standard base64
    (nats-server auth.go tries RawURLEncoding first, then StdEncoding)."""
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    raw = decode_public_key(public_key, public_key[:1] if public_key else "U")
    if raw is None or not isinstance(sig, str):
        return False
    try:
        sig_bytes = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    except (binascii.Error, ValueError):
        try:
            sig_bytes = base64.b64decode(sig, validate=True)
        except (binascii.Error, ValueError):
            return False
    try:
        VerifyKey(raw).verify(nonce.encode(), sig_bytes)
        return True
    except (BadSignatureError, ValueError):
        return False
