"""Stream mirrors on both servers: copying, STREAM.INFO ``mirror``, publishing into a mirror, promotion (2.12).

A mirror is set up through an internal push consumer on the origin (nats-server stream.go setupMirrorConsumer), a
little after the create (100-200 ms of jitter), so tests wait for the mirror to reach a state rather than sleep.
"""
from __future__ import annotations

import asyncio
import base64
import time

import pytest

from .conftest import JsClient


async def wait_state(jsc: JsClient, name: str, pred, timeout: float = 8.0) -> dict:
    """STREAM.INFO of ``name`` once ``pred(info)`` holds (polled: the mirror copies in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        info = await jsc.info(name)
        if pred(info):
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} did not get there: {info}")
        await asyncio.sleep(0.05)


async def get_msg(jsc: JsClient, stream: str, seq: int) -> dict:
    r = await jsc.api(f"STREAM.MSG.GET.{stream}", {"seq": seq})
    return r.get("message") or r


async def test_mirror_copies_with_origin_sequences_and_times(jsc):
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    for i in range(5):
        await jsc.pub(f"{o}.{i % 2}", b"x%d" % i, headers={"Nats-Msg-Id": f"id{i}"} if i == 0 else None)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}})
    assert "error" not in r, r
    assert "subjects" not in r["config"] and "duplicate_window" not in r["config"]
    assert r["mirror"] == {"name": o, "lag": 0, "active": -1}
    info = await wait_state(jsc, m, lambda i: i["state"]["messages"] == 5)
    oinfo = await jsc.info(o)
    for k in ("messages", "bytes", "first_seq", "last_seq", "first_ts", "last_ts", "num_subjects"):
        assert info["state"][k] == oinfo["state"][k], k
    mi = info["mirror"]
    assert list(mi) == ["name", "lag", "active"] and mi["name"] == o and mi["lag"] == 0
    assert 0 <= mi["active"] < 5_000_000_000
    # The origin's message, byte for byte, at the same sequence (headers kept, no Nats-Stream-Source).
    for seq in (1, 5):
        a, b = await get_msg(jsc, o, seq), await get_msg(jsc, m, seq)
        assert a == b
    # The sourcing consumer is not one of the origin's public consumers.
    assert oinfo["state"]["consumer_count"] == 0
    names = await jsc.api(f"CONSUMER.NAMES.{o}")
    assert names["consumers"] == [] and names["total"] == 0
    # New messages keep flowing.
    await jsc.pub(f"{o}.9", b"late")
    await wait_state(jsc, m, lambda i: i["state"]["last_seq"] == 6)


async def test_mirror_filter_and_transform_keep_sequences(jsc):
    o, m, t = jsc.name("O"), jsc.name("M"), jsc.name("T")
    await jsc.create(o)
    for i in range(6):
        await jsc.pub(f"{o}.{'a' if i % 2 else 'b'}", b"%d" % i)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o, "filter_subject": f"{o}.a"}})
    assert "error" not in r, r
    r = await jsc.api(f"STREAM.CREATE.{t}", {"name": t, "mirror": {
        "name": o, "subject_transforms": [{"src": f"{o}.b", "dest": f"{t}.bee"}]}})
    assert "error" not in r, r
    info = await wait_state(jsc, m, lambda i: i["state"]["messages"] == 3 and i["state"]["last_seq"] == 6)
    assert info["state"]["first_seq"] == 2
    assert info["mirror"]["filter_subject"] == f"{o}.a"
    assert [(await get_msg(jsc, m, s))["subject"] for s in (2, 4, 6)] == [f"{o}.a"] * 3
    info = await wait_state(jsc, t, lambda i: i["state"]["messages"] == 3)
    assert info["state"]["first_seq"] == 1 and info["state"]["last_seq"] == 5
    assert info["mirror"]["subject_transforms"] == [{"src": f"{o}.b", "dest": f"{t}.bee"}]
    msg = await get_msg(jsc, t, 3)
    assert msg["subject"] == f"{t}.bee" and base64.b64decode(msg["data"]) == b"2"


async def test_mirror_opt_start_seq(jsc):
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    for i in range(5):
        await jsc.pub(f"{o}.x", b"%d" % i)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o, "opt_start_seq": 3}})
    assert "error" not in r, r
    info = await wait_state(jsc, m, lambda i: i["state"]["messages"] == 3)
    assert info["state"]["first_seq"] == 3 and info["state"]["last_seq"] == 5


async def test_mirror_of_missing_stream_reports_error_then_catches_up(jsc):
    """The origin is created after its mirror: 10059 in the mirror info until a retry finds it."""
    o, m = jsc.name("O"), jsc.name("M")
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}})
    assert "error" not in r, r
    info = await wait_state(jsc, m, lambda i: "error" in i["mirror"])
    assert info["mirror"]["error"] == {"code": 404, "err_code": 10059, "description": "stream not found"}
    assert info["mirror"]["active"] == -1
    # The origin comes: the next retry (2 s + 10 s backoff after one failure, calculateRetryBackoff) finds it.
    await jsc.create(o)
    for i in range(2):
        await jsc.pub(f"{o}.x", b"%d" % i)
    info = await wait_state(jsc, m, lambda i: i["state"]["messages"] == 2, timeout=30)
    assert "error" not in info["mirror"] and info["mirror"]["active"] >= 0


async def test_publish_into_a_mirror_has_no_responders(jsc):
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}})
    assert "error" not in r, r
    # A mirror captures no subjects: a publish to its name reaches nobody.
    assert await jsc.no_reply(m, b"x")
    bad = await jsc.api(f"STREAM.CREATE.{jsc.name('B')}", {"name": "B", "mirror": {"name": o}, "subjects": ["b"]})
    assert bad["error"]["err_code"] in (10034, 10056)


async def test_mirror_with_subjects_refused(jsc):
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}, "subjects": [f"{m}.x"]})
    assert r["error"]["err_code"] == 10034, r


async def test_mirror_config_not_updatable_but_removable(jsc):
    o, o2, m = jsc.name("O"), jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    await jsc.create(o2)
    for i in range(3):
        await jsc.pub(f"{o}.x", b"%d" % i)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}})
    assert "error" not in r, r
    await wait_state(jsc, m, lambda i: i["state"]["messages"] == 3)
    r = await jsc.api(f"STREAM.UPDATE.{m}", {"name": m, "mirror": {"name": o2}})
    assert r["error"]["err_code"] == 10055, r
    # Promotion (2.12): the mirror config removed, subjects given -> a normal stream that takes publishes.
    r = await jsc.api(f"STREAM.UPDATE.{m}", {"name": m, "subjects": [f"{m}.>"]})
    assert "error" not in r, r
    assert "mirror" not in r and "mirror" not in r["config"]
    assert r["config"]["duplicate_window"] == 120_000_000_000
    ack = await jsc.pub(f"{m}.new", b"mine")
    assert ack == {"stream": m, "seq": 4}
    # The origin no longer feeds it.
    await jsc.pub(f"{o}.x", b"after")
    await asyncio.sleep(0.5)
    info = await jsc.info(m)
    assert info["state"]["messages"] == 4 and "mirror" not in info


async def test_mirror_direct_answers_for_the_origin(jsc):
    """An origin with allow_direct makes the mirror mirror_direct; once caught up the mirror answers direct gets for
    the origin's name too (same queue group), so they still work when the origin is gone."""
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o, allow_direct=True)
    for i in range(3):
        await jsc.pub(f"{o}.{i}", b"d%d" % i)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}})
    assert "error" not in r, r
    assert r["config"]["mirror_direct"] is True and r["config"]["allow_direct"] is False
    await wait_state(jsc, m, lambda i: i["state"]["messages"] == 3)
    r = await jsc.api(f"STREAM.DELETE.{o}")
    assert r.get("success"), r
    msg = await jsc.request(f"$JS.API.DIRECT.GET.{o}", {"seq": 2})
    assert msg.headers["Nats-Stream"] == m and msg.headers["Nats-Sequence"] == "2" and msg.data == b"d1"
    # The mirror's own name is not served (allow_direct is off on the mirror).
    assert await jsc.no_reply(f"$JS.API.DIRECT.GET.{m}", {"seq": 2})


async def test_mirror_backlog_past_flow_control_window(jsc):
    """A backlog of several MB goes through the sourcing consumer's flow control (requests answered with
    Nats-Last-Consumer / Nats-Last-Stream): nothing stalls, nothing is lost."""
    o, m, s = jsc.name("O"), jsc.name("M"), jsc.name("S")
    await jsc.create(o)
    payload = b"y" * 1024
    n = 6000  # ~6 MB
    for i in range(n):
        await jsc.nc.publish(f"{o}.{i % 5}", payload)
    await jsc.nc.flush()
    await wait_state(jsc, o, lambda i: i["state"]["messages"] == n)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o}})
    assert "error" not in r, r
    r = await jsc.api(f"STREAM.CREATE.{s}", {"name": s, "sources": [{"name": o}]})
    assert "error" not in r, r
    info = await wait_state(jsc, m, lambda i: i["state"]["messages"] == n, timeout=30)
    assert info["state"]["last_seq"] == n and info["mirror"]["lag"] == 0
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] == n, timeout=30)
    assert info["sources"][0]["seq"] == n
