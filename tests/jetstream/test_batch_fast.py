"""Fast batch publish (ADR-50 fast ingest, ``allow_batched``) against both servers: the reply-subject protocol, flow
control acks and their ramp, gaps, per-message errors, duplicates, pings, and every pattern error.

Replies were taken from nats-server 2.15.1 (stream.go processJetStreamFastBatchMsg, getFastBatch).  The flow-control
numbers depend on how many fast batches the stream has open, so each test uses its own stream.
"""
from __future__ import annotations

import base64
import json

import pytest

from tests.jetstream.conftest import collect

UNKNOWN = {"error": {"code": 400, "err_code": 10208, "description": "batch publish ID unknown"}, "seq": 0}
PATTERN = {"error": {"code": 400, "err_code": 10206, "description": "batch publish pattern is invalid"}, "seq": 0}


class Fast:
    """Publishes with fast-batch reply subjects and reads everything the server sends back on them."""

    def __init__(self, jsc, name: str, sub, prefix: str) -> None:
        self.jsc, self.name, self.sub, self.prefix = jsc, name, sub, prefix

    @classmethod
    async def make(cls, jsc, **cfg) -> "Fast":
        name = jsc.name()
        await jsc.create(name, allow_batched=True, **cfg)
        prefix = f"_FI{name}"
        return cls(jsc, name, await jsc.nc.subscribe(f"{prefix}.>"), prefix)

    async def send(self, bid: str, seq: int | str, op: int | str, flow: int | str = 10, gap: str = "fail",
                   headers: dict | None = None, data: bytes | None = None) -> None:
        reply = f"{self.prefix}.{bid}.{flow}.{gap}.{seq}.{op}.$FI"
        await self.jsc.nc.publish(f"{self.name}.a", data if data is not None else b"d%s" % str(seq).encode(),
                                  reply=reply, headers=headers)

    async def replies(self, n: int) -> list[tuple[str, dict]]:
        """The next ``n`` replies as (seq.op of the reply subject, JSON), then checks that nothing else came."""
        msgs = await collect(self.sub, n, timeout=2)
        msgs += await collect(self.sub, timeout=0.1)
        out = []
        for m in msgs:
            body = json.loads(m.data)
            if "stream" in body:
                assert body.pop("stream") == self.name
            tail = m.subject[len(self.prefix) + 1:-4].split(".")
            out.append((f"{tail[-2]}.{tail[-1]}", body))
        return out

    async def state(self) -> dict:
        return (await self.jsc.info(self.name))["state"]


def ack(seq: int, msgs: int) -> dict:
    return {"type": "ack", "seq": seq, "msgs": msgs}


def gap(last: int, seq: int) -> dict:
    return {"type": "gap", "last_seq": last, "seq": seq}


def done(seq: int, bid: str, count: int) -> dict:
    return {"seq": seq, "batch": bid, "count": count}


async def test_batch_is_stored_as_it_comes_and_acked_at_commit(jsc):
    f = await Fast.make(jsc)
    await f.send("b1", 1, 0)
    for i in range(2, 6):
        await f.send("b1", i, 1)
    await f.send("b1", 6, 2)
    assert await f.replies(2) == [("1.0", ack(0, 10)), ("6.2", done(6, "b1", 6))]
    assert (await f.state())["messages"] == 6
    r = await jsc.api(f"STREAM.MSG.GET.{f.name}", {"seq": 1})
    assert "hdrs" not in r["message"] and base64.b64decode(r["message"]["data"]) == b"d1"  # no batch headers


async def test_single_message_and_eob_commits(jsc):
    f = await Fast.make(jsc)
    await f.send("one", 1, 2)
    assert await f.replies(1) == [("1.2", done(1, "one", 1))]
    await f.send("e", 1, 0)
    await f.send("e", 2, 1)
    await f.send("e", 3, 3, data=b"not stored")
    assert await f.replies(2) == [("1.0", ack(0, 10)), ("3.3", done(3, "e", 2))]
    assert (await f.state())["messages"] == 3


async def test_flow_control_acks_every_n_messages(jsc):
    f = await Fast.make(jsc)
    await f.send("c", 1, 0, flow=2)
    for i in range(2, 12):
        await f.send("c", i, 1, flow=2)
    await f.send("c", 12, 2, flow=2)
    assert await f.replies(7) == [("1.0", ack(0, 2))] + [(f"{i}.1", ack(i, 2)) for i in (2, 4, 6, 8, 10)] + \
        [("12.2", done(12, "c", 12))]


@pytest.mark.parametrize("flow, first", [(0, 10), (70000, 500), (1, 1)])
async def test_flow_value_is_clamped(jsc, flow, first):
    f = await Fast.make(jsc)
    await f.send("x", 1, 0, flow=flow)
    await f.send("x", 2, 2, flow=flow)
    got = await f.replies(3 if flow == 1 else 2)
    assert got[0] == ("1.0", ack(0, first))
    assert got[-1] == ("2.2", done(2, "x", 2))


