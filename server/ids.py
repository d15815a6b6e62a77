"""Random identifiers the server makes up: advisory and event ids, inboxes, reply prefixes, generated names.

nats-server draws them from its NUID generator (nats-io/nuid: 22 base62 characters; shorter ones, as for a legacy
ephemeral consumer's name, are a prefix of the same alphabet).  Clients and tools only ever see the shape, so one
generator serves every use; nothing here is on a per-message path.  It draws from ``random.SystemRandom`` (the
operating system's CSPRNG, what ``secrets.choice`` is): ``secrets`` imports hmac and so OpenSSL's hashlib, ~0.6 MiB
of resident memory and ~3 ms of every start.
"""
from __future__ import annotations

import random

_SYSTEM = random.SystemRandom()

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def nuid(length: int = 22) -> str:
    """``length`` random base62 characters (22: a NUID)."""
    return "".join(_SYSTEM.choice(BASE62) for _ in range(length))


_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def server_id() -> str:
    """A server id: nats-server's are nkey public keys, 56 base32 characters starting with "N"."""
    return "N" + "".join(_SYSTEM.choice(_B32) for _ in range(55))
