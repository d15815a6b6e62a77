"""Message schedules (``allow_msg_schedules``, ADR-51) against both servers: the publish checks and their error
codes, the stream config rules, and short real-time firings (an ``@at`` in the past fires on the scheduler's
next tick, 250 ms after the schedule is stored; ``@every 1s`` and cron fire on whole seconds).

Time-driven behaviour (intervals, cron, restarts) is tested on Skiff with a ManualClock in
test_schedules_clock.py.
"""
from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import datetime, timedelta, timezone

import nats
import pytest

PATTERN_INVALID = 10189
TARGET_INVALID = 10190
TTL_INVALID = 10191
ROLLUP_INVALID = 10192
SOURCE_INVALID = 10203
SCHEDULER_INVALID = 10212
TZ_INVALID = 10223
TTL_DISABLED = 10166


def at(seconds: float) -> str:
    return "@at " + (datetime.now(timezone.utc) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def err_code(ack: dict) -> int | None:
    return ack.get("error", {}).get("err_code")


async def get(jsc, name: str, seq: int):
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": seq})
    if "error" in r:
        return None
    m = r["message"]
    return m["subject"], base64.b64decode(m.get("hdrs", "")), base64.b64decode(m.get("data", ""))


async def wait_last_seq(jsc, name: str, seq: int, timeout: float = 3.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = (await jsc.info(name, {"subjects_filter": ">"}))["state"]
        if st["last_seq"] >= seq or time.monotonic() > deadline:
            return st
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("hdrs, code", [
    ({"Nats-Schedule": "@at 2040-01-01T00:00:00Z", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "@at 2040-01-01T00:00:00+02:00", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "@at bad", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "@at 2040-01-01", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "@every 1h30m", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "@every 500ms", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "@every -5s", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "@every 5", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "@hourly", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "@annually", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "@fortnightly", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "0 30 9 * * mon-fri", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "*/15 * * ? JAN,jul *", "Nats-Schedule-Target": "{n}.t"}, None),
    ({"Nats-Schedule": "0 0 * * *", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),  # five fields
    ({"Nats-Schedule": "60 * * * * *", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "0 0 0 30 2 *", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),  # never within 5 years
    ({"Nats-Schedule": "0 0 0 L * *", "Nats-Schedule-Target": "{n}.t"}, PATTERN_INVALID),
    ({"Nats-Schedule": "0 0 * * * *", "Nats-Schedule-Target": "{n}.t",
      "Nats-Schedule-Time-Zone": "Europe/Amsterdam"}, None),
    ({"Nats-Schedule": "0 0 * * * *", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Time-Zone": "Nope/Zone"},
     TZ_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Time-Zone": "UTC"},
     PATTERN_INVALID),  # no time zone with @every / @at, not even UTC
    ({"Nats-Schedule-Time-Zone": "Nope/Zone"}, TZ_INVALID),  # checked even without a schedule
    ({"Nats-Schedule": "@every 1s"}, TARGET_INVALID),
    ({"Nats-Schedule": "@hourly", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Rollup": "Sub"}, ROLLUP_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.sched"}, TARGET_INVALID),  # itself
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "elsewhere"}, TARGET_INVALID),  # not in the stream
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.*"}, TARGET_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-TTL": "bad"}, TTL_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-TTL": "5s"}, TTL_DISABLED),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Rollup": "all"},
     ROLLUP_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Rollup": "sub"}, None),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Rollup": "all"}, ROLLUP_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Rollup": "SUB"}, None),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Source": "{n}.t"},
     SOURCE_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Source": "{n}.sched"},
     SOURCE_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Source": "x.y"},
     SOURCE_INVALID),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "{n}.t", "Nats-Schedule-Source": "{n}.src"}, None),
    ({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "{n}.sched"}, SCHEDULER_INVALID),  # names itself
    ({"Nats-Schedule-Next": "later", "Nats-Scheduler": "{n}.other"}, SCHEDULER_INVALID),
    ({"Nats-Schedule-Next": "purge"}, SCHEDULER_INVALID),
    ({"Nats-Scheduler": "{n}.other"}, SCHEDULER_INVALID),
    ({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "{n}.nothing"}, None),  # nothing there: allowed
])
async def test_schedule_headers(jsc, hdrs, code):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True)
    ack = await jsc.pub(f"{name}.sched", b"x", {k: v.format(n=name) for k, v in hdrs.items()})
    assert err_code(ack) == code, ack
    if code is None:
        assert ack == {"stream": name, "seq": 1}


