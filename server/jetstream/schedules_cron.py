"""The schedule patterns of message schedules (ADR-51): ``@at``, ``@every``, the predefined ``@hourly``... and cron.

Theory of operation
-------------------
:func:`parse_msg_schedule` is nats-server's ``parseMsgSchedule`` (server/scheduler.go): given the ``Nats-Schedule``
header, an optional ``Nats-Schedule-Time-Zone`` and a reference time ``ts`` (the schedule's publish time, or the
time it last fired), it returns ``(next_ns, repeat, ok)``:

``@at <RFC3339>``       fires once at that time (no time zone allowed); ``repeat`` is False.
``@every <duration>``   Go ``time.ParseDuration``, at least 1s, no time zone; next = round(ts, 1s) + duration,
                        or round(now, 1s) + duration when that is already past (a missed interval fires once).
``@yearly`` ...         shorthands for 6-field cron patterns (``@annually``, ``@monthly``, ``@weekly``,
                        ``@daily``, ``@midnight``, ``@hourly``).
cron                    six fields, *seconds first*: ``sec min hour day-of-month month day-of-week``, evaluated in
                        the time zone (UTC by default); a missed fire is skipped to the next one after now.

The cron dialect is nats-server's own (server/cron.go, after robfig/cron): ``*`` and ``?``, ``a-b``, ``a/step``
(= ``a-max/step``), ``*/step``, lists with ``,``, month names ``jan``..``dec`` and day names ``sun``..``sat``
(case-insensitive), day-of-month and day-of-week OR-ed unless either is ``*``, and no fire within five years is an
invalid pattern (``0 0 0 30 2 *``).  ``croniter`` is not used: it reads five-field patterns with the seconds last
and accepts extensions (``L``, ``#``) nats-server refuses.

Times are integer nanoseconds since the Unix epoch; a time zone is a :class:`zoneinfo.ZoneInfo`.  Arithmetic on
instants (Go's ``Time.Add``) is done in UTC, wall-clock construction (``time.Date``) in the zone.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo

from skiff.protocol.jsapi.timefmt import SECOND, ZERO_TIME_NS, DurationParseError, TimeParseError, parse_go_duration, parse_time

UTC = timezone.utc

PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}

_MONTHS = {n: i + 1 for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
_DAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (min, max, names) of each field, cron.go's bounds.
_BOUNDS = ((0, 59, None), (0, 59, None), (0, 23, None), (1, 31, None), (1, 12, _MONTHS), (0, 6, _DAYS))
STAR_BIT = 1 << 63
_ATOI = re.compile(r"[+-]?[0-9]+")


class CronError(ValueError):
    pass


def go_round_second(ns: int) -> int:
    """Go ``Time.Round(time.Second)``: halfway rounds up."""
    r = ns % SECOND
    return ns - r if r + r < SECOND else ns + (SECOND - r)


def _atoi(expr: str) -> int:
    # strconv.Atoi: an optional sign and ASCII digits, nothing else; negatives are refused by cron.go.
    if not _ATOI.fullmatch(expr):
        raise CronError(f"failed to parse int from {expr}")
    n = int(expr)
    if n < 0:
        raise CronError(f"negative number ({n}) not allowed: {expr}")
    return n


def _int_or_name(expr: str, names: dict | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _atoi(expr)


def _range_bits(expr: str, lo: int, hi: int, names: dict | None) -> int:
    """cron.go getRange: ``number | number "-" number [ "/" number ]`` or ``*``/``?`` with an optional step."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    single = len(low_high) == 1
    extra = 0
    if low_high[0] in ("*", "?"):
        start, end, extra = lo, hi, STAR_BIT
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = hi
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < lo or end > hi or start > end or step == 0:
        raise CronError(f"invalid range: {expr}")
    bits = 0
    for i in range(start, end + 1, step):
        bits |= 1 << i
    return bits | extra


def _field_bits(field: str, bounds: tuple) -> int:
    lo, hi, names = bounds
    bits = 0
    for expr in field.split(","):
        if expr:  # strings.FieldsFuncSeq skips empty parts
            bits |= _range_bits(expr, lo, hi, names)
    return bits


_EPOCH = datetime(1970, 1, 1)


def _offset_at(unix: int, loc: tzinfo) -> int:
    off = datetime.fromtimestamp(unix, loc).utcoffset()
    return int(off.total_seconds()) if off else 0


def _date(y: int, mo: int, d: int, h: int, loc: tzinfo) -> datetime:
    """Go time.Date(y, mo, d, h, 0, 0, 0, loc): month/day overflow normalised, and a wall time that does not exist
    or exists twice (daylight saving) resolved as Go does: the offset in effect at the wall time read as UTC, looked
    up again at the instant that gives (time.go Date)."""
    y += (mo - 1) // 12
    mo = (mo - 1) % 12 + 1
    naive = datetime(y, mo, 1) + timedelta(days=d - 1, hours=h)
    unix = (naive - _EPOCH) // timedelta(seconds=1)
    off = _offset_at(unix, loc)
    if off:
        off = _offset_at(unix - off, loc)
    return datetime.fromtimestamp(unix - off, loc)


