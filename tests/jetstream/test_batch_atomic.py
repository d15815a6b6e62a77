"""Atomic batch publish (ADR-50, ``allow_atomic``) against both servers: staging, the commit PubAck, every error
nats-server 2.15 gives, the expected-* checks at commit, and that a failed batch stores nothing.

Replies were taken from nats-server 2.15.1 (stream.go processJetStreamAtomicBatchMsg, jetstream_batching.go).
"""
from __future__ import annotations

import asyncio
import base64
import json

import pytest

from tests.conftest import check_schema
from tests.jetstream.conftest import collect

INCOMPLETE = (10176, "atomic publish batch is incomplete")
MISSING_SEQ = (10175, "atomic publish sequence is missing")
BAD_COMMIT = (10200, "atomic publish batch commit is invalid")
BAD_ID = (10179, "atomic publish batch ID is invalid")
TOO_LARGE = (10199, "atomic publish batch is too large: 1000")
DUP_ID = (10201, "atomic publish batch contains duplicate message id")
TOO_MANY = (10210, "atomic publish too many inflight")


def bh(batch: str, seq: int | str, commit: str | None = None, **extra: str) -> dict:
    h = {"Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(seq)}
    if commit is not None:
        h["Nats-Batch-Commit"] = commit
    h.update({k.replace("_", "-"): v for k, v in extra.items()})
    return h


def abandoned_event(data: bytes) -> dict:
    """A stream_batch_abandoned advisory, checked against its schema (which does not list the reason
    "unsupported" that nats-server sends for Nats-Required-Api-Level: that field is checked by the tests)."""
    ev = json.loads(data)
    checked = dict(ev, reason="incomplete") if ev.get("reason") == "unsupported" else ev
    check_schema(checked)
    return ev


def _err(reply: bytes) -> tuple[int, str] | None:
    e = json.loads(reply).get("error")
    return (e["err_code"], e["description"]) if e else None


async def send(jsc, subject: str, headers: dict, data: bytes = b"x") -> bytes:
    return (await jsc.nc.request(subject, data, headers=headers, timeout=2)).data


async def atomic_stream(jsc, **cfg) -> str:
    name = jsc.name()
    await jsc.create(name, allow_atomic=True, **cfg)
    return name


async def stored(jsc, name) -> int:
    return (await jsc.info(name))["state"]["messages"]


async def get_msg(jsc, name, seq) -> dict:
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": seq})
    m = r["message"]
    m["hdrs"] = base64.b64decode(m.get("hdrs", "")).decode()
    return m


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_commit_stores_all_and_acks_with_batch_and_count(jsc, storage):
    name = await atomic_stream(jsc, storage=storage)
    assert await send(jsc, f"{name}.a", bh("b1", 1), b"m1") == b""  # staged: an empty reply
    assert await send(jsc, f"{name}.b", bh("b1", 2), b"m2") == b""
    assert await stored(jsc, name) == 0  # nothing visible before the commit
    ack = json.loads(await send(jsc, f"{name}.c", bh("b1", 3, "1"), b"m3"))
    assert ack == {"stream": name, "seq": 3, "batch": "b1", "count": 3}
    assert await stored(jsc, name) == 3
    first, last = await get_msg(jsc, name, 1), await get_msg(jsc, name, 3)
    assert first["hdrs"] == "NATS/1.0\r\nNats-Batch-Id: b1\r\nNats-Batch-Sequence: 1\r\n\r\n"
    assert last["hdrs"] == "NATS/1.0\r\nNats-Batch-Id: b1\r\nNats-Batch-Sequence: 3\r\nNats-Batch-Commit: 1\r\n\r\n"
    assert base64.b64decode(last["data"]) == b"m3"


async def test_commit_eob_does_not_store_the_end_marker(jsc):
    name = await atomic_stream(jsc)
    assert await send(jsc, f"{name}.a", bh("b2", 1), b"m1") == b""
    ack = json.loads(await send(jsc, f"{name}.x", bh("b2", 2, "eob"), b"zz"))
    assert ack == {"stream": name, "seq": 1, "batch": "b2", "count": 1}
    m = await get_msg(jsc, name, 1)
    # The last stored message gets the commit header the eob message carried for it.
    assert m["hdrs"] == "NATS/1.0\r\nNats-Batch-Id: b2\r\nNats-Batch-Sequence: 1\r\nNats-Batch-Commit: 1\r\n\r\n"
    assert await stored(jsc, name) == 1


async def test_single_message_batch_and_no_reply_staging(jsc):
    name = await atomic_stream(jsc)
    ack = json.loads(await send(jsc, f"{name}.a", bh("one", 1, "1")))
    assert ack == {"stream": name, "seq": 1, "batch": "one", "count": 1}
    await jsc.nc.publish(f"{name}.a", b"1", headers=bh("quiet", 1))  # staged messages need no reply
    await jsc.nc.publish(f"{name}.a", b"2", headers=bh("quiet", 2))
    ack = json.loads(await send(jsc, f"{name}.a", bh("quiet", 3, "1")))
    assert ack == {"stream": name, "seq": 4, "batch": "quiet", "count": 3}


@pytest.mark.parametrize("first, then, expected", [
    (None, bh("b", 1, "eob"), INCOMPLETE),
    (None, bh("b", 1, "x"), BAD_COMMIT),
    (None, {"Nats-Batch-Id": "b"}, MISSING_SEQ),
    (None, bh("b", "abc"), MISSING_SEQ),
    (None, bh("b", "+1"), MISSING_SEQ),
    (None, bh("b", 0), INCOMPLETE),
    (None, bh("b", 2), INCOMPLETE),  # unknown batch
    (None, bh("b", 2000), TOO_LARGE),  # unknown batch that could never have fit
    (None, bh("b", 1001, "eob"), INCOMPLETE),  # eob does not count toward the size
    (None, bh("x" * 65, 1), BAD_ID),
    (bh("b", 1), bh("b", 3), INCOMPLETE),  # gap
    (bh("b", 1), bh("b", 1), INCOMPLETE),  # repeated sequence
    (bh("b", 1), bh("b", 2, "nope"), BAD_COMMIT),
    (None, bh("b", 1, "1", Nats_Required_Api_Level="99"), (10185, "JetStream minimum api level required")),
    (None, bh("b", 1, "1", Nats_Required_Api_Level="x"), (10185, "JetStream minimum api level required")),
], ids=lambda v: None)
async def test_batch_errors(jsc, first, then, expected):
    name = await atomic_stream(jsc)
    if first is not None:
        assert await send(jsc, f"{name}.a", first) == b""
    assert _err(await send(jsc, f"{name}.a", then)) == expected
    assert await stored(jsc, name) == 0


async def test_a_failed_batch_is_gone(jsc):
    name = await atomic_stream(jsc)
    assert await send(jsc, f"{name}.a", bh("g", 1)) == b""
    assert _err(await send(jsc, f"{name}.a", bh("g", 3))) == INCOMPLETE
    # The gap dropped the batch: its next message is a message of an unknown batch.
    assert _err(await send(jsc, f"{name}.a", bh("g", 2, "1"))) == INCOMPLETE
    # The id can start over.
    assert await send(jsc, f"{name}.a", bh("g", 1)) == b""
    assert json.loads(await send(jsc, f"{name}.a", bh("g", 2, "1")))["count"] == 2


async def test_required_api_level_header_is_removed(jsc):
    name = await atomic_stream(jsc)
    ack = json.loads(await send(jsc, f"{name}.a", bh("lv", 1, "1", Nats_Required_Api_Level="1")))
    assert ack["seq"] == 1
    assert "Nats-Required-Api-Level" not in (await get_msg(jsc, name, 1))["hdrs"]


async def test_expected_headers_are_checked_at_commit(jsc):
    name = await atomic_stream(jsc)
    await jsc.pub(f"{name}.z", b"pre")  # last_seq 1
    s = f"{name}.a"
    # Expected-Last-Sequence on the first message: checked against the stream before the batch.
    assert await send(jsc, s, bh("c1", 1, Nats_Expected_Last_Sequence="1")) == b""
    assert json.loads(await send(jsc, s, bh("c1", 2, "1")))["seq"] == 3
    # A wrong one fails the whole batch at commit time.
    assert await send(jsc, s, bh("c2", 1, Nats_Expected_Last_Sequence="1")) == b""
    assert _err(await send(jsc, s, bh("c2", 2, "1"))) == (10071, "wrong last sequence: 3")
    # On a later message it is checked against the running sequence, and refused even when it matches.
    assert await send(jsc, s, bh("c3", 1)) == b""
    assert _err(await send(jsc, s, bh("c3", 2, "1", Nats_Expected_Last_Sequence="1"))) == \
        (10071, "wrong last sequence: 4")
    assert await send(jsc, s, bh("c4", 1)) == b""
    assert _err(await send(jsc, s, bh("c4", 2, "1", Nats_Expected_Last_Sequence="4"))) == (10164, "wrong last sequence")
    # Expected-Last-Msg-Id is not supported in a batch.
    assert _err(await send(jsc, s, bh("c5", 1, "1", Nats_Expected_Last_Msg_Id="x"))) == \
        (10177, "atomic publish unsupported header used: Nats-Expected-Last-Msg-Id")
    # Expected-Last-Subject-Sequence on a subject the batch already wrote to.
    q = f"{name}.q"
    assert await send(jsc, q, bh("c6", 1)) == b""
    assert _err(await send(jsc, q, bh("c6", 2, "1", Nats_Expected_Last_Subject_Sequence="0"))) == \
        (10164, "wrong last sequence")
    # ... and on one it did not: against the stored last message of that subject.
    assert await send(jsc, q, bh("c7", 1, Nats_Expected_Last_Subject_Sequence="0")) == b""
    assert json.loads(await send(jsc, s, bh("c7", 2, "1")))["count"] == 2
    assert await send(jsc, q, bh("c8", 1, Nats_Expected_Last_Subject_Sequence="0")) == b""
    assert _err(await send(jsc, s, bh("c8", 2, "1"))) == (10071, "wrong last sequence: 4")
    assert await stored(jsc, name) == 5  # pre, c1 (2), c7 (2)


async def test_duplicate_msg_ids_fail_the_batch(jsc):
    name = await atomic_stream(jsc)
    s = f"{name}.a"
    assert await send(jsc, s, bh("d1", 1, Nats_Msg_Id="m1")) == b""
    assert _err(await send(jsc, s, bh("d1", 2, "1", Nats_Msg_Id="m1"))) == DUP_ID
    assert (await jsc.pub(s, b"x", {"Nats-Msg-Id": "m2"}))["seq"] == 1
    assert await send(jsc, s, bh("d2", 1, Nats_Msg_Id="m2")) == b""
    assert _err(await send(jsc, s, bh("d2", 2, "1"))) == DUP_ID
    # Ids stored by a batch are in the dedupe window like any other.
    assert json.loads(await send(jsc, s, bh("d3", 1, "1", Nats_Msg_Id="m3")))["seq"] == 2
    assert (await jsc.pub(s, b"x", {"Nats-Msg-Id": "m3"})) == {"stream": name, "seq": 2, "duplicate": True}
    assert await stored(jsc, name) == 2


async def test_rollups_inside_a_batch(jsc):
    name = await atomic_stream(jsc, allow_rollup_hdrs=True)
    s = f"{name}.a"
    for i in range(3):
        await jsc.pub(s, b"old%d" % i)
    assert await send(jsc, s, bh("r1", 1)) == b""
    assert _err(await send(jsc, s, bh("r1", 2, "1", Nats_Rollup="sub"))) == \
        (10111, "batch rollup sub invalid")
    assert await send(jsc, f"{name}.b", bh("r2", 1)) == b""
    assert _err(await send(jsc, s, bh("r2", 2, "1", Nats_Rollup="all"))) == \
        (10111, "batch rollup all invalid")
    assert await send(jsc, s, bh("r3", 1, Nats_Rollup="all")) == b""
    assert json.loads(await send(jsc, f"{name}.b", bh("r3", 2, "1")))["seq"] == 5
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (2, 4, 5)


async def test_discard_new_counts_the_whole_batch(jsc):
    name = await atomic_stream(jsc, max_msgs=3, discard="new")
    s = f"{name}.a"
    await jsc.pub(s, b"x")
    for i in range(1, 3):
        assert await send(jsc, s, bh("n", i)) == b""
    assert _err(await send(jsc, s, bh("n", 3, "1"))) == (10077, "maximum messages exceeded")
    assert await stored(jsc, name) == 1


async def test_counter_increments_inside_a_batch(jsc):
    name = await atomic_stream(jsc, allow_msg_counter=True)
    s = f"{name}.c"
    assert (await jsc.pub(s, b"", {"Nats-Incr": "5"}))["val"] == "5"
    assert await send(jsc, s, bh("k", 1, Nats_Incr="1"), b"") == b""
    assert await send(jsc, s, bh("k", 2, Nats_Incr="10"), b"") == b""
    ack = json.loads(await send(jsc, s, bh("k", 3, "1", Nats_Incr="100"), b""))
    assert (ack["seq"], ack["batch"], ack["count"]) == (4, "k", 3)
    vals = [json.loads(base64.b64decode((await get_msg(jsc, name, q))["data"]))["val"] for q in (2, 3, 4)]
    assert vals == ["6", "16", "116"]


async def test_too_many_open_batches(jsc):
    name = await atomic_stream(jsc, storage="memory")
    for i in range(50):
        await jsc.nc.publish(f"{name}.a", b"x", headers=bh(f"o{i}", 1))
    assert _err(await send(jsc, f"{name}.a", bh("o50", 1))) == TOO_MANY
    # An open one goes on; committing frees a slot.
    assert json.loads(await send(jsc, f"{name}.a", bh("o0", 2, "1")))["count"] == 2
    assert await send(jsc, f"{name}.a", bh("o50", 1)) == b""


async def test_batch_size_limit(jsc):
    name = await atomic_stream(jsc, storage="memory")
    s = f"{name}.a"
    for i in range(1, 1001):
        await jsc.nc.publish(s, b"x", headers=bh("big", i))
    adv = await jsc.nc.subscribe(f"$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.{name}")
    assert _err(await send(jsc, s, bh("big", 1001, "1"))) == TOO_LARGE
    (ev,) = await collect(adv, 1, timeout=2)
    ev = abandoned_event(ev.data)
    assert (ev["type"], ev["stream"], ev["batch"], ev["reason"]) == \
        ("io.nats.jetstream.advisory.v1.stream_batch_abandoned", name, "big", "large")
    assert await stored(jsc, name) == 0
    # Exactly 1000 is fine, and an eob after it does not count.
    for i in range(1, 1001):
        await jsc.nc.publish(s, b"x", headers=bh("fits", i))
    ack = json.loads(await send(jsc, s, bh("fits", 1001, "eob")))
    assert (ack["seq"], ack["count"]) == (1000, 1000)


async def test_incomplete_batch_advisory(jsc):
    name = await atomic_stream(jsc)
    adv = await jsc.nc.subscribe(f"$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.{name}")
    assert await send(jsc, f"{name}.a", bh("inc", 1)) == b""
    assert _err(await send(jsc, f"{name}.a", bh("inc", 5))) == INCOMPLETE
    (ev,) = await collect(adv, 1, timeout=2)
    ev = abandoned_event(ev.data)
    assert (ev["stream"], ev["batch"], ev["reason"]) == (name, "inc", "incomplete")
    # Nats-Required-Api-Level above the server's: "unsupported".
    assert await send(jsc, f"{name}.a", bh("lvl", 1)) == b""
    assert _err(await send(jsc, f"{name}.a", bh("lvl", 2, "1", Nats_Required_Api_Level="99")))[0] == 10185
    (ev,) = await collect(adv, 1, timeout=2)
    ev = abandoned_event(ev.data)
    assert (ev["batch"], ev["reason"]) == ("lvl", "unsupported")
    # Errors found at commit (here a bad commit value) or before a batch exists send none.
    assert await send(jsc, f"{name}.a", bh("bc", 1)) == b""
    assert _err(await send(jsc, f"{name}.a", bh("bc", 2, "x"))) == BAD_COMMIT
    assert _err(await send(jsc, f"{name}.a", bh("none", 2))) == INCOMPLETE
    assert await collect(adv, timeout=0.2) == []


async def test_turning_allow_atomic_off_drops_open_batches(jsc):
    name = await atomic_stream(jsc)
    assert await send(jsc, f"{name}.a", bh("u", 1)) == b""
    r = await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "allow_atomic": False})
    assert "error" not in r, r
    assert _err(await send(jsc, f"{name}.a", bh("u", 2, "1"))) == (10174, "atomic publish is disabled")
    r = await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "allow_atomic": True})
    assert "error" not in r, r
    assert _err(await send(jsc, f"{name}.a", bh("u", 2, "1"))) == INCOMPLETE
    assert await stored(jsc, name) == 0


