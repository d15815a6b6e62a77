"""Message schedules on Skiff's ManualClock: intervals, cron, time zones, restarts, without waiting.

The wall clock starts at a fixed instant so that every fire time can be written down; the scheduler's timer is a
``clock.call_later`` like every other timer in Skiff, so ``clock.advance()`` runs it.
"""
from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server

pytestmark = pytest.mark.skiff_only

SECOND = 1_000_000_000


def ts(text: str) -> int:
    d = datetime.fromisoformat(text).replace(tzinfo=timezone.utc)
    return int(d.replace(microsecond=0).timestamp()) * SECOND + d.microsecond * 1000


class Env:
    def __init__(self, clock: ManualClock, store_dir: str) -> None:
        self.clock = clock
        self.store_dir = store_dir
        self.srv = None
        self.nc = None

    async def start(self) -> None:
        # No PINGs: a long clock.advance() would otherwise make the test client look stale.
        self.srv = Server(clock=self.clock, jetstream=True, store_dir=self.store_dir, ping_interval=10**9)
        await self.srv.start()
        self.nc = await nats.connect(self.srv.client_url, allow_reconnect=False)

    async def stop(self) -> None:
        await self.nc.close()
        await self.srv.shutdown()

    async def api(self, suffix: str, body=b"") -> dict:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        return json.loads((await self.nc.request("$JS.API." + suffix, body, timeout=2)).data)

    async def pub(self, subject: str, data: bytes = b"x", hdrs=None) -> dict:
        return json.loads((await self.nc.request(subject, data, headers=hdrs, timeout=2)).data)

    async def create(self, name: str, **cfg) -> dict:
        r = await self.api(f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"],
                                                     "allow_msg_schedules": True, **cfg})
        assert "error" not in r, r
        return r

    async def state(self, name: str) -> dict:
        return (await self.api(f"STREAM.INFO.{name}", {"subjects_filter": ">"}))["state"]

    async def msg(self, name: str, seq: int):
        m = (await self.api(f"STREAM.MSG.GET.{name}", {"seq": seq}))["message"]
        return m["subject"], base64.b64decode(m.get("hdrs", "")), base64.b64decode(m.get("data", "")), m["time"]

    async def last(self, name: str, subject: str):
        m = (await self.api(f"STREAM.MSG.GET.{name}", {"last_by_subj": subject}))["message"]
        return m["seq"], base64.b64decode(m.get("hdrs", "")), m["time"]


@pytest.fixture
async def env(tmp_path):
    e = Env(ManualClock(start_ns=ts("2030-01-07T10:00:00.400")), str(tmp_path))  # a Monday
    await e.start()
    yield e
    await e.stop()


def next_hdr(hdr: bytes) -> str:
    for line in hdr.split(b"\r\n"):
        if line.startswith(b"Nats-Schedule-Next: "):
            return line[len(b"Nats-Schedule-Next: "):].decode()
    raise AssertionError(hdr)


async def test_every_fires_on_rounded_intervals(env, target):
    await env.create("E", storage="memory")
    await env.pub("e.sched", b"tick", {"Nats-Schedule": "@every 10s", "Nats-Schedule-Target": "e.t"})
    # Published at 10:00:00.4: round(ts) + 10s = 10:00:10.
    env.clock.advance(9.59)
    assert (await env.state("E"))["last_seq"] == 1
    env.clock.advance(0.02)
    seq, hdr, at = await env.last("E", "e.t")
    assert (seq, at) == (2, "2030-01-07T10:00:10Z")
    assert hdr == b"NATS/1.0\r\nNats-Scheduler: e.sched\r\nNats-Schedule-Next: 2030-01-07T10:00:20Z\r\n\r\n"
    env.clock.advance(10)
    env.clock.advance(10)
    st = await env.state("E")
    assert st["last_seq"] == 4 and st["subjects"] == {"e.sched": 1, "e.t": 3}
    seq, hdr, at = await env.last("E", "e.t")
    assert (seq, at, next_hdr(hdr)) == (4, "2030-01-07T10:00:30Z", "2030-01-07T10:00:40Z")


