"""Go's time and duration text formats, as nats-server puts them on the wire.

Theory of operation
-------------------
JetStream JSON carries two kinds of time values:

* ``time.Time`` marshals as RFC3339 with nanoseconds and *trailing zeros trimmed* (Go's ``RFC3339Nano`` layout
  ``2006-01-02T15:04:05.999999999Z07:00``); a zero offset prints as ``Z``; Go's zero time is
  ``0001-01-01T00:00:00Z``.  Times are kept here as integer nanoseconds since the Unix epoch (UTC) so nothing is
  lost to Python's microsecond ``datetime``; :data:`ZERO_TIME_NS` is Go's zero time on that scale.  A time parsed
  with a non-UTC offset keeps the offset in :class:`GoTime` because Go echoes it back unchanged (the oracle returns
  ``"opt_start_time":"2020-01-01T00:00:00+02:00"`` as sent).
* ``time.Duration`` marshals as integer nanoseconds in JSON, but appears in *texts* (``409 Exceeded
  MaxRequestExpires of 1s``, ``Nats-TTL: 15m0s``, error descriptions) in Go's ``Duration.String()`` form:
  ``1m30s``, ``15m0s``, ``1h0m0s``, ``500ms``, ``1.5µs``, ``0s``.  :func:`format_go_duration` produces it and
  :func:`parse_go_duration` reads ``time.ParseDuration`` input.

:func:`parse_time` follows Go's ``time.Time.UnmarshalJSON`` (strict RFC3339) and raises :class:`TimeParseError`
whose text copies Go's ``parsing time "..." as "...": cannot parse "..." as "..."`` for the common failure points
(the element where parsing stopped).  Range errors (``month out of range`` ...) use Go's wording too.  Rarer
corner cases of Go's layout engine are approximated; the element named in the message is the one Go names for
every input exercised in tests/protocol/test_jsapi_timefmt.py.
"""
from __future__ import annotations

import re

from ..record import Fields

__all__ = [
    "ZERO_TIME_NS",
    "GoTime",
    "TimeParseError",
    "format_time",
    "parse_time",
    "format_go_duration",
    "parse_go_duration",
    "DurationParseError",
    "NS",
    "US",
    "MS",
    "SECOND",
    "MINUTE",
    "HOUR",
]

NS = 1
US = 1_000
MS = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

#: Go's zero ``time.Time`` (0001-01-01T00:00:00Z) as nanoseconds since the Unix epoch.
ZERO_TIME_NS = -62135596800 * SECOND

_RFC3339 = "2006-01-02T15:04:05Z07:00"


class GoTime(Fields):
    """A point in time with nanosecond precision and the UTC offset (seconds) it was written with.

    Immutable and hashable, as the frozen dataclass it was; a plain class (protocol.record.Fields) because
    ``dataclass()`` generates and execs its code at import (issue #13, start-up)."""

    __slots__ = _fields = ("unix_ns", "offset")

    def __init__(self, unix_ns: int, offset: int = 0) -> None:
        object.__setattr__(self, "unix_ns", unix_ns)
        object.__setattr__(self, "offset", offset)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash((self.unix_ns, self.offset))

    def __reduce__(self) -> tuple:  # copy, deepcopy and pickle build a new one (setting slots would raise)
        return GoTime, (self.unix_ns, self.offset)

    @property
    def is_zero(self) -> bool:
        return self.unix_ns == ZERO_TIME_NS

    def utc(self) -> "GoTime":
        return GoTime(self.unix_ns, 0)

    def to_json(self) -> str:
        return format_time(self.unix_ns, self.offset)

    @classmethod
    def zero(cls) -> "GoTime":
        return cls(ZERO_TIME_NS, 0)


class TimeParseError(ValueError):
    """Go's *time.ParseError text."""


