"""docs/testing.md's cookbook: real cases a test author meets, each written the way a user would, with the plugin's
fixtures and nats-py.  CI runs them; the docs show them verbatim (tests/test_docs_commands.py)."""
import asyncio

import nats
import nats.js.api
import nats.js.errors
import pytest

from skiff.testing.faults import Faults

pytestmark = pytest.mark.skiff_only


async def test_backoff_schedule(nats_server, nats_clock):
    nc = await nats.connect(nats_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="JOBS", subjects=["jobs.>"])
    await js.publish("jobs.1", b"work")
    config = nats.js.api.ConsumerConfig(ack_wait=60, max_deliver=4, backoff=[1, 10, 60])
    sub = await js.pull_subscribe("jobs.>", durable="worker", config=config)
    (await sub.fetch(1))[0]  # delivery 1, not acked
    for wait, delivery in ((1, 2), (10, 3), (60, 4)):  # the backoff, step by step, without sleeping
        await nats_clock.tick(wait + 0.01)  # due once the backoff step has passed
        msg = (await sub.fetch(1))[0]
        assert msg.metadata.num_delivered == delivery
    await nats_clock.tick(600)  # max_deliver reached: no fifth delivery
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.05)
    await nc.close()


async def test_kv_ttl_expiry(nats_server, nats_clock):
    nc = await nats.connect(nats_server.client_url)
    kv = await nc.jetstream().create_key_value(bucket="SESSIONS", ttl=300)
    await kv.put("alice", b"token")
    await nats_clock.tick(299)
    assert (await kv.get("alice")).value == b"token"
    await nats_clock.tick(2)  # five minutes later the session is gone
    with pytest.raises(nats.js.errors.KeyNotFoundError):
        await kv.get("alice")
    await nc.close()


async def test_idempotent_publisher_when_the_ack_is_lost(nats_server):
    reconnected = asyncio.Event()

    async def on_reconnect():
        reconnected.set()

    nc = await nats.connect(nats_server.client_url, name="publisher", reconnected_cb=on_reconnect,
                            reconnect_time_wait=0.05)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    faults = Faults(nats_server)
    # The server stores the order but its PubAck never reaches the client: the connection breaks first.
    faults.stall(name="publisher", reads=False, writes=True)
    with pytest.raises(nats.errors.TimeoutError):
        await js.publish("orders.new", b"order 42", timeout=0.5, headers={"Nats-Msg-Id": "order-42"})
    faults.drop(name="publisher")
    await asyncio.wait_for(reconnected.wait(), 5)
    # The application retries with the same message id: stored once, and told it was a duplicate.
    ack = await js.publish("orders.new", b"order 42", headers={"Nats-Msg-Id": "order-42"})
    assert (ack.seq, ack.duplicate) == (1, True)
    assert (await js.stream_info("ORDERS")).state.messages == 1
    await nc.close()
