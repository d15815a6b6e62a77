"""Values of the configuration language: tokens with their position, numbers with size suffixes, Go durations.

Theory of operation
-------------------
The parser wraps every value in a :class:`Token` that remembers where it was written (file, line, column) and
whether a ``$variable`` reference used it.  nats-server does the same in its "pedantic" mode (``conf/parse.go``
``token``): the options layer needs the position to report ``file:line:col: reason`` and needs ``used_variable``
so that a top-level key that only defines a variable (``PORT: 4222`` then ``port: $PORT``) is not an unknown
field.  :func:`plain` strips the tokens for callers that only want Python values.

Integers may carry a size suffix (``conf/parse.go``, itemInteger): ``k m g t p e`` are powers of 1000 and
``kb ki kib`` (and so on) powers of 1024, case-insensitive.  So ``1MB`` is 1048576 and ``1M`` is 1000000, and an
unquoted ``2m`` is the integer 2000000, not two minutes (nats-server warns about this for durations).

Durations in the file are strings in Go's ``time.ParseDuration`` syntax (``"2m"``, ``"1h30m"``, ``"250ms"``);
:func:`parse_duration` implements that syntax and returns seconds as a float.
"""
from __future__ import annotations

from skiff.protocol.jsapi.timefmt import parse_go_duration

from dataclasses import dataclass, field
from typing import Any

BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}

_SIZE_MULTIPLIERS: dict[str, int] = {"": 1}
for _i, _letter in enumerate("kmgtpe", start=1):
    _SIZE_MULTIPLIERS[_letter] = 1000**_i
    for _suffix in (f"{_letter}b", f"{_letter}i", f"{_letter}ib"):
        _SIZE_MULTIPLIERS[_suffix] = 1024**_i

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(eq=False)
class Token:
    """One value as written in a file.  ``value`` holds plain scalars, ``dict[str, Token]`` or ``list[Token]``."""

    value: Any
    file: str | None = None
    line: int = 0
    col: int = 0
    used_variable: bool = field(default=False)

    @property
    def location(self) -> str:
        return f"{self.file or '<string>'}:{self.line}:{self.col}"

    def __repr__(self) -> str:
        return f"Token({self.value!r} @ {self.location})"


def plain(value: Any) -> Any:
    """The Python value under a token tree: dicts, lists, str, int, float, bool, datetime."""
    if isinstance(value, Token):
        value = value.value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def integer_value(text: str) -> int:
    """The value of an integer literal with an optional size suffix (``64KB``, ``1G``, ``-5``).

    Raises ``ValueError`` with nats-server's wording when the digits overflow int64 or the suffix is unknown.
    """
    n = 0
    while n < len(text) and (text[n].isdigit() or text[n] == "-"):
        n += 1
    digits, suffix = text[:n], text[n:].strip().lower()
    try:
        num = int(digits)
    except ValueError:
        raise ValueError(f"expected integer, but got '{text}'") from None
    if not INT64_MIN <= num <= INT64_MAX:
        raise ValueError(f"integer '{text}' is out of the range")
    mult = _SIZE_MULTIPLIERS.get(suffix)
    if mult is None:
        # nats-server silently drops such a value (no case in its switch); an error is kinder.
        raise ValueError(f"unknown size suffix in '{text}' (use k, kb, ki, kib, m, mb, ... e, eb)")
    return num * mult




def parse_duration(text: str) -> float:
    """Seconds in a Go duration string (``time.ParseDuration``): ``"1h2m3.5s"``, ``"-250ms"``, ``"0"``.

    Raises ``ValueError`` with Go's wording (``time: invalid duration "x"``, ``time: missing unit ...``); the
    parsing itself is protocol.jsapi.timefmt's (one implementation of Go's rules).
    """
    if not isinstance(text, str):
        raise ValueError(f'time: invalid duration "{text}"')
    return parse_go_duration(text) / 1e9


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` for a number of seconds: ``2m0s``, ``10s``, ``1.5s``, ``250ms``, ``0s``.

    Monitoring documents (``/varz``) show durations this way.
    """
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    neg = ns < 0
    ns = abs(ns)
    if ns < 1_000_000_000:
        # Sub-second: the largest unit that keeps the integer part non-zero.
        for unit, size in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if ns >= size:
                out = _trim(ns / size, size) + unit
                break
    else:
        hours, rem = divmod(ns, 3_600_000_000_000)
        minutes, rem = divmod(rem, 60_000_000_000)
        secs = _trim(rem / 1e9, 1_000_000_000) + "s"
        out = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + secs
    return ("-" if neg else "") + out


def _trim(value: float, size: int) -> str:
    digits = len(str(size)) - 1
    s = f"{value:.{digits}f}" if digits else f"{value:.0f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s
