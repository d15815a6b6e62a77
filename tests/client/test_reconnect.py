"""nats-py reconnecting after the server restarts on the same port: subscriptions are replayed and resume.

`server.restart()` (tests/harness.py) stops the process with SIGTERM and starts it again on the same port.
"""
from __future__ import annotations

import asyncio

import pytest


async def reconnecting_client(conns, server, events: dict[str, asyncio.Event], **kw):
    async def disconnected():
        events["disconnected"].set()

    async def reconnected():
        events["reconnected"].set()

    return await conns.connect(
        server, allow_reconnect=True, reconnect_time_wait=0.1, max_reconnect_attempts=100,
        disconnected_cb=disconnected, reconnected_cb=reconnected, **kw,
    )


@pytest.fixture
def events():
    return {"disconnected": asyncio.Event(), "reconnected": asyncio.Event()}


async def test_reconnect_resumes_subscriptions(server, conns, events):
    nc = await reconnecting_client(conns, server, events)
    sub = await nc.subscribe("re.sub")
    qsub = await nc.subscribe("re.q", queue="g")
    wild = await nc.subscribe("re.>")
    await nc.publish("re.sub", b"before")
    assert (await sub.next_msg(1)).data == b"before"
    await wild.next_msg(1)
    first_id = nc._server_info["server_id"]

    await asyncio.to_thread(server.restart)
    await asyncio.wait_for(events["disconnected"].wait(), 5)
    await asyncio.wait_for(events["reconnected"].wait(), 10)
    assert nc.is_connected

    # The subscriptions were replayed: a fresh client publishing reaches them.
    other = await conns.connect(server)
    await nc.flush()
    await other.publish("re.sub", b"after")
    await other.publish("re.q", b"queued")
    await other.flush()
    assert (await sub.next_msg(2)).data == b"after"
    assert (await qsub.next_msg(2)).data == b"queued"
    assert sorted([(await wild.next_msg(2)).data for _ in range(2)]) == [b"after", b"queued"]
    # A restarted nats-server has a new server_id; the client read the new INFO.
    assert nc._server_info["server_id"] != first_id


async def test_reconnect_request_reply(server, conns, events):
    responder = await reconnecting_client(conns, server, events)

    async def cb(msg):
        await msg.respond(b"pong:" + msg.data)

    await responder.subscribe("re.svc", cb=cb)
    await responder.flush()
    requester_events = {"disconnected": asyncio.Event(), "reconnected": asyncio.Event()}
    requester = await reconnecting_client(conns, server, requester_events)
    assert (await requester.request("re.svc", b"1", timeout=1)).data == b"pong:1"

    await asyncio.to_thread(server.restart)
    await asyncio.wait_for(events["reconnected"].wait(), 10)
    await asyncio.wait_for(requester_events["reconnected"].wait(), 10)
    await responder.flush()
    await requester.flush()
    # The requester's response inbox subscription was replayed too.
    assert (await requester.request("re.svc", b"2", timeout=2)).data == b"pong:2"


async def test_publishes_buffered_while_reconnecting_are_delivered(server, conns, events):
    # nats-py replays its SUBs before it flushes the publishes it held while disconnected, so on one connection
    # (echo on) the buffered messages must come back to its own replayed subscription, in order.
    nc = await reconnecting_client(conns, server, events)
    sub = await nc.subscribe("re.buf")
    await nc.flush()

    await asyncio.to_thread(server.stop)
    await asyncio.wait_for(events["disconnected"].wait(), 5)
    for i in range(5):
        await nc.publish("re.buf", b"%d" % i)  # held in the client's pending buffer
    await asyncio.to_thread(server.start)
    await asyncio.wait_for(events["reconnected"].wait(), 10)
    got = [(await sub.next_msg(2)).data for _ in range(5)]
    assert got == [b"%d" % i for i in range(5)]