async def test_at_fires_once_then_no_timer_is_left(env, target):
    await env.create("A", storage="memory")
    await env.pub("a.sched", b"once", {"Nats-Schedule": "@at 2030-01-07T10:05:00Z", "Nats-Schedule-Target": "a.t"})
    env.clock.advance(299.5)
    assert (await env.state("A"))["last_seq"] == 1
    env.clock.advance(0.1)
    st = await env.state("A")
    assert st["subjects"] == {"a.t": 1} and st["last_seq"] == 2  # fired, and the schedule was purged
    assert next_hdr((await env.msg("A", 2))[1]) == "purge"
    sched = env.srv.jetstream.streams["A"].scheduling
    assert sched.schedules == {} and sched._timer is None
    env.clock.advance(3600)
    assert (await env.state("A"))["last_seq"] == 2


async def test_cron_every_five_minutes_on_weekdays(env, target):
    await env.create("C", storage="memory")
    await env.pub("c.sched", b"c", {"Nats-Schedule": "0 */5 9-10 * * mon-fri", "Nats-Schedule-Target": "c.t"})
    env.clock.advance(299.5)  # 10:04:59.9
    assert (await env.state("C"))["last_seq"] == 1
    env.clock.advance(0.1)
    seq, hdr, at = await env.last("C", "c.t")
    assert (at, next_hdr(hdr)) == ("2030-01-07T10:05:00Z", "2030-01-07T10:10:00Z")
    env.clock.advance(55 * 60)  # to 11:00: fires at 10:10 .. 10:55, then nothing until the next morning
    st = await env.state("C")
    assert st["subjects"]["c.t"] == 11
    seq, hdr, at = await env.last("C", "c.t")
    assert (at, next_hdr(hdr)) == ("2030-01-07T10:55:00Z", "2030-01-08T09:00:00Z")


async def test_cron_in_a_time_zone(env, target):
    await env.create("Z", storage="memory")
    # 09:30 in Amsterdam is 08:30 UTC in January: the first fire is the next day.
    await env.pub("z.sched", b"z", {"Nats-Schedule": "0 30 9 * * *", "Nats-Schedule-Target": "z.t",
                                    "Nats-Schedule-Time-Zone": "Europe/Amsterdam"})
    env.clock.advance(22 * 3600 + 29 * 60 + 59.5)  # 08:29:59.9 UTC on the 8th
    assert (await env.state("Z"))["last_seq"] == 1
    env.clock.advance(0.2)
    seq, hdr, at = await env.last("Z", "z.t")
    assert (at, next_hdr(hdr)) == ("2030-01-08T08:30:00Z", "2030-01-09T09:30:00+01:00")


async def test_schedule_ttl_and_rollup_on_the_fired_message(env, target):
    await env.create("T", storage="memory", allow_msg_ttl=True)
    await env.pub("t.sched", b"t", {"Nats-Schedule": "@every 5s", "Nats-Schedule-Target": "t.t",
                                    "Nats-Schedule-TTL": "7s", "Nats-Schedule-Rollup": "sub"})
    env.clock.advance(4.7)
    seq, hdr, _ = await env.last("T", "t.t")
    assert hdr == (b"NATS/1.0\r\nNats-Scheduler: t.sched\r\nNats-Schedule-Next: 2030-01-07T10:00:10Z\r\n"
                   b"Nats-TTL: 7s\r\nNats-Rollup: sub\r\n\r\n")
    env.clock.advance(5)
    assert (await env.state("T"))["subjects"] == {"t.sched": 1, "t.t": 1}  # rolled up
    await env.api("STREAM.PURGE.T", {"filter": "t.sched"})  # the schedule goes; the last fired message expires
    env.clock.advance(7.1)
    st = await env.state("T")
    assert st["messages"] == 0 and st["last_seq"] == 3


async def test_source_sampling_reads_the_latest_message(env, target):
    await env.create("S", storage="memory")
    await env.pub("s.sched", b"own", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "s.t",
                                      "Nats-Schedule-Source": "s.temp"})
    env.clock.advance(0.7)
    assert (await env.last("S", "s.t"))[0] == 2
    assert (await env.msg("S", 2))[2] == b"own"  # nothing sampled yet
    await env.pub("s.temp", b"21C", {"Unit": "C"})
    env.clock.advance(1)
    subj, hdr, data, _ = await env.msg("S", 4)
    assert (subj, data) == ("s.t", b"21C") and hdr.startswith(b"NATS/1.0\r\nUnit: C\r\nNats-Scheduler: s.sched\r\n")
    await env.pub("s.temp", b"22C")
    env.clock.advance(1)
    assert (await env.msg("S", 6))[2] == b"22C"


