"""Random identifiers the server makes up: advisory and event ids, inboxes, reply prefixes, generated names.

nats-server draws them from its NUID generator (nats-io/nuid: 22 base62 characters; shorter ones, as for a legacy
ephemeral consumer's name, are a prefix of the same alphabet).  Clients and tools only ever see the shape, so one
generator from the ``secrets`` module serves every use; nothing here is on a per-message path.
"""
from __future__ import annotations

import secrets

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def nuid(length: int = 22) -> str:
    """``length`` random base62 characters (22: a NUID)."""
    return "".join(secrets.choice(BASE62) for _ in range(length))