async def test_schedule_ttl_with_allow_msg_ttl(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True, allow_msg_ttl=True)
    ack = await jsc.pub(f"{name}.sched", b"x", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": f"{name}.t",
                                                "Nats-Schedule-TTL": "never"})
    assert ack == {"stream": name, "seq": 1}


async def test_schedule_is_stored_with_rollup_and_replaces_the_previous_one(jsc):
    name = jsc.name()
    await jsc.create(name, storage="file", allow_msg_schedules=True)
    hdrs = {"Nats-Schedule": "@at 2040-01-01T00:00:00Z", "Nats-Schedule-Target": f"{name}.t", "X": "1"}
    assert (await jsc.pub(f"{name}.sched", b"one", hdrs))["seq"] == 1
    assert (await jsc.pub(f"{name}.sched", b"two", hdrs))["seq"] == 2
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["first_seq"]) == (1, 2)
    subj, hdr, data = await get(jsc, name, 2)
    assert hdr == (b"NATS/1.0\r\nNats-Schedule: @at 2040-01-01T00:00:00Z\r\nNats-Schedule-Target: " + name.encode()
                   + b".t\r\nX: 1\r\nNats-Rollup: sub\r\n\r\n")
    assert data == b"two"


async def test_purge_header_removes_a_schedule_and_refuses_a_plain_subject(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True)
    await jsc.pub(f"{name}.sched", b"x", {"Nats-Schedule": "@at 2040-01-01T00:00:00Z",
                                          "Nats-Schedule-Target": f"{name}.t"})
    await jsc.pub(f"{name}.plain", b"x")
    ack = await jsc.pub(f"{name}.p", b"", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": f"{name}.plain"})
    assert err_code(ack) == SCHEDULER_INVALID
    ack = await jsc.pub(f"{name}.p", b"", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": f"{name}.sched"})
    assert ack == {"stream": name, "seq": 3}
    st = (await jsc.info(name, {"subjects_filter": ">"}))["state"]
    assert st["subjects"] == {f"{name}.plain": 1, f"{name}.p": 1}


# ------------------------------------------------------------------------------------------------ stream config
@pytest.mark.parametrize("cfg, desc", [
    ({"discard": "new"}, "message scheduling cannot use discard new"),
    ({"allow_msg_counter": True}, "counter stream cannot use message schedules"),
])
async def test_config_refusals(jsc, cfg, desc):
    name = jsc.name()
    r = await jsc.api(f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory",
                                                 "allow_msg_schedules": True, **cfg})
    assert r["error"] == {"code": 500, "err_code": 10052, "description": desc}


async def test_config_enables_rollups_and_cannot_be_disabled(jsc):
    name = jsc.name()
    r = await jsc.create(name, storage="memory", allow_msg_schedules=True, deny_purge=True)
    assert (r["config"]["allow_rollup_hdrs"], r["config"]["deny_purge"]) == (True, False)
    assert r["config"]["metadata"]["_nats.req.level"] == "2"
    cfg = {**r["config"], "allow_msg_schedules": False}
    r = await jsc.api(f"STREAM.UPDATE.{name}", cfg)
    assert r["error"] == {"code": 500, "err_code": 10052, "description": "message schedules can not be disabled"}


async def test_schedules_enabled_by_update(jsc):
    name = jsc.name()
    r = await jsc.create(name, storage="memory")
    past = "@at 2020-01-01T00:00:00Z"
    hdrs = {"Nats-Schedule": past, "Nats-Schedule-Target": f"{name}.t"}
    assert err_code(await jsc.pub(f"{name}.sched", b"x", hdrs)) == 10188
    r = await jsc.api(f"STREAM.UPDATE.{name}", {**r["config"], "allow_msg_schedules": True})
    assert r["config"]["allow_msg_schedules"] is True and r["config"]["allow_rollup_hdrs"] is True
    assert (await jsc.pub(f"{name}.sched", b"x", hdrs))["seq"] == 1
    st = await wait_last_seq(jsc, name, 2)
    assert st["subjects"] == {f"{name}.t": 1}


# ------------------------------------------------------------------------------------------------ firing
async def test_at_in_the_past_fires_once_and_purges_the_schedule(jsc):
    name = jsc.name()
    await jsc.create(name, storage="file", allow_msg_schedules=True, allow_msg_ttl=True)
    t0 = time.monotonic()
    ack = await jsc.pub(f"{name}.sched", b"payload", {
        "Nats-Schedule": "@at 2020-01-01T00:00:00Z", "Nats-Schedule-Target": f"{name}.t", "Custom": "v",
        "Nats-Msg-Id": "m1", "Nats-Expected-Stream": name, "Nats-Schedule-TTL": "5s", "Nats-TTL": "60s"})
    assert ack == {"stream": name, "seq": 1}
    st = await wait_last_seq(jsc, name, 2)
    assert time.monotonic() - t0 >= 0.2  # the scheduler ticks no sooner than 250 ms after it is armed
    assert st["subjects"] == {f"{name}.t": 1} and st["first_seq"] == 2  # the schedule was purged
    subj, hdr, data = await get(jsc, name, 2)
    assert subj == f"{name}.t" and data == b"payload"
    assert hdr == (b"NATS/1.0\r\nCustom: v\r\nNats-Scheduler: " + name.encode()
                   + b".sched\r\nNats-Schedule-Next: purge\r\nNats-TTL: 5s\r\n\r\n")
    await asyncio.sleep(0.4)
    assert (await jsc.info(name))["state"]["last_seq"] == 2  # fired once


async def test_every_second_fires_on_whole_seconds_with_next(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True)
    await jsc.pub(f"{name}.e", b"E", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": f"{name}.t",
                                      "Nats-Schedule-Rollup": "sub"})
    st = await wait_last_seq(jsc, name, 3, timeout=4)
    assert st["subjects"] == {f"{name}.e": 1, f"{name}.t": 1}  # the schedule stays; the rollup keeps one
    subj, hdr, data = await get(jsc, name, 3)
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": 3})
    stored_at = r["message"]["time"]
    assert data == b"E"
    prefix = b"NATS/1.0\r\nNats-Scheduler: " + name.encode() + b".e\r\nNats-Schedule-Next: "
    assert hdr.startswith(prefix) and hdr.endswith(b"Z\r\nNats-Rollup: sub\r\n\r\n"), hdr
    nxt = datetime.strptime(hdr[len(prefix):].split(b"\r\n")[0].decode(), "%Y-%m-%dT%H:%M:%SZ")
    fired = datetime.strptime(stored_at[:19], "%Y-%m-%dT%H:%M:%S")
    assert nxt - fired == timedelta(seconds=1)  # fired on a whole second, the next one second later


