"""Abandoned batches time out on the server's clock (embedded Skiff, ManualClock): 10 s without a message drops an
atomic batch silently (advisory reason ``timeout``) and a fast batch without a word; every message resets the timer
(jetstream_batching.go setupCleanupTimer / resetCleanupTimer, stream.go streamDefaultMaxBatchTimeout)."""
from __future__ import annotations

import json

import pytest

from tests.jetstream.conftest import collect
from tests.jetstream.test_batch_atomic import INCOMPLETE, abandoned_event, bh
from tests.jetstream.test_priority_support import ClockEnv

pytestmark = pytest.mark.skiff_only


@pytest.fixture
async def env(tmp_path):
    e = await ClockEnv.start(str(tmp_path))
    r = await e.api("STREAM.UPDATE.S", {"name": "S", "subjects": ["s.>"], "allow_atomic": True,
                                        "allow_batched": True})
    assert "error" not in r, r
    yield e
    await e.stop()


async def _send(env, headers) -> bytes:
    return (await env.nc.request("s.a", b"x", headers=headers, timeout=2)).data


def _err(reply: bytes):
    e = json.loads(reply).get("error")
    return (e["err_code"], e["description"]) if e else None


async def test_abandoned_batch_times_out(env, target):
    adv = await env.nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.S")
    assert await _send(env, bh("t", 1)) == b""
    await env.advance(9.999)
    assert await _send(env, bh("t", 2)) == b""  # in time: the timer starts again
    await env.advance(9.999)
    assert await collect(adv, timeout=0.05) == []
    await env.advance(0.001)
    (ev,) = await collect(adv, 1, timeout=1)
    ev = abandoned_event(ev.data)
    assert (ev["type"], ev["stream"], ev["batch"], ev["reason"]) == \
        ("io.nats.jetstream.advisory.v1.stream_batch_abandoned", "S", "t", "timeout")
    assert _err(await _send(env, bh("t", 3, "1"))) == INCOMPLETE
    assert (await env.api("STREAM.INFO.S"))["state"]["messages"] == 0


async def test_timed_out_batches_free_their_slots(env, target):
    for i in range(50):
        await env.nc.publish("s.a", b"x", headers=bh(f"o{i}", 1))
    assert _err(await _send(env, bh("late", 1))) == (10210, "atomic publish too many inflight")
    await env.advance(10)
    assert await _send(env, bh("late", 1)) == b""
    assert json.loads(await _send(env, bh("late", 2, "1")))["count"] == 2


async def test_abandoned_fast_batch_times_out(env, target):
    sub = await env.nc.subscribe("_FI.>")

    async def send(seq: int, op: int) -> dict:
        await env.nc.publish("s.a", b"x", reply=f"_FI.f.10.fail.{seq}.{op}.$FI")
        return json.loads((await sub.next_msg(timeout=1)).data)

    assert await send(1, 0) == {"type": "ack", "seq": 0, "msgs": 10}
    await env.advance(9.999)
    await env.nc.publish("s.a", b"x", reply="_FI.f.10.fail.2.1.$FI")  # in time: stored, no ack due yet
    await env.nc.flush()
    await env.advance(9.999)
    assert (await send(2, 4)) == {"type": "ack", "seq": 0, "msgs": 10}  # a ping also keeps it open
    await env.advance(9.999)
    assert await send(2, 4) == {"type": "ack", "seq": 0, "msgs": 10}
    await env.advance(10)
    assert (await send(3, 2))["error"]["err_code"] == 10208  # gone: "batch publish ID unknown"
    assert (await env.api("STREAM.INFO.S"))["state"]["messages"] == 2
