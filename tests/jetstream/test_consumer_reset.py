"""``$JS.API.CONSUMER.RESET.<stream>.<consumer>`` (2.14, consumer.go processResetReq) against both servers."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.asyncio


async def pull(nc, stream: str, consumer: str, n: int) -> list:
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", json.dumps({"batch": n}).encode(),
                     reply=inbox)
    out = [await sub.next_msg(timeout=2) for _ in range(n)]
    await sub.unsubscribe()
    return out


async def setup(jsc, n: int = 10, **ccfg) -> str:
    name = jsc.name("RST")
    await jsc.create(name)
    for i in range(n):
        await jsc.pub(f"{name}.x", str(i + 1).encode())
    r = await jsc.api(f"CONSUMER.CREATE.{name}.C", {"stream_name": name, "config": {
        "durable_name": "C", "ack_policy": "explicit", **ccfg}})
    assert "error" not in r, r
    return name


def view(info: dict) -> tuple:
    return (info["delivered"]["consumer_seq"], info["delivered"]["stream_seq"], info["ack_floor"]["consumer_seq"],
            info["ack_floor"]["stream_seq"], info["num_ack_pending"], info["num_redelivered"], info["num_pending"])


async def test_reset_to_the_ack_floor(jsc):
    name = await setup(jsc)
    msgs = await pull(jsc.nc, name, "C", 5)
    for m in msgs[:2]:
        await m.ack_sync()
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", b"", check=False)
    assert r["type"] == "io.nats.jetstream.api.v1.consumer_reset_response" and "error" not in r, r
    assert r["reset_seq"] == 3 and r["name"] == "C" and r["stream_name"] == name
    assert view(r) == (0, 2, 0, 2, 0, 0, 8)
    (m,) = await pull(jsc.nc, name, "C", 1)
    assert (m.metadata.sequence.stream, m.metadata.sequence.consumer, m.metadata.num_delivered) == (3, 1, 1)
    # {"seq":0} is the ack floor too
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 0}, check=False)
    assert r["reset_seq"] == 3 and view(r) == (0, 2, 0, 2, 0, 0, 8)


async def test_reset_to_a_sequence(jsc):
    name = await setup(jsc)
    await pull(jsc.nc, name, "C", 2)
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 7}, check=False)
    assert r["reset_seq"] == 7 and view(r) == (0, 6, 0, 6, 0, 0, 4)
    (m,) = await pull(jsc.nc, name, "C", 1)
    assert (m.metadata.sequence.stream, m.metadata.sequence.consumer, m.data) == (7, 1, b"7")
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 1}, check=False)  # backwards is fine for 'all'
    assert r["reset_seq"] == 1 and view(r) == (0, 0, 0, 0, 0, 0, 10)
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 50}, check=False)  # past the end: waits there
    assert r["reset_seq"] == 50 and view(r)[1] == 49 and view(r)[-1] == 0


async def test_reset_refusals(jsc):
    name = await setup(jsc, deliver_policy="by_start_sequence", opt_start_seq=5)
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 3}, check=False)
    assert r["error"] == {"code": 400, "err_code": 10204, "description": "invalid reset: below start seq"}
    assert r["reset_seq"] == 0
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 6}, check=False)
    assert r["reset_seq"] == 6
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", b"{", check=False)
    assert r["error"]["err_code"] == 10025
    r = await jsc.api(f"CONSUMER.CREATE.{name}.L", {"stream_name": name, "config": {
        "durable_name": "L", "deliver_policy": "last"}})
    r = await jsc.api(f"CONSUMER.RESET.{name}.L", {"seq": 3}, check=False)
    assert r["error"] == {"code": 400, "err_code": 10204, "description": "invalid reset: not allowed"}
    r = await jsc.api(f"CONSUMER.RESET.{name}.L", b"", check=False)  # the ack floor is always allowed
    assert r["reset_seq"] == 10  # deliver last starts with its floor just below the last message
    assert await jsc.no_reply(f"$JS.API.CONSUMER.RESET.{name}.NOPE", b"")


async def test_reset_on_interest_stream_drops_what_lost_interest(jsc):
    name = jsc.name("RSI")
    await jsc.create(name, retention="interest")
    r = await jsc.api(f"CONSUMER.CREATE.{name}.C", {"stream_name": name, "config": {
        "durable_name": "C", "ack_policy": "explicit"}})
    assert "error" not in r
    for i in range(6):
        await jsc.pub(f"{name}.x", str(i + 1).encode())
    r = await jsc.api(f"CONSUMER.RESET.{name}.C", {"seq": 4}, check=False)
    assert r["reset_seq"] == 4
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["first_seq"]) == (3, 4)
