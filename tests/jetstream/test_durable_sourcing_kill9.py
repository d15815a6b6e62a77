"""kill -9 while a source copies a workqueue stream through a durable ``ack_policy: flow_control`` consumer (ADR-60):
after the restart the source holds every origin message exactly once and the origin is empty (both servers).

The origin drops a message only when the source's flow-control answer says it was stored, so what was delivered
but not yet stored when the server died is delivered again after the restart (the consumer is reset to its ack
floor), and what was stored is skipped by origin sequence.

What was stored in the source but not yet acked in the origin when the server died: Skiff acks it when the
redelivery is skipped, so the origin ends empty.  nats-server 2.15.1 skips it without acking, so it can stay in the
origin for good (seen in about 1 run of 8: 15 messages, every one of them already in the source); the test accepts
that there and only there, and docs/parity.md lists the difference.
"""
from __future__ import annotations

import asyncio
import time

import nats

from .kill9_support import Publisher, api, kill_and_restart, sourced_origin_seqs, state

N = 2000


async def test_kill9_during_durable_sourcing_loses_and_duplicates_nothing(server_factory):
    server = server_factory()
    nc = await nats.connect(server.url)
    r = await api(nc, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "retention": "workqueue"})
    assert "error" not in r, r
    r = await api(nc, "$JS.API.CONSUMER.CREATE.O.W", {"stream_name": "O", "config": {
        "durable_name": "W", "deliver_subject": "dw", "ack_policy": "flow_control", "max_ack_pending": 100}})
    assert "error" not in r, r
    r = await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "sources": [
        {"name": "O", "consumer": {"name": "W", "deliver_subject": "dw"}}]})
    assert "error" not in r, r
    pub = Publisher(5)
    pub_nc = await nats.connect(server.url, allow_reconnect=False)
    task = asyncio.ensure_future(pub.publish(pub_nc, N, b"m"))
    deadline = time.monotonic() + 20
    before = None
    while time.monotonic() < deadline:
        s = await state(nc, "S")
        if s["messages"] > 0 and pub.acked >= N // 3:
            before = (pub.acked, s["messages"])
            break
        await asyncio.sleep(0.005)
    assert before is not None
    nc = await kill_and_restart(server, pub, task, nc, pub_nc)
    acked_before = pub.acked
    pub.acked = 0
    await pub.publish(nc, 100, b"after")
    settled_origin_may_keep = server.kind == "nats-server"
    deadline = time.monotonic() + 40
    while True:
        o, s = await state(nc, "O"), await state(nc, "S")
        if ((o["messages"] == 0 or settled_origin_may_keep)
                and s["messages"] >= o["last_seq"] >= acked_before + 100):
            break
        assert time.monotonic() < deadline, (before, acked_before, o, s)
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # nothing more comes in (no duplicates arriving late)
    o, s = await state(nc, "O"), await state(nc, "S")
    total = o["last_seq"]
    assert s["messages"] == total, (before, o, s)
    assert sorted(await sourced_origin_seqs(nc, "S", total)) == list(range(1, total + 1))
    if settled_origin_may_keep:
        # What stays is at most what was in flight when the server died (max_ack_pending 100), and the source
        # holds it already (every origin sequence 1..total, checked above).
        assert o["messages"] <= 100, o
    else:
        assert o["messages"] == 0, (before, o, s)
    await nc.close()
