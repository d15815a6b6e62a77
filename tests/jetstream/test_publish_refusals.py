"""JetStream publishes that ask for features Skiff does not implement get nats-server's own error, never a plain store.

Message schedules (``Nats-Schedule*``), atomic batches (``Nats-Batch-Id``) and fast batches (a reply subject ending
in ``.$FI``) on a stream that does not enable them - the only kind Skiff creates - get the PubAck error nats-server
2.15 gives (stream.go processJetStreamMsgWithBatch, processJetStreamAtomicBatchMsg, processJetStreamFastBatchMsg),
and nothing is stored.  Against both servers.
"""
from __future__ import annotations

import asyncio
import json

import pytest

DISABLED_SCHEDULES = (10188, "message schedules is disabled")
SCHEDULER_INVALID = (10212, "message schedules invalid scheduler")
ATOMIC_DISABLED = (10174, "atomic publish is disabled")
BATCH_DISABLED = (10205, "batch publish is disabled")


def _err(ack: dict) -> tuple[int, str] | None:
    e = ack.get("error")
    return (e["err_code"], e["description"]) if e else None


async def _stored(jsc, name) -> int:
    return (await jsc.info(name))["state"]["messages"]


@pytest.mark.parametrize("hdrs, expected", [
    ({"Nats-Schedule": "@at 2030-01-01T00:00:00Z"}, DISABLED_SCHEDULES),
    ({"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "x.y"}, DISABLED_SCHEDULES),
    ({"Nats-Schedule": "not a schedule"}, DISABLED_SCHEDULES),  # invalid too: "disabled" wins
    ({"Nats-Schedule-Time-Zone": "Nowhere/Atlantis"}, DISABLED_SCHEDULES),
    ({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "other.subject"}, DISABLED_SCHEDULES),
    ({"Nats-Schedule-Next": "later"}, SCHEDULER_INVALID),
    ({"Nats-Schedule-Next": "purge"}, SCHEDULER_INVALID),
    ({"Nats-Scheduler": "other.subject"}, SCHEDULER_INVALID),
    ({"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}, ATOMIC_DISABLED),
    ({"Nats-Batch-Id": "b1"}, ATOMIC_DISABLED),
    ({"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1", "Nats-Batch-Commit": "1"}, ATOMIC_DISABLED),
], ids=lambda v: "+".join(v) if isinstance(v, dict) else None)
async def test_unimplemented_publish_headers_are_refused(jsc, hdrs, expected):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    ack = await jsc.pub(f"{name}.a", b"x", hdrs)
    assert _err(ack) == expected, ack
    assert ack["stream"] == name
    assert await _stored(jsc, name) == 0


@pytest.mark.parametrize("hdrs", [
    {"Nats-Schedule-Time-Zone": "Europe/Amsterdam"},  # a valid zone without a schedule is nothing
    {"Nats-Schedule-Time-Zone": "UTC"},
    {"Nats-Schedule": ""},
    {"Nats-Schedule-Target": "x.y", "Nats-Schedule-TTL": "5s"},  # only read along with Nats-Schedule
    {"Nats-Batch-Id": ""},
    {"Nats-Batch-Sequence": "1"},
    {"Nats-Required-Api-Level": "99"},  # checked on API requests and batches only, not on a plain publish
], ids=lambda v: "+".join(v))
async def test_headers_nats_server_stores(jsc, hdrs):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    ack = await jsc.pub(f"{name}.a", b"x", hdrs)
    assert "error" not in ack and ack["seq"] == 1, ack


@pytest.mark.parametrize("reply_tail", [
    "uuid1.10.fail.1.0.$FI",  # a well-formed fast-batch start
    "uuid1.10.ok.2.1.$FI",
    "garbage.$FI",  # malformed: still a fast batch, still "disabled" first
])
async def test_fast_batch_reply_is_refused(jsc, reply_tail):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    reply = f"_INBOX.{jsc.name('r')}.{reply_tail}"
    sub = await jsc.nc.subscribe(reply)
    await jsc.nc.publish(f"{name}.a", b"x", reply=reply)
    msg = await sub.next_msg(timeout=2)
    ack = json.loads(msg.data)
    assert _err(ack) == BATCH_DISABLED, ack
    assert await _stored(jsc, name) == 0


async def test_batch_on_sealed_stream_is_sealed_first(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    r = await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory",
                                                 "sealed": True})
    assert "error" not in r, r
    ack = await jsc.pub(f"{name}.a", b"x", {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"})
    assert ack["error"]["err_code"] == 10109, ack


async def test_batch_over_max_msg_size_is_size_first(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", max_msg_size=10)
    ack = await jsc.pub(f"{name}.a", b"x" * 100, {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"})
    assert ack["error"]["err_code"] == 10054, ack


async def test_no_ack_stream_stores_nothing_and_says_nothing(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", no_ack=True)
    await jsc.nc.publish(f"{name}.a", b"x", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"})
    await jsc.nc.publish(f"{name}.a", b"x", headers={"Nats-Schedule": "@every 1s"})
    await jsc.nc.flush()
    await asyncio.sleep(0.1)
    assert await _stored(jsc, name) == 0
