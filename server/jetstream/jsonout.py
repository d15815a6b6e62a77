"""JSON replies written the way nats-server's ``json.Marshal`` writes them.

API replies are built as ordinary dicts in Go's struct field order (Python dicts keep insertion order) and written
by :func:`dumps` (:mod:`skiff.protocol.marshal`, the one Go-compatible encoder).  Parts that are already JSON text
(a ``StreamConfig.to_json()``, a cached state object) are wrapped in :class:`Raw` and inserted verbatim, so a config
is encoded once by :mod:`protocol.jsapi.gojson` and never re-ordered.

Go's ``omitempty`` is the caller's business: leave the key out of the dict.
"""
from __future__ import annotations

from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.marshal import Raw, dumpb, dumps

__all__ = ["Raw", "dumps", "dumpb", "time_json", "ZERO_TIME"]

ZERO_TIME = "0001-01-01T00:00:00Z"


def time_json(ns: int) -> str:
    """A store timestamp (ns; 0 = Go's zero time) as nats-server writes a ``time.Time``."""
    return format_time(ns) if ns else ZERO_TIME
