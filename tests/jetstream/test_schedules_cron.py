"""The schedule patterns (server/jetstream/schedules_cron.py) against nats-server's rules (server/cron.go,
scheduler.go parseMsgSchedule): pure functions, no server.  Which patterns are valid is also checked on both
servers in test_schedules.py; the fire times here are worked out by hand from cron.go's algorithm."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from skiff.server.jetstream.schedules_cron import CronError, go_round_second, parse_cron, parse_msg_schedule

SECOND = 1_000_000_000
FROM = "2030-01-07T10:00:00.400"  # a Monday


def ns(text: str) -> int:
    d = datetime.fromisoformat(text).replace(tzinfo=timezone.utc)
    return int(d.replace(microsecond=0).timestamp()) * SECOND + d.microsecond * 1000


@pytest.mark.parametrize("pattern, tz, expected", [
    ("* * * * * *", None, "2030-01-07T10:00:01"),
    ("0 * * * * *", None, "2030-01-07T10:01:00"),
    ("30 15 10 * * *", None, "2030-01-07T10:15:30"),
    ("0 0 10 * * *", None, "2030-01-08T10:00:00"),  # strictly after: 10:00:00 today has passed
    ("5/20 * * * * *", None, "2030-01-07T10:00:05"),  # N/step is N-max/step
    ("0 0 0 1 1 *", None, "2031-01-01T00:00:00"),
    ("0 0 0 * * sun", None, "2030-01-13T00:00:00"),
    ("0 0 0 ? * SAT", None, "2030-01-12T00:00:00"),
    ("0 0 0 13 * fri", None, "2030-01-11T00:00:00"),  # both days restricted: either matches
    ("0 0 0 13 * *", None, "2030-01-13T00:00:00"),  # a star day-of-week: day-of-month alone
    ("0 0 0 29 feb *", None, "2032-02-29T00:00:00"),
    ("0 0 12 1 jan-mar/2 *", None, "2030-03-01T12:00:00"),
    ("0 0 9 * * *", ZoneInfo("Europe/Amsterdam"), "2030-01-08T08:00:00"),
    ("0 0 9 * * *", ZoneInfo("Asia/Kolkata"), "2030-01-08T03:30:00"),
])
def test_next_fire(pattern, tz, expected):
    assert parse_cron(pattern, tz, ns(FROM)) == ns(expected)


@pytest.mark.parametrize("pattern", [
    "* * * * *", "* * * * * * *", "60 * * * * *", "* 60 * * * *", "* * 24 * * *", "* * * 0 * *", "* * * 32 * *",
    "* * * * 13 *", "* * * * * 7", "*/0 * * * * *", "1-2-3 * * * * *", "1/2/3 * * * * *", "5-1 * * * * *",
    "a * * * * *", "-1 * * * * *", "0 0 0 30 2 *", "0 0 0 31 4 *", "0 0 0 L * *", "0 0 0 * * 1#2",
])
def test_invalid_patterns(pattern):
    with pytest.raises(CronError):
        parse_cron(pattern, None, ns(FROM))


def test_go_round_second_rounds_half_up():
    assert go_round_second(ns("2030-01-07T10:00:00.499")) == ns("2030-01-07T10:00:00")
    assert go_round_second(ns("2030-01-07T10:00:00.500")) == ns("2030-01-07T10:00:01")


def test_every_from_the_rounded_reference_and_skipping_missed_intervals():
    now = ns(FROM)
    assert parse_msg_schedule("@every 10s", None, ns("2030-01-07T10:00:00.5"), now) == (
        ns("2030-01-07T10:00:11"), True, True)
    # A reference long past: one interval after now (rounded), not a burst of missed fires.
    assert parse_msg_schedule("@every 1m", None, ns("2030-01-07T09:00:00"), now) == (
        ns("2030-01-07T10:01:00"), True, True)
    assert parse_msg_schedule("@every 999ms", None, now, now)[2] is False
    assert parse_msg_schedule("@every 1s", timezone.utc, now, now)[2] is False  # no zone with @every


def test_at_and_predefined():
    now = ns(FROM)
    assert parse_msg_schedule("@at 2020-01-01T00:00:00Z", None, now, now) == (ns("2020-01-01T00:00:00"), False, True)
    assert parse_msg_schedule("@at 2030-01-07T12:00:00+02:00", None, now, now)[0] == ns("2030-01-07T10:00:00")
    assert parse_msg_schedule("@at 2030-01-07T12:00:00Z", ZoneInfo("UTC"), now, now)[2] is False
    assert parse_msg_schedule("@at  2030-01-07T12:00:00Z", None, now, now)[2] is False
    assert parse_msg_schedule("@hourly", None, now, now) == (ns("2030-01-07T11:00:00"), True, True)
    assert parse_msg_schedule("@weekly", None, now, now) == (ns("2030-01-13T00:00:00"), True, True)
    assert parse_msg_schedule("@midnight", None, now, now) == (ns("2030-01-08T00:00:00"), True, True)
    assert parse_msg_schedule("", None, now, now) == (None, False, True)
    assert parse_msg_schedule("@at 0001-01-01T00:00:00Z", None, now, now) == (None, False, True)  # IsZero
    assert parse_msg_schedule("@at 1970-01-01T00:00:00Z", None, now, now) == (0, False, True)
    # A cron reference in the past skips to the next fire after now.
    assert parse_msg_schedule("0 0 * * * *", None, ns("2030-01-01T00:00:00"), now)[0] == ns("2030-01-07T11:00:00")


def test_wall_times_that_do_not_exist_or_exist_twice_resolve_as_go():
    """time.Date: 02:00 on the spring-forward day in New York is read with the offset after the jump (01:00 EST,
    06:00Z); 01:00 on the fall-back day is the first of the two (EDT).  Python's fold=0 would give 03:00 EDT."""
    from skiff.server.jetstream.schedules_cron import _date

    tz = ZoneInfo("America/New_York")
    assert _date(2030, 3, 10, 2, tz).timestamp() * SECOND == ns("2030-03-10T06:00:00")
    assert _date(2030, 11, 3, 1, tz).timestamp() * SECOND == ns("2030-11-03T05:00:00")
    assert _date(2030, 13, 32, 0, tz).timestamp() * SECOND == ns("2031-02-01T05:00:00")  # AddDate normalises
    # robfig/cron semantics: a daily 02:30 skips the day it does not exist.
    assert parse_cron("0 30 2 * * *", tz, ns("2030-03-10T05:00:00")) == ns("2030-03-11T06:30:00")