async def test_cron_with_source_sampling_and_time_zone(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True, allow_msg_ttl=True)
    await jsc.pub(f"{name}.src", b"sampled", {"A": "1", "Nats-Msg-Id": "z", "Nats-TTL": "30s"})
    await jsc.pub(f"{name}.s1", b"own", {"Nats-Schedule": "* * * * * *", "Nats-Schedule-Target": f"{name}.t1",
                                         "Nats-Schedule-Source": f"{name}.src", "B": "2"})
    await jsc.pub(f"{name}.s2", b"own2", {"Nats-Schedule": "*/1 * * * * *", "Nats-Schedule-Target": f"{name}.t2",
                                          "Nats-Schedule-Source": f"{name}.none",
                                          "Nats-Schedule-Time-Zone": "America/New_York"})
    deadline = time.monotonic() + 3
    while True:
        st = (await jsc.info(name, {"subjects_filter": ">"}))["state"]
        if (f"{name}.t1" in st.get("subjects", {}) and f"{name}.t2" in st.get("subjects", {})) or \
                time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    got = {}
    for seq in range(4, st["last_seq"] + 1):
        m = await get(jsc, name, seq)
        if m is not None:
            got.setdefault(m[0], m)
    _, hdr1, data1 = got[f"{name}.t1"]
    assert data1 == b"sampled"  # the source's payload and headers, its Nats-Msg-Id and Nats-TTL removed
    assert hdr1.startswith(b"NATS/1.0\r\nA: 1\r\nNats-Scheduler: " + name.encode() + b".s1\r\nNats-Schedule-Next: ")
    assert hdr1.endswith(b"Z\r\n\r\n")
    _, hdr2, data2 = got[f"{name}.t2"]
    assert data2 == b"own2"  # nothing on the source subject: the schedule's own content
    # The next fire in the schedule's time zone (New York is 4 or 5 hours behind UTC).
    assert hdr2.endswith((b"-05:00\r\n\r\n", b"-04:00\r\n\r\n")), hdr2


