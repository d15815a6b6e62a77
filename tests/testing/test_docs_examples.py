"""The examples of docs/testing.md, each a test CI runs (tests/test_docs_commands.py checks that every python block
of the docs is the text of a file like this one)."""
import asyncio

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server
from skiff.testing.inspect import Inspector
from skiff.testing.recorder import Recorder

pytestmark = pytest.mark.skiff_only


async def test_inspect_a_consumer(tmp_path):
    async with Server(port=0, jetstream=True, store_dir=tmp_path) as server:
        nc = await nats.connect(server.client_url, name="my-app")
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(3):
            await js.publish("orders.eu.new", b"order %d" % i)
        sub = await js.pull_subscribe("orders.>", durable="worker")
        msgs = await sub.fetch(3)
        await msgs[0].ack_sync()

        ins = Inspector(server)
        assert [s.name for s in ins.streams()] == ["ORDERS"]
        assert [m.data for m in ins.messages("ORDERS", subject="orders.eu.*")] == [b"order 0", b"order 1", b"order 2"]
        c = ins.consumer("ORDERS", "worker")
        assert (c.num_ack_pending, c.ack_floor.stream_seq) == (2, 1)
        assert sorted(c.pending) == [2, 3]  # stream sequences delivered and not acknowledged
        conn = ins.connection_named("my-app")
        assert conn.account == "$G"
        await nc.close()


async def test_record_what_a_client_acked(tmp_path):
    async with Server(port=0, jetstream=True, store_dir=tmp_path, clock=ManualClock()) as server:
        nc = await nats.connect(server.client_url, name="my-app")
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await js.publish("orders.eu.new", b"order 1")
        sub = await js.pull_subscribe("orders.>", durable="worker")
        with Recorder(server) as rec:
            msg = (await sub.fetch(1))[0]
            await msg.nak()
            msg = (await sub.fetch(1))[0]
            await msg.ack_sync()
        assert [a.kind for a in rec.acks(name="my-app", consumer="worker")] == ["-NAK", "+ACK"]
        assert rec.ack_counts(name="my-app", kind=None) == {1: 2}  # stream sequence 1 was answered twice
        assert rec.ack_counts(name="my-app") == {1: 1}  # ... and acknowledged (+ACK) once
        assert [op.subject for op in rec.sent(name="my-app", op="PUB")][0].startswith("$JS.API.CONSUMER.MSG.NEXT.")
        await nc.close()