async def test_consumers_see_the_batch_only_after_the_commit(jsc):
    name = await atomic_stream(jsc)
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox)
    r = await jsc.api(f"CONSUMER.CREATE.{name}", {"stream_name": name, "config": {
        "deliver_subject": inbox, "ack_policy": "none"}})
    assert "error" not in r, r
    for i in range(1, 4):
        assert await send(jsc, f"{name}.a", bh("v", i), b"%d" % i) == b""
    assert await collect(sub, timeout=0.2) == []
    await send(jsc, f"{name}.a", bh("v", 4, "1"), b"4")
    assert [m.data for m in await collect(sub, 4, timeout=2)] == [b"1", b"2", b"3", b"4"]


@pytest.mark.parametrize("flags, batch", [({}, "atomic"), ({}, "fast"), ({"allow_atomic": True}, "atomic")])
async def test_server_store_limit_comes_before_the_batch_checks(server_factory, flags, batch):
    """processJetStream{Atomic,Fast}BatchMsg: sealed, then the server's store limit (10023), then the rest."""
    import nats

    server = server_factory(config="jetstream { max_memory_store: 2KB, max_file_store: 1MB }\n")
    nc = await nats.connect(server.url)
    r = json.loads((await nc.request("$JS.API.STREAM.CREATE.L", json.dumps(
        {"name": "L", "subjects": ["l.>"], "storage": "memory", **flags}).encode(), timeout=3)).data)
    assert "error" not in r, r
    for _ in range(2):  # the second is stored too: the limit is checked against what is already used
        assert "error" not in json.loads((await nc.request("l.a", b"x" * 1500, timeout=3)).data)
    await asyncio.sleep(0.06)  # Skiff refreshes the store usage at most every 50 ms (engine.check_resources)
    if batch == "atomic":
        reply = (await nc.request("l.a", b"x", headers=bh("b", 1), timeout=3)).data
    else:
        sub = await nc.subscribe("_FI.>")
        await nc.publish("l.a", b"x", reply="_FI.b.10.fail.1.0.$FI")
        reply = (await sub.next_msg(timeout=3)).data
    assert _err(reply) == (10023, "insufficient resources")
    await nc.close()