async def test_plain_message_on_the_schedule_subject_cancels_it(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True)
    await jsc.pub(f"{name}.sched", b"x", {"Nats-Schedule": at(1), "Nats-Schedule-Target": f"{name}.t"})
    await jsc.pub(f"{name}.sched", b"plain")  # no rollup: both stay, but the schedule is forgotten
    await asyncio.sleep(1.3)
    st = (await jsc.info(name, {"subjects_filter": ">"}))["state"]
    assert st["subjects"] == {f"{name}.sched": 2} and st["last_seq"] == 2


# ------------------------------------------------------------------------------------------------ nats.py
# The message schedule tests of nats.py (nats/tests/test_js.py test_stream_allow_msg_schedules and
# nats-jetstream/tests/test_stream.py test_*schedule*), written with the installed nats-py's JetStream API.
async def test_nats_py_stream_allow_msg_schedules(jsc):
    js = jsc.nc.jetstream()
    names = [jsc.name() for _ in range(3)]
    await js.add_stream(name=names[0], subjects=[f"{names[0]}.>"], allow_msg_schedules=True)
    assert (await js.stream_info(names[0])).config.allow_msg_schedules is True
    await js.add_stream(name=names[1], subjects=[f"{names[1]}.>"], allow_msg_schedules=False)
    assert (await js.stream_info(names[1])).config.allow_msg_schedules is not True
    await js.add_stream(name=names[2], subjects=[f"{names[2]}.>"])
    assert (await js.stream_info(names[2])).config.allow_msg_schedules is not True


async def test_nats_py_publish_with_schedule_headers(jsc):
    from nats.js.api import Header

    js = jsc.nc.jetstream()
    name = jsc.name()
    await js.add_stream(name=name, subjects=[f"{name}.sched.>", f"{name}.target.>"], allow_msg_schedules=True)
    ack = await js.publish(f"{name}.sched.every", b"",
                           headers={Header.SCHEDULE: "@every 5s", Header.SCHEDULE_TARGET: f"{name}.target.every"})
    msg = await js.get_msg(name, ack.seq)
    assert msg.subject == f"{name}.sched.every" and not msg.data
    assert msg.headers[Header.SCHEDULE] == "@every 5s"
    assert msg.headers[Header.SCHEDULE_TARGET] == f"{name}.target.every"


async def test_nats_py_schedule_target_required(jsc):
    import nats.js.errors

    js = jsc.nc.jetstream()
    name = jsc.name()
    await js.add_stream(name=name, subjects=[f"{name}.>"], allow_msg_schedules=True)
    with pytest.raises(nats.js.errors.BadRequestError) as e:
        await js.publish(f"{name}.sched.notarget", b"", headers={"Nats-Schedule": "@every 5s"})
    assert e.value.err_code == TARGET_INVALID


async def test_schedule_in_an_atomic_batch(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True, allow_atomic=True)
    await jsc.nc.publish(f"{name}.sched", b"x", headers={
        "Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1", "Nats-Schedule": "@at 2040-01-01T00:00:00Z",
        "Nats-Schedule-Target": f"{name}.t"})
    ack = await jsc.pub(f"{name}.other", b"y", {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "2",
                                               "Nats-Batch-Commit": "1"})
    assert ack == {"stream": name, "seq": 2, "batch": "b1", "count": 2}
    _, hdr, _ = await get(jsc, name, 1)
    assert hdr.endswith(b"Nats-Schedule-Target: " + name.encode() + b".t\r\nNats-Rollup: sub\r\n\r\n")
    # A bad schedule fails the whole batch with its own error.
    await jsc.nc.publish(f"{name}.sched", b"x", headers={
        "Nats-Batch-Id": "b2", "Nats-Batch-Sequence": "1", "Nats-Schedule": "@every 1s"})
    ack = await jsc.pub(f"{name}.other", b"y", {"Nats-Batch-Id": "b2", "Nats-Batch-Sequence": "2",
                                               "Nats-Batch-Commit": "1"})
    assert err_code(ack) == TARGET_INVALID and (await jsc.info(name))["state"]["last_seq"] == 2