def _add(t: datetime, delta: timedelta, loc: tzinfo) -> datetime:
    """Go Time.Add: an absolute duration, whatever the wall clock does (DST)."""
    return (t.astimezone(UTC) + delta).astimezone(loc)


def _truncate(t: datetime, unit: int, loc: tzinfo) -> datetime:
    ns = int(t.timestamp()) * SECOND
    ns -= ns % unit
    return datetime.fromtimestamp(ns // SECOND, UTC).astimezone(loc)


def _day_matches(dom: int, dow: int, t: datetime) -> bool:
    dom_match = (1 << t.day) & dom != 0
    dow_match = (1 << ((t.weekday() + 1) % 7)) & dow != 0  # Go: Sunday == 0
    if dom & STAR_BIT or dow & STAR_BIT:
        return dom_match and dow_match
    return dom_match or dow_match


def parse_cron(pattern: str, loc: tzinfo | None, ts: int) -> int:
    """cron.go parseCron: the first time strictly after ``ts`` (to the second) that the pattern matches."""
    fields = pattern.split()
    if len(fields) != 6:
        raise CronError(f"pattern requires 6 fields, got {len(fields)}")
    second, minute, hour, dom, month, dow = (_field_bits(f, b) for f, b in zip(fields, _BOUNDS))
    loc = loc or UTC
    start = ts - ts % SECOND + SECOND
    t = datetime.fromtimestamp(start // SECOND, UTC).astimezone(loc)
    truncated = False
    year_limit = t.year + 5
    while True:  # the WRAP label of cron.go
        if t.year > year_limit:
            raise CronError("pattern exceeds maximum range")
        wrapped = False
        while not (1 << t.month) & month:
            if not truncated:
                truncated = True
                t = _date(t.year, t.month, 1, 0, loc)
            t = _date(t.year, t.month + 1, t.day, t.hour, loc)
            if t.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(dom, dow, t):
            if not truncated:
                truncated = True
                t = _date(t.year, t.month, t.day, 0, loc)
            t = _date(t.year, t.month, t.day + 1, t.hour, loc)
            if t.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.hour) & hour:
            if not truncated:
                truncated = True
                t = _date(t.year, t.month, t.day, t.hour, loc)
            t = _add(t, timedelta(hours=1), loc)
            if t.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.minute) & minute:
            if not truncated:
                truncated = True
                t = _truncate(t, 60 * SECOND, loc)
            t = _add(t, timedelta(minutes=1), loc)
            if t.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.second) & second:
            if not truncated:
                truncated = True
                t = _truncate(t, SECOND, loc)
            t = _add(t, timedelta(seconds=1), loc)
            if t.second == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return int(t.timestamp()) * SECOND


def parse_at(text: str) -> int | None:
    """Go time.Parse(time.RFC3339, text) as Unix nanoseconds, or None."""
    try:
        return parse_time(text).unix_ns
    except TimeParseError:
        return None


def parse_msg_schedule(pattern: str, loc: tzinfo | None, ts: int, now: int) -> tuple[int | None, bool, bool]:
    """scheduler.go parseMsgSchedule: ``(next_ns, repeat, ok)``; ``next_ns`` is None for no schedule (an empty
    pattern, or ``@at`` Go's zero time, which its callers take for none: ``schedule.IsZero()``)."""
    if not pattern:
        return None, False, True
    if pattern.startswith("@at "):
        if loc is not None:  # a time zone is not supported for @at
            return 0, False, False
        at = parse_at(pattern[4:])
        if at is None:
            return 0, False, False
        return (None if at == ZERO_TIME_NS else at), False, True
    if pattern.startswith("@every "):
        if loc is not None:
            return 0, False, False
        try:
            dur = parse_go_duration(pattern[7:])
        except DurationParseError:
            return 0, False, False
        if dur < SECOND:  # intervals of at least a second
            return 0, False, False
        nxt = go_round_second(ts) + dur
        if nxt < now:  # would fire several times (after a restart): skip ahead, fire once
            nxt = go_round_second(now) + dur
        return nxt, True, True
    pattern = PREDEFINED.get(pattern, pattern)
    try:
        nxt = parse_cron(pattern, loc, ts)
        if nxt < now:
            nxt = parse_cron(pattern, loc, go_round_second(now))
    except (CronError, OverflowError, ValueError, OSError):
        return 0, False, False
    return nxt, True, True