def _civil(unix_s: int) -> tuple[int, int, int, int, int, int]:
    days, secs = divmod(unix_s, 86400)
    # days since 1970-01-01 -> proleptic Gregorian date (Howard Hinnant's algorithm)
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    if m <= 2:
        y += 1
    return y, m, d, secs // 3600, secs // 60 % 60, secs % 60


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


# UTC "YYYY-MM-DDTHH:MM:SS" by Unix second: messages stored in the same second (a KV bucket's keys, a burst of
# publishes) are formatted for every direct get, message get and delivery header; the date is worked out once.
_SECONDS: dict[int, str] = {}


def format_time(unix_ns: int | GoTime, offset: int = 0) -> str:
    """Go's ``time.Time.MarshalJSON`` (RFC3339Nano, trailing fractional zeros trimmed, ``Z`` for UTC)."""
    if isinstance(unix_ns, GoTime):
        unix_ns, offset = unix_ns.unix_ns, unix_ns.offset
    secs, frac = divmod(unix_ns, SECOND)
    out = _SECONDS.get(secs) if offset == 0 else None
    if out is None:
        y, mo, d, h, mi, s = _civil(secs + offset)
        out = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}"
        if offset == 0:
            if len(_SECONDS) >= 4096:
                _SECONDS.clear()
            _SECONDS[secs] = out
    if frac:
        out += "." + f"{frac:09d}".rstrip("0")
    if offset == 0:
        return out + "Z"
    sign = "+" if offset > 0 else "-"
    off = abs(offset)
    return out + f"{sign}{off // 3600:02d}:{off // 60 % 60:02d}"


def _quote(s: str) -> str:
    """Go's time.quote: control and non-ASCII characters as ``\\xNN`` per UTF-8 byte, ``"`` and ``\\`` escaped.
    (Go's JSON decoder has already turned invalid UTF-8 and lone surrogates into U+FFFD.)"""
    out = ['"']
    for c in s:
        if 0xD800 <= ord(c) <= 0xDFFF:
            c = "\ufffd"
        if c >= "\x80" or c < " ":
            out.append("".join(f"\\x{b:02x}" for b in c.encode("utf-8")))
        else:
            out.append("\\" + c if c in '"\\' else c)
    out.append('"')
    return "".join(out)


def _perr(value: str, elem: str, rest: str, msg: str = "") -> TimeParseError:
    """time.ParseError.Error(): every part quoted with time.quote."""
    if msg:
        return TimeParseError(f"parsing time {_quote(value)}{msg}")
    return TimeParseError(f"parsing time {_quote(value)} as {_quote(_RFC3339)}: cannot parse {_quote(rest)} as "
                          f"{_quote(elem)}")


def _digits(s: str, i: int, n: int) -> int | None:
    chunk = s[i : i + n]
    if len(chunk) != n or not chunk.isascii() or not chunk.isdigit():
        return None
    return int(chunk)


