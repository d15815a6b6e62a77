"""nats-server's configuration digest: ``sha256:<hex>`` of the parsed file encoded as Go's encoding/json does.

nats-server logs it at start (``Using configuration file: x (sha256:...)``) and prints it for ``-t``; reproducing
it lets a person compare the two servers' view of one file.  Go's encoder sorts map keys, writes compact JSON,
escapes ``< > &`` and U+2028/U+2029, formats floats without a needless ``.0`` and ends with a new line.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def go_json(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(f"{_go_string(str(k))}:{go_json(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(go_json(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, datetime):
        return _go_string(v.isoformat().replace("+00:00", "Z"))
    if v is None:
        return "null"
    return _go_string(str(v))


def _go_string(s: str) -> str:
    out = json.dumps(s, ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        out = out.replace(ch, esc)
    return out


def _go_float(f: float) -> str:
    a = abs(f)
    if a == 0 or 1e-6 <= a < 1e21:
        from decimal import Decimal  # imported when first needed: the monitor imports this module at start

        s = format(Decimal(repr(f)), "f")
        return s.rstrip("0").rstrip(".") if "." in s else s
    mant, exp = repr(f).split("e")
    sign = exp[0] if exp[0] in "+-" else "+"
    return f"{mant}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"


def config_digest(mapping: dict) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256((go_json(mapping) + "\n").encode()).hexdigest()