async def test_at_extremes(jsc):
    """Go's zero time is no schedule (stored as a plain message, never fires); beyond 2262 the wheel's int64
    nanoseconds wrap (Time.UnixNano) and the schedule is due at once.  Both are what nats-server does."""
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True)
    ack = await jsc.pub(f"{name}.zero", b"z", {"Nats-Schedule": "@at 0001-01-01T00:00:00Z",
                                               "Nats-Schedule-Target": f"{name}.t"})
    assert ack == {"stream": name, "seq": 1}
    assert b"Nats-Rollup" not in (await get(jsc, name, 1))[1]
    await jsc.pub(f"{name}.far", b"f", {"Nats-Schedule": "@at 9999-12-31T23:59:59Z",
                                        "Nats-Schedule-Target": f"{name}.t"})
    await jsc.pub(f"{name}.epoch", b"e", {"Nats-Schedule": "@at 1970-01-01T00:00:00Z",
                                          "Nats-Schedule-Target": f"{name}.u"})
    st = await wait_last_seq(jsc, name, 5)
    await asyncio.sleep(0.3)
    st = (await jsc.info(name, {"subjects_filter": ">"}))["state"]
    assert st["subjects"] == {f"{name}.zero": 1, f"{name}.t": 1, f"{name}.u": 1}


async def test_schedules_survive_kill9(server_factory):
    """Schedules are stored messages: after a kill -9 they are rebuilt, a missed @at fires on the first tick and an
    @every goes on."""
    server = server_factory()
    nc = await nats.connect(server.url)
    r = json.loads((await nc.request("$JS.API.STREAM.CREATE.K", json.dumps(
        {"name": "K", "subjects": ["k.>"], "allow_msg_schedules": True}).encode(), timeout=3)).data)
    assert "error" not in r, r
    for subj, hdrs in (("k.every", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "k.t"}),
                       ("k.at", {"Nats-Schedule": at(1), "Nats-Schedule-Target": "k.u"})):
        ack = json.loads((await nc.request(subj, b"x", headers=hdrs, timeout=3)).data)
        assert "error" not in ack, ack
    await nc.close()
    server.kill()
    await asyncio.sleep(1.1)  # the @at falls due while the server is down
    server.start()
    nc = await nats.connect(server.url)
    deadline = time.monotonic() + 3
    while True:
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.K", json.dumps(
            {"subjects_filter": ">"}).encode(), timeout=3)).data)
        subjects = info["state"].get("subjects", {})
        if ("k.u" in subjects and "k.t" in subjects) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    await nc.close()
    assert subjects.get("k.u") == 1 and "k.at" not in subjects and subjects.get("k.every") == 1, subjects
    assert subjects.get("k.t", 0) >= 1, subjects


@pytest.mark.parametrize("lines, code", [
    (b"Nats-Schedule: @every 1s \r\nNats-Schedule-Target: {n}.t", PATTERN_INVALID),
    (b"Nats-Schedule:@every 1s\r\nNats-Schedule-Target: {n}.t ", TARGET_INVALID),
    (b"Nats-Schedule:   @hourly\t\r\nNats-Schedule-Target:{n}.t", PATTERN_INVALID),
    (b"Nats-Schedule:   @hourly\r\nNats-Schedule-Target:{n}.t", None),
    (b"nats-schedule: @hourly\r\nNats-Schedule-Target: {n}.t", None),  # keys are case-sensitive: a plain message
    (b"Nats-Schedule: @every 1s\r\nNats-Schedule-Time-Zone: UTC \r\nNats-Schedule-Target: {n}.t", TZ_INVALID),
], ids=["trailing-space", "target-trailing-space", "tab", "leading-spaces", "lower-case-key", "zone-trailing-space"])
async def test_schedule_header_values_are_read_as_nats_server_reads_them(jsc, lines, code):
    """nats-server's sliceHeader: leading spaces skipped, nothing trimmed at the end (nats-py strips values, so the
    header block is written by hand)."""
    from tests.wire.rawclient import RawClient

    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_schedules=True)
    hdr = b"NATS/1.0\r\n" + lines.replace(b"{n}", name.encode()) + b"\r\n\r\n"
    with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
        c.send(b"SUB _r 1\r\nHPUB %s.sched _r %d %d\r\n%sx\r\n" % (name.encode(), len(hdr), len(hdr) + 1, hdr))
        _, payload = c.read_msg()
    ack = json.loads(payload)
    assert err_code(ack) == code, ack
