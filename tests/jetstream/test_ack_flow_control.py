"""``ack_policy: flow_control`` (nats-server 2.14, ADR-60): a push consumer acked by its flow-control answers.

What a durable sourcing consumer is made of, usable by any client: there is no ack subject; a flow-control request
goes out when max_ack_pending messages are outstanding and after an idle heartbeat while any are; the answer's
``Nats-Last-Stream`` / ``Nats-Last-Consumer`` headers ack everything up to them, as ``ack_policy: all`` would; an
answer without them acks nothing.  nats-server: consumer.go needFlowControl, processFlowControl, loopAndGatherMsgs.
"""
from __future__ import annotations

import asyncio

from nats.errors import NoRespondersError

from tests.jetstream.conftest import collect
from tests.jetstream.test_consumer_support import add_consumer, cinfo, status

FC = (100, "FlowControl Request")
HB = (100, "Idle Heartbeat")


async def _setup(jsc, n: int, max_ack_pending: int = 3, **stream_cfg):
    s = jsc.name()
    await jsc.create(s, **stream_cfg)
    dsubj = jsc.name("dlv")
    sub = await jsc.nc.subscribe(dsubj)
    r = await add_consumer(jsc, s, "F", deliver_subject=dsubj, ack_policy="flow_control",
                           max_ack_pending=max_ack_pending)
    for i in range(n):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    return s, sub, r


async def _answer(jsc, fc, stream_seq: int | None, consumer_seq: int | None) -> None:
    headers = {}
    if stream_seq is not None:
        headers["Nats-Last-Stream"] = str(stream_seq)
    if consumer_seq is not None:
        headers["Nats-Last-Consumer"] = str(consumer_seq)
    await jsc.nc.publish(fc.reply, b"", headers=headers or None)
    await jsc.nc.flush()


async def test_defaults_and_the_required_level(jsc):
    s, _sub, r = await _setup(jsc, 0)
    cfg = r["config"]
    # Flow control and the 1 s heartbeat are set for the user; no ack wait, no redelivery limit.
    assert cfg["flow_control"] is True and cfg["idle_heartbeat"] == 1_000_000_000
    assert "ack_wait" not in cfg and cfg["max_deliver"] == -1
    assert cfg["metadata"]["_nats.req.level"] == "4"


async def test_a_full_window_asks_and_the_answer_acks_up_to_its_headers(jsc):
    s, sub, _ = await _setup(jsc, 5)
    msgs = await collect(sub, 4, timeout=1)
    assert [m.data for m in msgs[:3]] == [b"m0", b"m1", b"m2"]
    fc = msgs[3]
    assert status(fc) == FC and fc.reply.startswith(f"$JS.FC.{s}.F.")
    info = await cinfo(jsc, s, "F")
    for _ in range(40):
        # nats-server counts a stored message into num_pending when the stream signals the consumer, which under
        # load can come after the PubAck (seen once in a full run: 1 for a moment); its value settles at 2
        if info["num_pending"] == 2:
            break
        await asyncio.sleep(0.05)
        info = await cinfo(jsc, s, "F")
    assert info["num_ack_pending"] == 3 and info["ack_floor"]["stream_seq"] == 0 and info["num_pending"] == 2

    await _answer(jsc, fc, 2, 2)
    more = [m for m in await collect(sub, timeout=0.5) if status(m) is None]
    assert [m.data for m in more] == [b"m3", b"m4"]  # two acked: two more fit in the window
    info = await cinfo(jsc, s, "F")
    assert info["ack_floor"]["stream_seq"] == 2 and info["ack_floor"]["consumer_seq"] == 2
    assert info["num_ack_pending"] == 3 and info["num_pending"] == 0


async def test_an_answer_without_positions_acks_nothing(jsc):
    s, sub, _ = await _setup(jsc, 4)
    msgs = await collect(sub, 4, timeout=1)
    assert status(msgs[3]) == FC
    await _answer(jsc, msgs[3], None, None)  # what a plain client answers
    await asyncio.sleep(0.2)
    info = await cinfo(jsc, s, "F")
    assert info["ack_floor"]["stream_seq"] == 0 and info["num_ack_pending"] == 3 and info["num_pending"] == 1
    assert [m for m in await collect(sub, timeout=0.2) if status(m) is None] == []


async def test_acks_on_the_ack_subject_have_no_responder(jsc):
    s, sub, _ = await _setup(jsc, 1)
    m = (await collect(sub, 1, timeout=1))[0]
    assert m.reply.startswith(f"$JS.ACK.{s}.F.")
    try:
        await jsc.nc.request(m.reply, b"+ACK", timeout=1)
        answered = True
    except NoRespondersError:
        answered = False
    assert not answered
    assert (await cinfo(jsc, s, "F"))["ack_floor"]["stream_seq"] == 0


async def test_the_heartbeat_asks_while_messages_are_outstanding_and_nothing_is_redelivered(jsc):
    s, sub, _ = await _setup(jsc, 2, max_ack_pending=10)
    got = await collect(sub, 4, timeout=2)
    assert [m.data for m in got[:2]] == [b"m0", b"m1"]
    assert [status(m) for m in got[2:]] == [HB, FC]  # the window is not full: the heartbeat brings the request
    fc = got[3]
    # Unanswered, the next heartbeat says the consumer is stalled on it, and no message is sent again.
    nxt = await collect(sub, 1, timeout=2)
    assert status(nxt[0]) == HB and nxt[0].headers["Nats-Consumer-Stalled"] == fc.reply
    await _answer(jsc, fc, 2, 2)
    await asyncio.sleep(0.2)
    info = await cinfo(jsc, s, "F")
    assert info["ack_floor"]["stream_seq"] == 2 and info["num_ack_pending"] == 0
    assert info["num_redelivered"] == 0


async def test_a_workqueue_stream_drops_what_the_answers_ack(jsc):
    s, sub, _ = await _setup(jsc, 5, retention="workqueue")
    msgs = await collect(sub, 4, timeout=1)
    assert status(msgs[3]) == FC
    await _answer(jsc, msgs[3], 3, 3)
    await collect(sub, timeout=0.3)
    st = (await jsc.api(f"STREAM.INFO.{s}"))["state"]
    assert st["messages"] == 2 and st["first_seq"] == 4
