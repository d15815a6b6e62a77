"""Go's ``encoding/json`` output: the one encoder behind every JSON document Skiff writes the way nats-server does.

Theory of operation
-------------------
nats-server writes JSON with ``json.Marshal`` (API replies, advisories, ``$SYS`` replies, the monitor's compact form),
``json.MarshalIndent(v, "", "  ")`` (the monitor's pages) and, for its configuration digest, ``json.Marshal`` of the
parsed ``map[string]any`` (whose keys Go sorts).  What a client sees of Go's encoder, and what this module does:

* strings: UTF-8 kept, ``"`` ``\\`` and control characters escaped, and the HTML-safe escapes Go adds by default:
  ``<`` ``>`` ``&`` U+2028 U+2029 as ``\\u003c`` ``\\u003e`` ``\\u0026`` ``\\u2028`` ``\\u2029`` (encode.go
  ``appendString``).  Python's C string encoder (``json.encoder.encode_basestring``) does the first part.
* floats: ``strconv.FormatFloat(f, 'f', -1, 64)`` for 1e-6 <= |f| < 1e21, else ``'e'`` with a two-digit-or-more
  exponent written without padding (encode.go ``floatEncoder``); NaN and infinities, which Go refuses, are written
  as ``null`` so a document is never broken.
* objects: no spaces; keys in the order the caller built the dict (Skiff builds replies in Go's struct field order),
  or sorted (``sort_keys``) where Go encodes a map.  ``omitempty`` is the caller's business: leave the key out.
* :class:`Raw`: text that already is JSON (a ``StreamConfig.to_json()``, a cached state), inserted verbatim; an
  object with ``to_json()`` is inserted through it; a :class:`GoTime` as Go's RFC 3339 text.

Go structs described field by field (the JetStream wire models) are written by :func:`skiff.protocol.jsapi.gojson.encode`
with the same string escaping (:func:`html_safe`).  ``dumps`` is on the API reply path: it appends to one list and
joins once.
"""
from __future__ import annotations

import sys
from json.encoder import encode_basestring  # the C string encoder json.dumps(ensure_ascii=False) uses
from typing import Any

from .jsapi.timefmt import GoTime, format_time

__all__ = ["Raw", "dumps", "dumpb", "dumps_indent", "quote", "html_safe", "go_float"]


class Raw(str):
    """A string that already is JSON text."""

    __slots__ = ()


def html_safe(s: str) -> str:
    """JSON text with Go's HTML-safe escapes applied (its JSON punctuation holds none of these characters)."""
    if "<" in s or ">" in s or "&" in s or "\u2028" in s or "\u2029" in s:
        s = (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
             .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return s


def quote(s: str) -> str:
    """A Go JSON string."""
    return html_safe(encode_basestring(s))


def go_float(f: float) -> str:
    if f != f or f in (float("inf"), float("-inf")):
        return "null"  # Go refuses these; never break the document
    a = abs(f)
    if a == 0 or 1e-6 <= a < 1e21:
        from decimal import Decimal  # imported when first needed: nothing on the start path writes a float

        s = format(Decimal(repr(f)), "f")
        return s.rstrip("0").rstrip(".") if "." in s else s
    mant, exp = repr(f).split("e")
    sign = exp[0] if exp[0] in "+-" else "+"
    return f"{mant}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"


def _enc(v: Any, out: list[str]) -> None:
    # The order of the tests is the order of how often each type occurs in an API reply.
    if isinstance(v, Raw):
        out.append(v)
    elif isinstance(v, str):
        out.append(html_safe(encode_basestring(v)))
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
            out.append(html_safe(encode_basestring(str(k))))
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
    else:
        out.append(_scalar(v))


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, GoTime):
        return '"' + format_time(v) + '"'
    if hasattr(v, "to_json"):
        return v.to_json()
    # The configuration digest: a parsed ISO 8601 date.  datetime is not imported at start (~1 ms): while it is not,
    # no value can be one (server/conf/parser.py imports it to make them).
    dt = sys.modules.get("datetime")
    if dt is not None and isinstance(v, dt.datetime):
        return quote(v.isoformat().replace("+00:00", "Z"))
    return quote(str(v))


def _sorted(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _sorted(v[k]) for k in sorted(v)}
    if isinstance(v, (list, tuple)):
        return [_sorted(x) for x in v]
    return v


def dumps(v: Any, sort_keys: bool = False) -> str:
    """``json.Marshal(v)``; ``sort_keys`` for a Go map (every dict in ``v``)."""
    out: list[str] = []
    _enc(_sorted(v) if sort_keys else v, out)
    return "".join(out)


def dumpb(v: Any) -> bytes:
    return dumps(v).encode("utf-8", "surrogateescape")


def dumps_indent(v: Any, indent: str = "  ", level: int = 0) -> str:
    """``json.MarshalIndent(v, "", indent)``."""
    pad = indent * (level + 1)
    if isinstance(v, dict):
        if not v:
            return "{}"
        items = [f"{pad}{quote(str(k))}: {dumps_indent(x, indent, level + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent * level + "}"
    if isinstance(v, (list, tuple)):
        if not v:
            return "[]"
        return "[\n" + ",\n".join(pad + dumps_indent(x, indent, level + 1) for x in v) + "\n" + indent * level + "]"
    return dumps(v)
