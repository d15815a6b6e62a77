"""JSON replies written the way nats-server's ``json.Marshal`` writes them.

Theory of operation
-------------------
API replies are built as ordinary dicts in Go's struct field order (Python dicts keep insertion order) and written
by :func:`dumps`: no spaces, HTML-safe escapes (``<`` -> ``\\u003c`` ...), exactly as ``encoding/json`` does.  Parts
that are already JSON text (a ``StreamConfig.to_json()``, a cached state object) are wrapped in :class:`Raw` and
inserted verbatim, so a config is encoded once by :mod:`protocol.jsapi.gojson` and never re-ordered.

Go's ``omitempty`` is the caller's business: leave the key out of the dict.
"""
from __future__ import annotations

import json
from json.encoder import encode_basestring  # the C string encoder json.dumps(ensure_ascii=False) uses
from typing import Any

from skiff.protocol.jsapi.timefmt import GoTime, format_time

ZERO_TIME = "0001-01-01T00:00:00Z"


class Raw(str):
    """A string that already is JSON text."""

    __slots__ = ()


def _escape(s: str) -> str:
    if "<" in s or ">" in s or "&" in s or "\u2028" in s or "\u2029" in s:
        s = (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
             .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return s


def _enc(v: Any, out: list[str]) -> None:
    if isinstance(v, Raw):
        out.append(v)
    elif isinstance(v, str):
        out.append(_escape(encode_basestring(v)))
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif v is None:
        out.append("null")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k, x in v.items():
            if not first:
                out.append(",")
            first = False
            out.append(_escape(encode_basestring(str(k))))
            out.append(":")
            _enc(x, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(",")
            _enc(x, out)
        out.append("]")
    elif isinstance(v, GoTime):
        out.append('"' + format_time(v) + '"')
    elif hasattr(v, "to_json"):
        out.append(v.to_json())
    elif isinstance(v, float):
        out.append(json.dumps(v))
    else:  # pragma: no cover - a bug in a caller
        raise TypeError(f"cannot encode {type(v).__name__}")


def dumps(v: Any) -> str:
    out: list[str] = []
    _enc(v, out)
    return "".join(out)


def dumpb(v: Any) -> bytes:
    return dumps(v).encode("utf-8", "surrogateescape")


def time_json(ns: int) -> str:
    """A store timestamp (ns; 0 = Go's zero time) as nats-server writes a ``time.Time``."""
    return format_time(ns) if ns else ZERO_TIME
