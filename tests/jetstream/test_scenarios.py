"""The scenarios people ask about, end to end with nats-py against both servers.

Also in the other files: confirmed acks and num_ack_pending, max_ack_pending 1 stopping a second puller, max_deliver
with a short ack_wait ending in the advisory, AckAll (test_ack.py); a deliver group splitting the work and heartbeats
while idle (test_push.py).
"""
from __future__ import annotations

import asyncio

import nats

from tests.jetstream.test_consumer_support import MS, add_consumer, cinfo, pull, status


async def test_two_clients_one_durable_pull_consumer_split_and_either_ack_moves_floor(jsc):
    s = jsc.name()
    await jsc.create(s)
    for i in range(6):
        await jsc.pub(f"{s}.job", b"%d" % i)
    await add_consumer(jsc, s, "workers", ack_policy="explicit")
    nc2 = await nats.connect(jsc.server.url)
    try:
        js1, js2 = jsc.nc.jetstream(), nc2.jetstream()
        p1 = await js1.pull_subscribe_bind("workers", stream=s)
        p2 = await js2.pull_subscribe_bind("workers", stream=s)
        a = await p1.fetch(3, timeout=1)
        b = await p2.fetch(3, timeout=1)
        assert sorted(m.data for m in a + b) == [b"%d" % i for i in range(6)]
        assert not {m.data for m in a} & {m.data for m in b}
        # The floor is the consumer's, not per client: client 2's acks wait for client 1's first one.
        first = min(a + b, key=lambda m: m.metadata.sequence.stream)
        others = [m for m in a + b if m is not first]
        for m in others:
            await m.ack_sync()
        info = await cinfo(jsc, s, "workers")
        assert info["ack_floor"]["stream_seq"] == 0 and info["num_ack_pending"] == 1
        await first.ack_sync()
        info = await cinfo(jsc, s, "workers")
        assert info["ack_floor"]["stream_seq"] == 6 and info["num_ack_pending"] == 0
    finally:
        await nc2.close()


async def test_edge_services_each_with_a_durable_and_a_gate_on_ack_floors(jsc):
    """Each service consumes the same events through its own durable; a gate waits until every consumer's ack floor
    has reached the last event of a step before the next step is published."""
    s = jsc.name()
    await jsc.create(s)
    services = ["billing", "shipping", "email"]
    for name in services:
        await add_consumer(jsc, s, name, ack_policy="explicit", filter_subject=f"{s}.orders")
    js = jsc.nc.jetstream()
    subs = {name: await js.pull_subscribe_bind(name, stream=s) for name in services}

    async def gate(last_seq: int) -> bool:
        floors = [(await cinfo(jsc, s, n))["ack_floor"]["stream_seq"] for n in services]
        return all(f >= last_seq for f in floors)

    for step in range(3):
        acks = [await jsc.pub(f"{s}.orders", b"step%d-%d" % (step, i)) for i in range(2)]
        last = acks[-1]["seq"]
        assert not await gate(last)
        for n, sub in subs.items():
            msgs = await sub.fetch(2, timeout=1)
            assert [m.data for m in msgs] == [b"step%d-0" % step, b"step%d-1" % step]
            if n != "email":
                for m in msgs:
                    await m.ack_sync()
            else:
                held = msgs
        assert not await gate(last)  # email has not acked yet
        for m in held:
            await m.ack_sync()
        assert await gate(last)


async def test_unacked_message_redelivered_after_restart(server):
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    await js.add_stream(name="R", subjects=["r.>"])
    for i in range(3):
        await js.publish("r.x", b"%d" % i)
    psub = await js.pull_subscribe("r.>", durable="d", config=nats.js.api.ConsumerConfig(ack_wait=1.0))
    msgs = await psub.fetch(3, timeout=1)
    await msgs[0].ack_sync()
    await msgs[2].ack_sync()
    await nc.close()
    await asyncio.sleep(0.3)  # let the server write the consumer state it keeps in the background
    server.restart()
    nc = await nats.connect(server.url)
    try:
        js = nc.jetstream()
        info = await js.consumer_info("R", "d")
        assert info.num_ack_pending == 1 and info.delivered.stream_seq == 3 and info.ack_floor.stream_seq == 1
        psub = await js.pull_subscribe_bind("d", stream="R")
        msgs = await psub.fetch(1, timeout=3)
        assert msgs[0].data == b"1" and msgs[0].metadata.num_delivered == 2
        await msgs[0].ack_sync()
        info = await js.consumer_info("R", "d")
        assert info.ack_floor.stream_seq == 3 and info.num_ack_pending == 0
    finally:
        await nc.close()


async def test_max_ack_pending_across_clients(jsc):
    s = jsc.name()
    await jsc.create(s)
    for i in range(4):
        await jsc.pub(f"{s}.a", b"%d" % i)
    await add_consumer(jsc, s, "C", ack_policy="explicit", max_ack_pending=2)
    nc2 = await nats.connect(jsc.server.url)
    try:
        a = await pull(jsc.nc, s, "C", {"batch": 2, "expires": 200 * MS}, max_msgs=2)
        b = await pull(nc2, s, "C", {"batch": 2, "expires": 200 * MS}, timeout=0.5)
        assert [status(m) for m in b] == [(408, "Request Timeout")]
        await a[0].ack_sync()
        b = await pull(nc2, s, "C", {"batch": 2, "expires": 200 * MS}, timeout=0.5)
        assert [m.data for m in b if status(m) is None] == [b"2"]
    finally:
        await nc2.close()
