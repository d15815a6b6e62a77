import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server


@pytest.mark.asyncio
async def test_redelivery_after_ack_wait(tmp_path):
    clock = ManualClock()
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path), clock=clock) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await js.publish("orders.new", b"1")
        sub = await js.pull_subscribe("orders.>", durable="worker", config=nats.js.api.ConsumerConfig(ack_wait=30))
        first = (await sub.fetch(1))[0]  # not acked
        clock.advance(31)  # ack_wait passes without sleeping: the message is due again
        again = (await sub.fetch(1))[0]
        assert again.data == first.data and again.metadata.num_delivered == 2
        await again.ack()
        await nc.close()
