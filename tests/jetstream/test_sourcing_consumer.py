"""What an origin stream makes of a mirror's or source's consumer request (nats-server 2.14+, jsConsumerCreateRequest):
``direct`` + ``sourcing`` + a stable ``name``.  On an interest or workqueue origin it becomes a durable consumer
acked by flow control (ADR-60: the origin keeps what the sourcing stream has not stored), listed and counted; asked
for again, it resumes from its ack floor.  On a limits origin it stays an unlisted ephemeral whose name gets a
random suffix.  The same requests go to both servers; the sourcing stream itself is played by the test."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.jetstream.conftest import collect
from tests.jetstream.test_consumer_support import status

SECOND = 1_000_000_000


def sourcing_request(name: str, dsubj: str, **extra) -> dict:
    # the request nats-server's setupSourceConsumer sends (stream.go), as a Skiff or nats-server source would
    return {"name": name, "deliver_subject": dsubj, "ack_policy": "none", "ack_wait": 22 * 3600 * SECOND,
            "max_deliver": 1, "idle_heartbeat": SECOND, "flow_control": True, "direct": True, "sourcing": True,
            "inactive_threshold": 10 * SECOND, **extra}


async def create(jsc, stream: str, cfg: dict) -> dict:
    return await jsc.api(f"CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": cfg}, check=False)


@pytest.mark.parametrize("retention", ["workqueue", "interest"])
async def test_an_interest_or_workqueue_origin_makes_it_durable_and_acked_by_flow_control(jsc, retention):
    s = jsc.name()
    await jsc.create(s, retention=retention)
    r = await create(jsc, s, sourcing_request("JS_SRC_t1", jsc.name("dlv")))
    assert "error" not in r, r
    cfg = r["config"]
    assert r["name"] == cfg["name"] == cfg["durable_name"] == "JS_SRC_t1"
    assert cfg["ack_policy"] == "flow_control" and cfg["sourcing"] is True and "direct" not in cfg
    assert "ack_wait" not in cfg and "inactive_threshold" not in cfg
    assert cfg["max_deliver"] == -1 and cfg["max_ack_pending"] == 1000 and cfg["idle_heartbeat"] == SECOND
    names = (await jsc.api(f"CONSUMER.NAMES.{s}"))["consumers"]
    assert names == ["JS_SRC_t1"]
    assert (await jsc.info(s))["state"]["consumer_count"] == 1


async def test_a_limits_origin_keeps_an_ephemeral_with_a_unique_name(jsc):
    s = jsc.name()
    await jsc.create(s)
    a = await create(jsc, s, sourcing_request("JS_SRC_t2", jsc.name("dlv")))
    b = await create(jsc, s, sourcing_request("JS_SRC_t2", jsc.name("dlv"), deliver_policy="by_start_sequence",
                                              opt_start_seq=5))
    for r in (a, b):
        assert "error" not in r, r
        assert re.fullmatch(r"JS_SRC_t2-[0-9A-Za-z]{8}", r["name"]), r["name"]
        assert r["config"]["ack_policy"] == "none" and r["config"]["direct"] is True
    assert a["name"] != b["name"]
    assert (await jsc.api(f"CONSUMER.NAMES.{s}"))["consumers"] == []  # direct consumers are not listed


async def test_asked_for_again_it_resumes_from_its_ack_floor(jsc):
    s = jsc.name()
    await jsc.create(s, retention="workqueue")
    dsubj = jsc.name("dlv")
    sub = await jsc.nc.subscribe(dsubj)
    for i in range(4):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    r = await create(jsc, s, sourcing_request("JS_SRC_t3", dsubj))
    assert "error" not in r, r
    got = [m for m in await collect(sub, 4, timeout=1)]
    assert [m.data for m in got] == [b"m0", b"m1", b"m2", b"m3"]
    # The sourcing stream stored two of them: the next flow-control answer says so and the origin drops them.
    fc = [m for m in await collect(sub, 3, timeout=2.5) if status(m) == (100, "FlowControl Request")]
    assert fc, "no flow-control request while messages were outstanding"
    await jsc.nc.publish(fc[0].reply, b"", headers={"Nats-Last-Consumer": "2", "Nats-Last-Stream": "2"})
    await jsc.nc.flush()
    await collect(sub, timeout=0.3)
    assert (await jsc.info(s))["state"]["messages"] == 2
    # The sourcing stream restarts and asks again with its own start: the origin goes back to the ack floor.
    r = await create(jsc, s, sourcing_request("JS_SRC_t3", dsubj, deliver_policy="by_start_sequence",
                                              opt_start_seq=3))
    assert "error" not in r, r
    assert r["config"]["deliver_policy"] == "all" and "opt_start_seq" not in r["config"]
    again = [m for m in await collect(sub, 2, timeout=1) if status(m) is None]
    assert [m.data for m in again] == [b"m2", b"m3"]
    info = await jsc.api(f"CONSUMER.INFO.{s}.JS_SRC_t3")
    assert info["ack_floor"]["stream_seq"] == 2 and info["delivered"]["stream_seq"] == 4
    assert info["delivered"]["consumer_seq"] == 2  # delivery sequences start over after a reset


async def test_the_stream_identity_is_checked_and_returned(jsc):
    """2.15 (API level 5): a sourcing request may name the origin stream it knew (Nats-Stream-Identity); another one
    is 10225 with the current identity, and the create or reset reply carries it."""
    s = jsc.name()
    await jsc.create(s)
    body = {"stream_name": s, "config": sourcing_request("JS_SRC_t4", jsc.name("dlv"))}
    r = await jsc.request(f"$JS.API.CONSUMER.CREATE.{s}", body,
                          headers={"Nats-Required-Api-Level": "5", "Nats-Stream-Identity": "nothere"})
    err = json.loads(r.data)["error"]
    assert (err["code"], err["err_code"]) == (400, 10225)
    ident = err["description"].removeprefix("consumer's stream identity does not match: ")
    assert re.fullmatch(r"[0-9A-Za-z]{8}", ident), err
    r = await jsc.request(f"$JS.API.CONSUMER.CREATE.{s}", body,
                          headers={"Nats-Required-Api-Level": "5", "Nats-Stream-Identity": ident})
    assert "error" not in json.loads(r.data) and r.headers["Nats-Stream-Identity"] == ident
    # A durable's reset names the identity when asked for it, even with an empty value.
    await jsc.api(f"CONSUMER.CREATE.{s}.D", {"stream_name": s, "config": {
        "durable_name": "D", "deliver_subject": jsc.name("dd"), "ack_policy": "flow_control", "max_ack_pending": 9}})
    r = await jsc.request(f"$JS.API.CONSUMER.RESET.{s}.D", b"", headers={"Nats-Stream-Identity": ""})
    assert json.loads(r.data)["reset_seq"] == 1 and r.headers["Nats-Stream-Identity"] == ident
    r = await jsc.request(f"$JS.API.CONSUMER.RESET.{s}.D", b"")
    assert not (r.headers or {}).get("Nats-Stream-Identity")
    # A stream created again under the same name is another stream.
    await jsc.api(f"STREAM.DELETE.{s}")
    await asyncio.sleep(0.01)
    await jsc.create(s)
    r = await jsc.request(f"$JS.API.CONSUMER.CREATE.{s}", body, headers={"Nats-Stream-Identity": ident})
    assert json.loads(r.data)["error"]["err_code"] == 10225
