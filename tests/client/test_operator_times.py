"""User JWT connect windows: ``times`` (start/end "HH:MM:SS") in ``times_location`` (nats-server jwt.go
validateTimesAt, auth.go "Outside connect times", client.go setExpiration), against both servers.

A window is read on today's date in its location (the server's own zone when none is given); a start after the end
crosses midnight.  A client outside every window gets ``Authorization Violation``; a client inside is closed with
``User Authentication Expired`` when its window ends.  Windows here are laid around the current time, so they hold
at any hour (a window that wraps past midnight is a midnight-crossing one and covers the same instants).
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.client.test_operator import A, assert_accepted, assert_refused, raw_connect, srv, user  # noqa: F401


def window(start: timedelta, end: timedelta, zone: str = "") -> dict:
    now = datetime.now(ZoneInfo(zone)) if zone else datetime.now()
    return {"start": (now + start).strftime("%H:%M:%S"), "end": (now + end).strftime("%H:%M:%S")}


HOUR = timedelta(hours=1)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata", ""])
def test_inside_a_window_connects(srv, zone):
    times = [window(-HOUR, HOUR, zone)]
    kw = {"times_location": zone} if zone else {}
    assert_accepted(srv, *user(A, times=times, **kw)).close()


def test_outside_every_window_is_refused(srv):
    assert_refused(srv, *user(A, times=[window(HOUR, 2 * HOUR, "UTC"), window(-3 * HOUR, -2 * HOUR, "UTC")],
                             times_location="UTC"))


def test_one_window_of_several_is_enough(srv):
    times = [window(HOUR, 2 * HOUR, "UTC"), window(-HOUR, HOUR, "UTC")]
    assert_accepted(srv, *user(A, times=times, times_location="UTC")).close()


def test_the_window_is_read_in_its_location(srv):
    # New York's current hour is Tokyo's 13 or 14 hours later: the same clock times exclude Tokyo's now.
    times = [window(-HOUR, HOUR, "America/New_York")]
    assert_refused(srv, *user(A, times=times, times_location="Asia/Tokyo"))


def test_a_window_crossing_midnight(srv):
    # Start after end: from the start to the end of the next day, so everything but (end, start).
    assert_accepted(srv, *user(A, times=[window(HOUR, timedelta(minutes=30), "UTC")], times_location="UTC")).close()
    assert_refused(srv, *user(A, times=[window(timedelta(minutes=30), -timedelta(minutes=30), "UTC")],
                              times_location="UTC"))


@pytest.mark.parametrize("times,location", [
    ([{"start": "25:00:00", "end": "23:00:00"}], "UTC"),
    ([{"start": "00:00:00", "end": "23:59:5"}], "UTC"),
    ([{"start": "00:00:00"}], "UTC"),
    ([{"start": "00:00:00", "end": "23:59:59"}], "Mars/Olympus_Mons"),
], ids=["hour out of range", "one-digit seconds", "no end", "unknown location"])
def test_a_window_that_does_not_parse_lets_nobody_in(srv, times, location):
    assert_refused(srv, *user(A, times=times, times_location=location))


def test_connection_closed_when_its_window_ends(srv):
    c = assert_accepted(srv, *user(A, times=[window(-HOUR, timedelta(seconds=3), "UTC")], times_location="UTC"))
    start = time.monotonic()
    try:
        line = c.read_until(b"\r\n", timeout=6)
        if line == b"PING\r\n":  # nats-server's first PING to a client comes 2 s after CONNECT
            line = c.read_until(b"\r\n", timeout=6)
        assert line == b"-ERR 'User Authentication Expired'\r\n"
        c.assert_closed()
    finally:
        c.close()
    assert time.monotonic() - start < 4.5