async def test_a_second_open_batch_starts_slow_and_ramps_up(jsc):
    f = await Fast.make(jsc)
    await f.send("g1", 1, 0, flow=100)
    await f.send("g2", 1, 0, flow=100)
    await f.send("g1", 2, 2, flow=100)
    await f.send("g2", 2, 2, flow=100)
    assert await f.replies(5) == [
        ("1.0", ack(0, 100)),  # the only batch: what the client asked for
        ("1.0", ack(0, 1)), ("1.0", ack(1, 2)),  # g2 shares the stream: one by one, then doubling
        ("2.2", done(3, "g1", 2)), ("2.2", done(4, "g2", 2)),
    ]


async def test_gap_fail_ends_the_batch(jsc):
    f = await Fast.make(jsc)
    await f.send("b", 1, 0)
    await f.send("b", 3, 1)
    await f.send("b", 4, 2)
    assert await f.replies(4) == [("1.0", ack(0, 10)), ("3.1", gap(2, 3)), ("3.1", done(1, "b", 1)),
                                  ("4.2", UNKNOWN)]
    assert (await f.state())["messages"] == 1


async def test_gap_ok_goes_on(jsc):
    f = await Fast.make(jsc)
    await f.send("b", 1, 0, gap="ok")
    await f.send("b", 3, 1, gap="ok")
    await f.send("b", 4, 2, gap="ok")
    assert await f.replies(3) == [("1.0", ack(0, 10)), ("3.1", gap(2, 3)), ("4.2", done(3, "b", 4))]
    assert (await f.state())["messages"] == 3


@pytest.mark.parametrize("mode", ["ok", "fail"])
async def test_a_backward_gap_ends_the_batch(jsc, mode):
    f = await Fast.make(jsc)
    await f.send("b", 1, 0, gap=mode)
    await f.send("b", 2, 1, gap=mode)
    await f.send("b", 2, 1, gap=mode)
    await f.send("b", 3, 2, gap=mode)
    assert await f.replies(4) == [("1.0", ack(0, 10)), ("2.1", gap(3, 2)), ("2.1", done(2, "b", 2)),
                                  ("3.2", UNKNOWN)]


@pytest.mark.parametrize("mode", ["ok", "fail"])
async def test_a_failed_message_is_reported(jsc, mode):
    f = await Fast.make(jsc)
    await f.send("b", 1, 0, gap=mode)
    await f.send("b", 2, 1, gap=mode, headers={"Nats-Expected-Last-Sequence": "0"})
    await f.send("b", 3, 2, gap=mode)
    err = {"type": "err", "seq": 2, "error": {"code": 400, "err_code": 10071, "description": "wrong last sequence: 1"}}
    if mode == "ok":
        assert await f.replies(3) == [("1.0", ack(0, 10)), ("2.1", err), ("3.2", done(2, "b", 3))]
    else:
        assert await f.replies(4) == [("1.0", ack(0, 10)), ("2.1", err), ("2.1", done(1, "b", 1)),
                                      ("3.2", UNKNOWN)]


async def test_a_failed_first_message_gets_a_plain_error(jsc):
    f = await Fast.make(jsc)
    await f.send("b", 1, 0, headers={"Nats-Expected-Last-Sequence": "7"})
    await f.send("s", 1, 2, headers={"Nats-Expected-Stream": "nope"})
    assert await f.replies(3) == [
        ("1.0", ack(0, 10)),
        ("1.0", {"error": {"code": 400, "err_code": 10071, "description": "wrong last sequence: 0"}, "seq": 0}),
        ("1.2", {"error": {"code": 400, "err_code": 10060, "description": "expected stream does not match"},
                 "seq": 0}),
    ]
    await f.send("b", 2, 2)
    assert await f.replies(1) == [("2.2", UNKNOWN)]


async def test_duplicates_are_skipped(jsc):
    f = await Fast.make(jsc)
    await f.send("a", 1, 2, headers={"Nats-Msg-Id": "m1"})
    assert await f.replies(1) == [("1.2", done(1, "a", 1))]
    await f.send("b", 1, 0)
    await f.send("b", 2, 1, headers={"Nats-Msg-Id": "m1"})
    await f.send("b", 3, 2)
    assert await f.replies(2) == [("1.0", ack(0, 10)), ("3.2", done(3, "b", 3))]
    await f.send("c", 1, 2, headers={"Nats-Msg-Id": "m1"})
    assert await f.replies(1) == [("1.2", {"seq": 1, "duplicate": True, "batch": "c", "count": 1})]
    assert (await f.state())["messages"] == 3