def parse_time(value: str) -> GoTime:
    """Parse a JSON time string the way Go's ``time.Time.UnmarshalJSON`` does (RFC3339, strict)."""
    s = value
    i = 0
    year = _digits(s, 0, 4)
    if year is None:
        raise _perr(value, "2006", s)
    i = 4
    steps = (("-", "-"), ("01", 2), ("-", "-"), ("02", 2), ("T", "T"), ("15", 2), (":", ":"), ("04", 2), (":", ":"), ("05", 2))
    nums: list[int] = []
    for elem, spec in steps:
        if isinstance(spec, str):
            if s[i : i + 1] != spec:
                raise _perr(value, elem, s[i:])
            i += 1
        else:
            v = _digits(s, i, 2)
            if v is None:
                raise _perr(value, elem, s[i:])
            nums.append(v)
            i += 2
    month, day, hour, minute, sec = nums
    frac = 0
    if s[i : i + 1] in (".", ","):
        j = i + 1
        while j < len(s) and s[j].isascii() and s[j].isdigit():
            j += 1
        digits = s[i + 1 : j]
        if not digits:
            raise _perr(value, "Z07:00", s[i:])
        frac = int((digits + "000000000")[:9])
        i = j
    rest = s[i:]
    if rest == "Z":
        offset = 0
    else:
        m = re.fullmatch(r"([+-])(\d\d):(\d\d)", rest)
        if not m:
            raise _perr(value, "Z07:00", rest)
        oh, om = int(m.group(2)), int(m.group(3))
        if oh >= 24 or om >= 60:
            raise _perr(value, "", "", msg=": timezone hour outside of range" if oh >= 24 else ": timezone minute outside of range")
        offset = (oh * 3600 + om * 60) * (1 if m.group(1) == "+" else -1)
    if not 1 <= month <= 12:
        raise _perr(value, "", "", msg=": month out of range")
    if hour >= 24:
        raise _perr(value, "", "", msg=": hour out of range")
    if minute >= 60:
        raise _perr(value, "", "", msg=": minute out of range")
    if sec >= 60:
        raise _perr(value, "", "", msg=": second out of range")
    import calendar  # only here: it imports datetime and locale, ~1 ms of every start otherwise

    if not 1 <= day <= calendar.monthrange(year if year > 0 else 2000 + year % 400, month)[1]:
        raise _perr(value, "", "", msg=": day out of range")
    days = _days_from_civil(year, month, day)
    unix_s = days * 86400 + hour * 3600 + minute * 60 + sec - offset
    return GoTime(unix_s * SECOND + frac, offset)


# --- durations ---------------------------------------------------------------------------------------------------

def _fmt_frac(v: int, prec: int) -> str:
    """v / 10**prec with trailing zeros (and a bare point) trimmed, like Go's fmtFrac+fmtInt."""
    whole, frac = divmod(v, 10**prec)
    if frac == 0:
        return str(whole)
    return f"{whole}." + f"{frac:0{prec}d}".rstrip("0")


def format_go_duration(ns: int) -> str:
    """Go's ``time.Duration.String()``: ``0s``, ``1.5µs``, ``500ms``, ``1m30s``, ``15m0s``, ``1h0m0s``."""
    if ns == 0:
        return "0s"
    neg = ns < 0
    u = -ns if neg else ns
    if u < SECOND:
        if u < US:
            out = f"{u}ns"
        elif u < MS:
            out = _fmt_frac(u, 3) + "µs"
        else:
            out = _fmt_frac(u, 6) + "ms"
    else:
        secs_part = _fmt_frac(u % MINUTE, 9) + "s"
        mins = u // MINUTE
        if mins == 0:
            out = secs_part
        else:
            hours, mins = divmod(mins, 60)
            out = (f"{hours}h" if hours else "") + f"{mins}m" + secs_part
    return "-" + out if neg else out


class DurationParseError(ValueError):
    """Go's time.ParseDuration error text."""


_UNITS = {"ns": NS, "us": US, "µs": US, "μs": US, "ms": MS, "s": SECOND, "m": MINUTE, "h": HOUR}
_DUR_TOKEN = re.compile(r"(\d*)(?:\.(\d*))?([a-zµμ]*)")


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration``: ``"1h2m3.5s"``, ``"-1.5ms"``, ``"0"`` -> nanoseconds."""
    orig = text
    quoted = '"' + orig + '"'
    s = text
    neg = False
    if s[:1] in ("-", "+"):
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationParseError(f"time: invalid duration {quoted}")
    total = 0
    while s:
        m = _DUR_TOKEN.match(s)
        whole, frac, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not frac:
            raise DurationParseError(f"time: invalid duration {quoted}")
        if not unit:
            raise DurationParseError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS:
            raise DurationParseError(f'time: unknown unit "{unit}" in duration {quoted}')
        scale = _UNITS[unit]
        v = int(whole or "0") * scale
        if frac:
            v += int(frac) * scale // 10 ** len(frac)
        total += v
        if total > (1 << 63) - 1:
            raise DurationParseError(f"time: invalid duration {quoted}")
        s = s[m.end():]
    return -total if neg else total
