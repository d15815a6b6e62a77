"""Go time.Time JSON and time.Duration text."""
from __future__ import annotations

import pytest

from skiff.protocol.jsapi.timefmt import (
    ZERO_TIME_NS, DurationParseError, GoTime, TimeParseError, format_go_duration, format_time, parse_go_duration,
    parse_time,
)


@pytest.mark.parametrize("ns,text", [
    (0, "0s"), (1, "1ns"), (1500, "1.5µs"), (500_000_000, "500ms"), (1_500_000, "1.5ms"), (10**9, "1s"),
    (90 * 10**9, "1m30s"), (15 * 60 * 10**9, "15m0s"), (3600 * 10**9, "1h0m0s"), (1_500_000_000, "1.5s"),
    (-2 * 10**9, "-2s"), (3723 * 10**9 + 5 * 10**8, "1h2m3.5s"),
])
def test_format_go_duration(ns, text):
    assert format_go_duration(ns) == text
    assert parse_go_duration(text) == ns


def test_parse_go_duration_errors():
    with pytest.raises(DurationParseError, match='time: missing unit in duration "5"'):
        parse_go_duration("5")
    with pytest.raises(DurationParseError, match='unknown unit "x"'):
        parse_go_duration("5x")


@pytest.mark.parametrize("text", [
    "2020-01-01T00:00:00Z", "2020-01-01T00:00:00.1234Z", "2026-11-21T20:30:20.518666633Z",
    "2020-01-01T00:00:00+02:00", "2020-01-01T00:00:00.5-07:30", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z",
])
def test_time_round_trip(text):
    assert format_time(parse_time(text)) == text


def test_zero_time():
    assert format_time(ZERO_TIME_NS) == "0001-01-01T00:00:00Z"
    assert GoTime.zero().is_zero and parse_time("0001-01-01T00:00:00Z").is_zero
    assert format_time(0) == "1970-01-01T00:00:00Z"


def test_offset_is_kept_but_instant_is_utc():
    t = parse_time("2020-01-01T02:00:00+02:00")
    assert t.unix_ns == parse_time("2020-01-01T00:00:00Z").unix_ns and t.offset == 7200
    assert t.utc().to_json() == "2020-01-01T00:00:00Z"


def test_comma_fraction_accepted():
    assert parse_time("2020-02-01T23:00:00,5Z").unix_ns % 10**9 == 5 * 10**8


@pytest.mark.parametrize("text,msg", [
    ("bad", 'parsing time "bad" as "2006-01-02T15:04:05Z07:00": cannot parse "bad" as "2006"'),
    ("", 'parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"'),
    ("2020-01-01", 'parsing time "2020-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'),
    ("2020-02-01t23:00:00Z", 'parsing time "2020-02-01t23:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse "t23:00:00Z" as "T"'),
    ("2020-02-01T23:00:00.Z", 'parsing time "2020-02-01T23:00:00.Z" as "2006-01-02T15:04:05Z07:00": cannot parse ".Z" as "Z07:00"'),
    # time.quote: control and non-ASCII characters are \xNN per UTF-8 byte (CONSUMER.PAUSE, nats-server 2.15.1)
    ("\x00", 'parsing time "\\x00" as "2006-01-02T15:04:05Z07:00": cannot parse "\\x00" as "2006"'),
    ("\u00e9", 'parsing time "\\xc3\\xa9" as "2006-01-02T15:04:05Z07:00": cannot parse "\\xc3\\xa9" as "2006"'),
    ("2020-02-01T23:00:00+2:00", 'parsing time "2020-02-01T23:00:00+2:00" as "2006-01-02T15:04:05Z07:00": cannot parse "+2:00" as "Z07:00"'),
    ("2020-13-01T00:00:00Z", 'parsing time "2020-13-01T00:00:00Z": month out of range'),
    ("2020-02-30T00:00:00Z", 'parsing time "2020-02-30T00:00:00Z": day out of range'),
    ("2020-02-01T25:00:00Z", 'parsing time "2020-02-01T25:00:00Z": hour out of range'),
])
def test_parse_errors_match_go(text, msg):
    with pytest.raises(TimeParseError) as e:
        parse_time(text)
    assert str(e.value) == msg