async def test_ping(jsc):
    f = await Fast.make(jsc)
    await f.send("p", 1, 0, flow=1)
    await f.send("p", 2, 1, flow=1)
    await f.send("p", 2, 4, flow=1)  # all there: the current ack again
    await f.send("p", 5, 4, flow=1)  # the server saw less: a gap, and with "fail" the end
    await f.send("p", 3, 2, flow=1)
    assert await f.replies(7) == [("1.0", ack(0, 1)), ("1.0", ack(1, 1)), ("2.1", ack(2, 1)), ("2.4", ack(2, 1)),
                                  ("5.4", gap(3, 6)), ("5.4", done(2, "p", 2)), ("3.2", UNKNOWN)]
    await f.send("q", 1, 0, gap="ok")
    await f.send("q", 5, 4, gap="ok")  # with "ok" the batch goes on from there
    await f.send("q", 6, 2, gap="ok")
    assert await f.replies(4) == [("1.0", ack(0, 10)), ("5.4", gap(2, 6)), ("5.4", ack(0, 10)),
                                  ("6.2", done(4, "q", 6))]
    await f.send("r", 1, 4)
    assert await f.replies(1) == [("1.4", UNKNOWN)]


@pytest.mark.parametrize("bid, seq, op, flow, gap_mode", [
    ("b", 1, 9, 10, "fail"),  # unknown operation
    ("b", 1, "x", 10, "fail"),
    ("b", 2, 0, 10, "fail"),  # start must be seq 1
    ("b", 1, 1, 10, "fail"),  # append must be seq > 1
    ("b", 1, 3, 10, "fail"),  # eob cannot be the first
    ("b", 0, 2, 10, "fail"),
    ("b", "x", 2, 10, "fail"),
    ("b", 18446744073709551615, 2, 10, "fail"),
    ("b", 1, 0, 10, "maybe"),
])
async def test_invalid_patterns(jsc, bid, seq, op, flow, gap_mode):
    f = await Fast.make(jsc)
    await f.send(bid, seq, op, flow=flow, gap=gap_mode)
    assert await f.replies(1) == [(f"{seq}.{op}", PATTERN)]
    assert (await f.state())["messages"] == 0


async def test_short_reply_is_an_invalid_pattern(jsc):
    f = await Fast.make(jsc)
    reply = f"{f.prefix}.10.fail.1.0.$FI"  # no batch id before the flow
    await jsc.nc.publish(f"{f.name}.a", b"x", reply=reply)
    (m,) = await collect(f.sub, 1, timeout=2)
    assert json.loads(m.data)["error"]["err_code"] == 10206


async def test_errors_before_the_batch(jsc):
    f = await Fast.make(jsc)
    await f.send("x" * 65, 1, 0)
    await f.send("u", 3, 1)
    await f.send("lv", 1, 0, headers={"Nats-Required-Api-Level": "99"})
    got = await f.replies(3)
    assert [(k, v["error"]["err_code"]) for k, v in got] == [("1.0", 10207), ("3.1", 10208), ("1.0", 10185)]
    await f.send("lv", 2, 2)
    assert await f.replies(1) == [("2.2", UNKNOWN)]  # the api-level failure dropped the batch


async def test_required_api_level_header_is_removed(jsc):
    f = await Fast.make(jsc)
    await f.send("lv", 1, 2, headers={"Nats-Required-Api-Level": "1", "k": "v"})
    assert await f.replies(1) == [("1.2", done(1, "lv", 1))]
    r = await jsc.api(f"STREAM.MSG.GET.{f.name}", {"seq": 1})
    assert base64.b64decode(r["message"]["hdrs"]) == b"NATS/1.0\r\nk: v\r\n\r\n"


async def test_too_many_open_fast_batches(jsc):
    f = await Fast.make(jsc, storage="memory")
    for i in range(1000):
        await f.send(f"o{i}", 1, 0)
    await f.send("o1000", 1, 0)
    errors = []
    while not errors:  # each start is answered by one or two flow acks, then the refusal of the 1001st
        m = await f.sub.next_msg(timeout=5)
        body = json.loads(m.data)
        if "error" in body:
            errors.append((m.subject.split(".")[1], body["error"]))
    assert errors == [("o1000", {"code": 429, "err_code": 10211, "description": "batch publish too many inflight"})]


async def test_no_ack_stream(jsc):
    """On a no_ack stream nats-server leaves out only the first ``seq 0`` ack and the errors before a batch exists;
    flow acks, gaps, per-message errors and the final PubAck are still sent."""
    f = await Fast.make(jsc, no_ack=True, storage="memory")
    await f.send("b1", 1, 0, flow=1)
    await f.send("b1", 2, 1, flow=1)
    await f.send("b1", 3, 2, flow=1)
    assert await f.replies(3) == [("1.0", ack(1, 1)), ("2.1", ack(2, 1)), ("3.2", done(3, "b1", 3))]
    await f.send("b2", 1, 0)
    await f.send("b2", 3, 1)
    await f.send("b3", 1, 2, headers={"Nats-Expected-Stream": "x"})
    await f.send("b4", 2, 1)  # unknown batch: no answer on a no_ack stream
    assert await f.replies(3) == [
        ("3.1", gap(2, 3)), ("3.1", done(4, "b2", 1)),
        ("1.2", {"error": {"code": 400, "err_code": 10060, "description": "expected stream does not match"},
                 "seq": 0}),
    ]
