"""Durable sourcing (nats-server 2.14, ADR-60): a mirror or source through the user's own consumer on the origin,
``ack_policy: flow_control``, named in the stream config's ``consumer {name, deliver_subject}``.

The sourcing stream resets that consumer to its ack floor and acks by answering flow control with what it stored
(stream.go setupMirrorConsumer / trySetupSourceConsumer with a durable deliver subject, sendFlowControlReply), so an
interest or workqueue origin keeps every message until the sourcing stream has it.  Same tests on both servers.
"""
from __future__ import annotations

import asyncio
import base64
import time

from .conftest import JsClient
from .test_mirror import wait_state

SECOND = 1_000_000_000


async def durable(jsc: JsClient, origin: str, name: str, dsubj: str, **cfg) -> dict:
    body = {"stream_name": origin, "config": {"durable_name": name, "deliver_subject": dsubj,
                                              "ack_policy": "flow_control", "max_ack_pending": 100, **cfg}}
    r = await jsc.api(f"CONSUMER.CREATE.{origin}.{name}", body)
    assert "error" not in r, r
    return r


async def wait_consumer(jsc: JsClient, origin: str, name: str, pred, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        info = await jsc.api(f"CONSUMER.INFO.{origin}.{name}")
        if pred(info):
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"consumer {origin} > {name} did not get there: {info}")
        await asyncio.sleep(0.1)


async def test_a_mirror_through_a_durable_consumer_acks_what_it_stored(jsc):
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    for i in range(10):
        await jsc.pub(f"{o}.a", b"x%d" % i)
    dsubj = jsc.name("dm")
    await durable(jsc, o, "C", dsubj)
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o, "consumer": {"name": "C",
                                                                                          "deliver_subject": dsubj}}})
    assert "error" not in r, r
    assert r["config"]["mirror"]["consumer"] == {"name": "C", "deliver_subject": dsubj}
    await wait_state(jsc, m, lambda i: i["state"]["messages"] == 10)
    # The flow-control answers ack the consumer up to what the mirror holds.
    await wait_consumer(jsc, o, "C", lambda c: c["ack_floor"]["stream_seq"] == 10)
    await jsc.pub(f"{o}.a", b"late")
    await wait_state(jsc, m, lambda i: i["state"]["last_seq"] == 11)
    # Promoting the mirror leaves the user's consumer in place.
    cfg = dict(r["config"])
    cfg.pop("mirror")
    u = await jsc.api(f"STREAM.UPDATE.{m}", cfg)
    assert "error" not in u, u
    await asyncio.sleep(0.3)
    assert "error" not in await jsc.api(f"CONSUMER.INFO.{o}.C")


async def test_a_workqueue_origin_keeps_messages_until_the_source_stored_them(jsc):
    o, s = jsc.name("O"), jsc.name("S")
    await jsc.create(o, retention="workqueue")
    dsubj = jsc.name("ds")
    await durable(jsc, o, "W", dsubj)
    for i in range(5):
        await jsc.pub(f"{o}.a", b"w%d" % i)
    assert (await jsc.info(o))["state"]["messages"] == 5
    r = await jsc.api(f"STREAM.CREATE.{s}", {"name": s, "subjects": [f"{s}.>"],
                                             "sources": [{"name": o, "consumer": {"name": "W",
                                                                                  "deliver_subject": dsubj}}]})
    assert "error" not in r, r
    await wait_state(jsc, s, lambda i: i["state"]["messages"] == 5)
    await wait_state(jsc, o, lambda i: i["state"]["messages"] == 0)
    got = await jsc.api(f"STREAM.MSG.GET.{s}", {"seq": 1})
    hdr = got["message"]["hdrs"]
    assert f"Nats-Stream-Source: {o}:C=".encode() in base64.b64decode(hdr)


async def test_a_consumer_not_acked_by_flow_control_is_refused(jsc):
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    dsubj = jsc.name("dx")
    r = await jsc.api(f"CONSUMER.CREATE.{o}.E", {"stream_name": o, "config": {
        "durable_name": "E", "deliver_subject": dsubj, "ack_policy": "explicit"}})
    assert "error" not in r, r
    r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, "mirror": {"name": o, "consumer": {"name": "E",
                                                                                          "deliver_subject": dsubj}}})
    assert "error" not in r, r
    info = await wait_state(jsc, m, lambda i: "error" in i.get("mirror", {}))
    assert info["mirror"]["error"] == {"code": 400, "err_code": 10214,
                                       "description": "stream mirror consumer requires flow control ack policy"}


async def test_invalid_durable_sourcing_configs(jsc):
    """stream.go checkStreamCfg: a valid name and a literal deliver subject, no start or filter of its own, and one
    consumer per origin."""
    o, m = jsc.name("O"), jsc.name("M")
    await jsc.create(o)
    good = {"name": "C", "deliver_subject": "d.x"}
    mirror_bad = (400, 10213, "stream mirror consumer config is invalid")
    source_bad = (400, 10215, "stream source consumer config is invalid")
    cases = [
        ({"mirror": {"name": o, "consumer": {"name": "a.b", "deliver_subject": "d.x"}}}, mirror_bad),
        ({"mirror": {"name": o, "consumer": {"name": "C", "deliver_subject": "d.*"}}}, mirror_bad),
        ({"mirror": {"name": o, "consumer": good, "opt_start_seq": 3}}, mirror_bad),
        ({"mirror": {"name": o, "consumer": good, "filter_subject": f"{o}.a"}}, mirror_bad),
        ({"subjects": [f"{m}.>"], "sources": [{"name": o, "consumer": {"name": "C", "deliver_subject": ""}}]},
         source_bad),
        ({"subjects": [f"{m}.>"], "sources": [{"name": o, "consumer": good, "filter_subject": f"{o}.a"}]},
         source_bad),
        ({"subjects": [f"{m}.>"], "sources": [
            {"name": o, "consumer": good, "subject_transforms": [{"src": f"{o}.a", "dest": "x.a"}]},
            {"name": o, "consumer": good, "subject_transforms": [{"src": f"{o}.b", "dest": "x.b"}]}]},
         (400, 10216, "duplicate stream source consumer detected")),
    ]
    for cfg, want in cases:
        r = await jsc.api(f"STREAM.CREATE.{m}", {"name": m, **cfg}, check=False)
        e = r.get("error") or {}
        assert (e.get("code"), e.get("err_code"), e.get("description")) == want, (cfg, r)