async def test_nats_py_client(jsc):
    """What nats.py's own atomic-batch tests do (nats.py tests: test_atomic_batch_publish, _eob_commit,
    test_stream_allow_batch_publish_round_trip), through nats-py 2.16's JetStream API: the config flags round-trip
    and the commit's PubAck parses into batch_id / batch_size."""
    js = jsc.nc.jetstream()
    name = jsc.name()
    await js.add_stream(name=name, subjects=[f"{name}.>"], allow_atomic=True, allow_batched=True)
    info = await js.stream_info(name)
    assert info.config.allow_atomic is True and info.config.allow_batched is True
    hs = await jsc.nc.request(f"{name}.a", b"one", headers=bh("batch-1", 1), timeout=2)
    assert hs.data == b""  # the first message as a request: feature support is confirmed by an empty reply
    await jsc.nc.publish(f"{name}.b", b"two", headers=bh("batch-1", 2))
    ack = await js.publish(f"{name}.c", b"three", headers=bh("batch-1", 3, "1"))
    assert (ack.stream, ack.seq, ack.batch_id, ack.batch_size) == (name, 3, "batch-1", 3)
    assert (await jsc.nc.request(f"{name}.a", b"one", headers=bh("batch-eob", 1), timeout=2)).data == b""
    await jsc.nc.publish(f"{name}.b", b"two", headers=bh("batch-eob", 2))
    ack = await js.publish(f"{name}.commit", b"", headers=bh("batch-eob", 3, "eob"))
    assert (ack.seq, ack.batch_id, ack.batch_size) == (5, "batch-eob", 2)
    assert (await js.stream_info(name)).state.messages == 5


async def test_no_ack_stream_answers_nothing(jsc):
    name = await atomic_stream(jsc, no_ack=True, storage="memory")
    inbox = f"_NA{name}"
    sub = await jsc.nc.subscribe(f"{inbox}.>")
    await jsc.nc.publish(f"{name}.a", b"x", reply=f"{inbox}.1", headers=bh("a1", 1))
    await jsc.nc.publish(f"{name}.a", b"x", reply=f"{inbox}.2", headers=bh("a1", 2, "1"))
    await jsc.nc.publish(f"{name}.a", b"x", reply=f"{inbox}.3", headers=bh("a2", 2))
    assert await collect(sub, timeout=0.3) == []
    assert await stored(jsc, name) == 2