async def test_delete_and_replace_a_schedule(env, target):
    await env.create("D", storage="memory")
    await env.pub("d.sched", b"1", {"Nats-Schedule": "@every 1m", "Nats-Schedule-Target": "d.t"})
    await env.pub("d.sched", b"2", {"Nats-Schedule": "@every 2m", "Nats-Schedule-Target": "d.t"})  # replaces
    env.clock.advance(60)
    assert (await env.state("D"))["subjects"] == {"d.sched": 1}
    env.clock.advance(60)
    assert (await env.msg("D", 3))[2] == b"2"
    await env.api("STREAM.MSG.DELETE.D", {"seq": 2})
    env.clock.advance(600)
    assert (await env.state("D"))["last_seq"] == 3
    assert env.srv.jetstream.streams["D"].scheduling.schedules == {}


async def test_schedules_survive_a_restart(env, target):
    """As nats-server's file store (its sched.db holds each schedule's next fire): a repeating schedule resumes at
    the Nats-Schedule-Next of its last fire, and what was missed while the server was down fires once at start
    (the oracle does the same: tests/jetstream/test_schedules.py cannot restart nats-server, this was checked by
    hand with @every 3s and a 7 s stop)."""
    await env.create("R", storage="file")
    await env.pub("r.every", b"e", {"Nats-Schedule": "@every 1m", "Nats-Schedule-Target": "r.t"})
    await env.pub("r.at", b"a", {"Nats-Schedule": "@at 2030-01-07T10:30:00Z", "Nats-Schedule-Target": "r.u"})
    await env.pub("r.cron", b"c", {"Nats-Schedule": "0 0 12 * * *", "Nats-Schedule-Target": "r.v"})
    env.clock.advance(60)  # 10:01:00.4: the first interval fired at 10:01:00
    assert (await env.last("R", "r.t"))[2] == "2030-01-07T10:01:00Z"
    await env.stop()
    env.clock.advance(20)  # down for 20 s
    await env.start()
    env.clock.advance(39.5)  # 10:01:59.9: resumes at the stored Next, 10:02:00, not one interval after the start
    assert (await env.state("R"))["last_seq"] == 4
    env.clock.advance(0.2)
    assert (await env.last("R", "r.t"))[2] == "2030-01-07T10:02:00Z"
    await env.stop()
    env.clock.advance(3600)  # down across the @at and many intervals: 11:02:00.1
    await env.start()
    env.clock.advance(0.2)
    assert (await env.state("R"))["last_seq"] == 5  # the scheduler's first tick is 250 ms after the start
    env.clock.advance(0.1)
    st = await env.state("R")
    assert st["subjects"] == {"r.every": 1, "r.cron": 1, "r.t": 3, "r.u": 1}  # each fired once; @at purged
    seq, hdr, at = await env.last("R", "r.t")
    assert (at, next_hdr(hdr)) == ("2030-01-07T11:02:00.35Z", "2030-01-07T11:03:00Z")
    env.clock.advance(59.6)
    assert (await env.last("R", "r.t"))[2] == "2030-01-07T11:03:00Z"
    env.clock.advance(3600 - 60)  # 12:02: the cron fired at noon
    seq, hdr, at = await env.last("R", "r.v")
    assert (at, next_hdr(hdr)) == ("2030-01-07T12:00:00Z", "2030-01-08T12:00:00Z")


async def test_an_early_wake_up_waits_for_the_fire_time(env, target):
    """The event loop's timers have millisecond granularity and run on the monotonic clock: a wake-up just before
    the fire time must not store the message early, nor push it to the next 250 ms tick."""
    await env.create("W", storage="memory")
    await env.pub("w.sched", b"w", {"Nats-Schedule": "@at 2030-01-07T10:00:10Z", "Nats-Schedule-Target": "w.t"})
    sched = env.srv.jetstream.streams["W"].scheduling
    env.clock.advance(9.595)  # 10:00:09.995
    sched._timer.cancel()
    sched.run()  # as if the loop woke the timer 5 ms early
    assert (await env.state("W"))["last_seq"] == 1
    env.clock.advance(0.0055)
    assert (await env.state("W"))["last_seq"] == 1
    env.clock.advance(0.001)  # 10:00:10.0015: just after
    assert (await env.msg("W", 2))[3] == "2030-01-07T10:00:10.001Z"
