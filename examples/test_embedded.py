import nats
import pytest


@pytest.mark.asyncio
async def test_redelivery_after_ack_wait(nats_server, nats_clock):
    nc = await nats.connect(nats_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    await js.publish("orders.new", b"1")
    sub = await js.pull_subscribe("orders.>", durable="worker", config=nats.js.api.ConsumerConfig(ack_wait=30))
    first = (await sub.fetch(1))[0]  # not acked
    await nats_clock.tick(31)  # ack_wait passes without sleeping: the message is due again
    again = (await sub.fetch(1))[0]
    assert again.data == first.data and again.metadata.num_delivered == 2
    await again.ack()
    await nc.close()
