"""Ordered consumers as nats-py creates them (ephemeral push, flow control, heartbeats, ack none, mem_storage) against
both servers, and pull ``fetch`` through nats-py."""
from __future__ import annotations

import asyncio

import nats

from tests.jetstream.test_consumer_support import cinfo


async def _stream(jsc, n: int) -> str:
    s = jsc.name()
    await jsc.create(s)
    for i in range(n):
        await jsc.pub(f"{s}.{i % 3}", b"%d" % i)
    return s


async def test_ordered_consumer_reads_everything_in_order(jsc):
    s = await _stream(jsc, 50)
    js = jsc.nc.jetstream()
    sub = await js.subscribe(f"{s}.>", ordered_consumer=True)
    got = [int((await sub.next_msg(timeout=2)).data) for _ in range(50)]
    assert got == list(range(50))
    await jsc.pub(f"{s}.1", b"50")
    assert (await sub.next_msg(timeout=2)).data == b"50"
    await sub.unsubscribe()


async def test_ordered_consumer_filtered_with_pending(jsc):
    s = await _stream(jsc, 9)
    js = jsc.nc.jetstream()
    sub = await js.subscribe(f"{s}.1", ordered_consumer=True)
    msgs = [await sub.next_msg(timeout=2) for _ in range(3)]
    assert [m.data for m in msgs] == [b"1", b"4", b"7"]
    assert [m.metadata.num_pending for m in msgs] == [2, 1, 0]
    assert [m.metadata.sequence.stream for m in msgs] == [2, 5, 8]


async def test_ephemeral_push_consumer_goes_away_without_interest(jsc):
    s = await _stream(jsc, 1)
    r = await jsc.api(f"CONSUMER.CREATE.{s}", {"stream_name": s, "config": {
        "deliver_subject": jsc.name("gone"), "inactive_threshold": 200_000_000}})
    name = r["name"]
    await asyncio.sleep(0.6)
    r = await jsc.api(f"CONSUMER.INFO.{s}.{name}")
    assert r["error"]["err_code"] == 10014


async def test_pull_fetch_and_ack_sync(jsc):
    s = await _stream(jsc, 7)
    js = jsc.nc.jetstream()
    psub = await js.pull_subscribe(f"{s}.>", durable="f")
    msgs = await psub.fetch(5, timeout=1)
    assert [m.data for m in msgs] == [b"%d" % i for i in range(5)]
    for m in msgs:
        await m.ack_sync()
    msgs = await psub.fetch(5, timeout=0.5)  # only 2 left: nats-py returns what came
    assert [m.data for m in msgs] == [b"5", b"6"]
    for m in msgs:
        await m.ack()
    try:
        await psub.fetch(1, timeout=0.3)
        raise AssertionError("expected a timeout")
    except nats.errors.TimeoutError:
        pass
    await asyncio.sleep(0.05)
    info = await cinfo(jsc, s, "f")
    assert info["ack_floor"]["stream_seq"] == 7 and info["num_pending"] == 0
