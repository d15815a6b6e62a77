"""Acks against both servers: every ack kind, the confirmation of acks sent with a reply, ack policies, ack floor,
redelivery, advisories and metrics, and interest/workqueue retention.  Durations are short and real."""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.jetstream.test_consumer_support import (
    MS, SECOND, add_consumer, ack_info, cinfo, next_json, pull, status, validate_event,
)


async def _setup(jsc, n: int = 0, stream_cfg: dict | None = None, **ccfg) -> str:
    s = jsc.name()
    await jsc.create(s, **(stream_cfg or {}))
    for i in range(n):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    ccfg.setdefault("ack_policy", "explicit")
    await add_consumer(jsc, s, "C", **ccfg)
    return s


async def _fetch(jsc, s: str, n: int, consumer: str = "C") -> list:
    msgs = await pull(jsc.nc, s, consumer, {"batch": n, "expires": 300 * MS}, max_msgs=n, timeout=1)
    return [m for m in msgs if status(m) is None]


async def _ack(jsc, m, payload: bytes) -> bytes | None:
    """Ack with a reply subject; the confirmation's payload, or None when none came."""
    try:
        r = await jsc.nc.request(m.reply, payload, timeout=0.5)
        return r.data
    except nats.errors.TimeoutError:
        return None


@pytest.mark.parametrize("payload", [b"", b"+ACK", b"+OK", b"-NAK", b"+WPI", b"+TERM", b"+TERM bad data"])
async def test_every_ack_kind_is_confirmed(jsc, payload):
    s = await _setup(jsc, 1)
    (m,) = await _fetch(jsc, s, 1)
    assert await _ack(jsc, m, payload) == b""


async def test_confirmed_ack_changes_num_ack_pending(jsc):
    s = await _setup(jsc, 3)
    msgs = await _fetch(jsc, s, 3)
    assert (await cinfo(jsc, s, "C"))["num_ack_pending"] == 3
    for i, m in enumerate(msgs):
        await m.ack_sync()
        info = await cinfo(jsc, s, "C")
        assert info["num_ack_pending"] == 2 - i and info["ack_floor"]["stream_seq"] == i + 1
    # Acking again is still confirmed and changes nothing.
    assert await _ack(jsc, msgs[0], b"+ACK") == b""
    assert (await cinfo(jsc, s, "C"))["num_ack_pending"] == 0


async def test_out_of_order_acks_and_floor(jsc):
    s = await _setup(jsc, 4)
    msgs = await _fetch(jsc, s, 4)
    await msgs[2].ack_sync()
    await msgs[1].ack_sync()
    info = await cinfo(jsc, s, "C")
    assert info["ack_floor"] == {**info["ack_floor"], "consumer_seq": 0, "stream_seq": 0}
    await msgs[0].ack_sync()
    info = await cinfo(jsc, s, "C")
    assert (info["ack_floor"]["consumer_seq"], info["ack_floor"]["stream_seq"]) == (3, 3)
    assert info["num_ack_pending"] == 1


async def test_ack_all(jsc):
    s = await _setup(jsc, 5, ack_policy="all")
    msgs = await _fetch(jsc, s, 5)
    assert await _ack(jsc, msgs[2], b"+ACK") == b""
    info = await cinfo(jsc, s, "C")
    assert info["ack_floor"]["stream_seq"] == 3 and info["num_ack_pending"] == 2
    assert await _ack(jsc, msgs[0], b"+ACK") == b""  # below the floor: a no-op, still confirmed
    await msgs[4].ack_sync()
    info = await cinfo(jsc, s, "C")
    assert info["ack_floor"]["stream_seq"] == 5 and info["num_ack_pending"] == 0


async def test_ack_none(jsc):
    s = await _setup(jsc, 2, ack_policy="none")
    msgs = await _fetch(jsc, s, 2)
    info = await cinfo(jsc, s, "C")
    assert info["ack_floor"]["stream_seq"] == 2 and info["num_ack_pending"] == 0
    assert msgs[0].reply.startswith(f"$JS.ACK.{s}.C.1.1.1.")  # an ack subject even for ack none
    with pytest.raises(nats.errors.NoRespondersError):
        await jsc.nc.request(msgs[0].reply, b"", timeout=0.5)


@pytest.mark.parametrize("tail", ["NOPE.1.1.1.1.0", "C.1.1.1.1", "C.1.1.1.1.0.x"], ids=["consumer", "short", "ten"])
async def test_ack_subject_of_no_consumer_has_no_responders(jsc, tail):
    # An unknown consumer, and ack subjects of 8 and 10 tokens (neither the 9-token form nor the 11+ one).
    s = await _setup(jsc, 1)
    with pytest.raises(nats.errors.NoRespondersError):
        await jsc.nc.request(f"$JS.ACK.{s}.{tail}", b"", timeout=0.5)


@pytest.mark.parametrize("tail", ["C.1.1.1..0", "C.1.1.1.1.", "C..1.1.1.0"], ids=["ts", "last", "count"])
async def test_ack_subject_with_an_empty_token_is_not_an_ack(jsc, tail):
    # A subject with an empty token matches no subscription (sublist.go): no responders, and a plain publish to
    # it acks nothing, though the stream and consumer tokens name a real consumer with message 1 pending.
    s = await _setup(jsc, 1)
    assert len(await _fetch(jsc, s, 1)) == 1
    with pytest.raises(nats.errors.NoRespondersError):
        await jsc.nc.request(f"$JS.ACK.{s}.{tail}", b"", timeout=0.5)
    await jsc.nc.publish(f"$JS.ACK.{s}.{tail}", b"+ACK")
    await jsc.nc.flush()
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 1 and info["ack_floor"]["stream_seq"] == 0


async def test_client_subscribed_to_acks_sees_them_and_they_still_ack(jsc):
    # A client's $JS.ACK.> (or ">") subscription receives every ack, and the consumer still applies them; after
    # it unsubscribes, acks go on being applied (Skiff routes acks straight to its consumers when nothing else
    # could match them, Sublist.ack_only).
    s = await _setup(jsc, 4)
    msgs = await _fetch(jsc, s, 4)
    seen: list = []

    async def spy_cb(m) -> None:
        seen.append((m.subject, m.data))

    spy = await jsc.nc.subscribe("$JS.ACK.>", cb=spy_cb)
    await jsc.nc.flush()
    await msgs[0].ack()
    assert await _ack(jsc, msgs[1], b"+ACK") == b""
    for _ in range(50):
        if len(seen) == 2:
            break
        await asyncio.sleep(0.01)
    assert seen == [(msgs[0].reply, b""), (msgs[1].reply, b"+ACK")]  # nats-py acks with an empty payload
    await spy.unsubscribe()
    await jsc.nc.flush()
    await msgs[2].ack()
    assert await _ack(jsc, msgs[3], b"") == b""
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 0 and info["ack_floor"]["stream_seq"] == 4
    assert len(seen) == 2


async def test_nak_redelivers_now_and_with_delay(jsc):
    s = await _setup(jsc, 1)
    (m,) = await _fetch(jsc, s, 1)
    await m.nak()
    (m2,) = await _fetch(jsc, s, 1)
    assert m2.data == b"m0" and ack_info(m2.reply)["delivered"] == 2
    await jsc.nc.publish(m2.reply, b'-NAK {"delay": 500000000}')
    msgs = await pull(jsc.nc, s, "C", {"batch": 1, "expires": 200 * MS}, timeout=0.5)
    assert [status(x) for x in msgs] == [(408, "Request Timeout")]  # not before the delay
    await asyncio.sleep(0.35)
    (m3,) = await _fetch(jsc, s, 1)
    assert ack_info(m3.reply)["delivered"] == 3
    info = await cinfo(jsc, s, "C")
    assert info["num_redelivered"] == 1


async def test_nak_advisory(jsc):
    s = await _setup(jsc, 1)
    adv = await jsc.nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{s}.C")
    (m,) = await _fetch(jsc, s, 1)
    await m.nak()
    ev = await next_json(adv)
    validate_event(ev)
    assert (ev["stream"], ev["consumer"], ev["consumer_seq"], ev["stream_seq"], ev["deliveries"]) == (s, "C", 1, 1, 1)


async def test_wpi_resets_ack_wait(jsc):
    s = await _setup(jsc, 1, ack_wait=400 * MS)
    (m,) = await _fetch(jsc, s, 1)
    for _ in range(3):
        await asyncio.sleep(0.2)
        await m.in_progress()
    msgs = await pull(jsc.nc, s, "C", {"batch": 1, "expires": 200 * MS}, timeout=0.5)
    assert [status(x) for x in msgs] == [(408, "Request Timeout")]  # never redelivered while in progress
    await asyncio.sleep(0.3)
    (m2,) = await _fetch(jsc, s, 1)
    assert ack_info(m2.reply)["delivered"] == 2


async def test_term_with_reason_and_advisory(jsc):
    s = await _setup(jsc, 2, ack_wait=200 * MS)
    adv = await jsc.nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{s}.C")
    msgs = await _fetch(jsc, s, 2)
    assert await _ack(jsc, msgs[0], b"+TERM not for me") == b""
    ev = await next_json(adv)
    validate_event(ev)
    assert ev["type"] == "io.nats.jetstream.advisory.v1.terminated"
    assert (ev["stream_seq"], ev["consumer_seq"], ev["deliveries"], ev["reason"]) == (1, 1, 1, "not for me")
    await msgs[1].term()
    ev = await next_json(adv)
    assert "reason" not in ev
    await asyncio.sleep(0.3)
    msgs = await pull(jsc.nc, s, "C", {"batch": 1, "expires": 100 * MS}, timeout=0.3)
    assert [status(x) for x in msgs] == [(408, "Request Timeout")]  # terminated: never redelivered
    info = await cinfo(jsc, s, "C")
    assert info["ack_floor"]["stream_seq"] == 2 and info["num_ack_pending"] == 0


async def test_ack_next(jsc):
    s = await _setup(jsc, 3)
    (m,) = await _fetch(jsc, s, 1)
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox)
    await jsc.nc.publish(m.reply, b"+NXT 2", reply=inbox)
    got = [await sub.next_msg(timeout=1) for _ in range(2)]
    assert [g.data for g in got] == [b"m1", b"m2"]
    info = await cinfo(jsc, s, "C")
    assert info["ack_floor"]["stream_seq"] == 1 and info["num_ack_pending"] == 2


async def test_redelivery_after_ack_wait_and_max_deliver_advisory(jsc):
    s = await _setup(jsc, 1, ack_wait=150 * MS, max_deliver=2)
    adv = await jsc.nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{s}.C")
    dcs = []
    for _ in range(3):
        msgs = await pull(jsc.nc, s, "C", {"batch": 1, "expires": 400 * MS}, timeout=0.6)
        dcs += [ack_info(x.reply)["delivered"] for x in msgs if status(x) is None]
    assert dcs == [1, 2]
    ev = await next_json(adv)
    validate_event(ev)
    assert (ev["stream"], ev["consumer"], ev["stream_seq"], ev["deliveries"]) == (s, "C", 1, 2)
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 0 and info["num_redelivered"] == 1


async def test_backoff_spacing(jsc):
    s = await _setup(jsc, 1, backoff=[100 * MS, 400 * MS], max_deliver=4)
    info = await cinfo(jsc, s, "C")
    assert info["config"]["ack_wait"] == 100 * MS
    loop = asyncio.get_running_loop()
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox)
    await jsc.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.C", b'{"batch":3,"expires":2000000000}', reply=inbox)
    times = []
    for _ in range(3):
        m = await sub.next_msg(timeout=2)
        times.append(loop.time())
    gaps = [times[1] - times[0], times[2] - times[1]]
    assert 0.08 < gaps[0] < 0.35 and 0.35 < gaps[1] < 0.8, gaps


@pytest.mark.parametrize("confirmed", [True, False], ids=["ack_sync", "ack"])
async def test_ack_metric_sampled(jsc, confirmed):
    # ack() sends no reply subject: Skiff takes its per-ack in-line path (acks.py process_ack) for those.
    s = await _setup(jsc, 1, sample_freq="100%")
    metric = await jsc.nc.subscribe(f"$JS.EVENT.METRIC.CONSUMER.ACK.{s}.C")
    (m,) = await _fetch(jsc, s, 1)
    await (m.ack_sync() if confirmed else m.ack())
    ev = await next_json(metric)
    validate_event(ev)
    assert (ev["stream_seq"], ev["consumer_seq"], ev["deliveries"]) == (1, 1, 1) and ev["ack_time"] > 0


async def test_max_ack_pending_stops_delivery(jsc):
    s = await _setup(jsc, 3, max_ack_pending=1)
    (m,) = await _fetch(jsc, s, 2)
    nc2 = await nats.connect(jsc.server.url)
    try:
        msgs = await pull(nc2, s, "C", {"batch": 1, "expires": 200 * MS}, timeout=0.5)
        assert [status(x) for x in msgs] == [(408, "Request Timeout")]
        await m.ack_sync()
        msgs = await pull(nc2, s, "C", {"batch": 1, "expires": 200 * MS}, timeout=0.5)
        assert [x.data for x in msgs] == [b"m1"]
    finally:
        await nc2.close()


async def test_workqueue_removes_on_ack(jsc):
    s = await _setup(jsc, 3, stream_cfg={"retention": "workqueue"})
    msgs = await _fetch(jsc, s, 3)
    await msgs[1].ack_sync()
    st = (await jsc.info(s))["state"]
    assert (st["messages"], st["first_seq"]) == (2, 1)
    await msgs[0].ack_sync()
    await msgs[2].term()
    await asyncio.sleep(0.05)
    assert (await jsc.info(s))["state"]["messages"] == 0


async def _until(cond, timeout: float = 2.0):
    """Poll ``cond`` (a coroutine function) until it answers true: nats-server applies acks from a queue of its own,
    after the client's later requests may have been answered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = await cond()
        if got or loop.time() > deadline:
            return got
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("retention", ["workqueue", "interest"])
async def test_plain_acks_remove_from_workqueue_and_interest_streams(jsc, retention):
    # ack() without a reply, out of order: each acked message leaves the stream, the floor follows the lowest.
    s = await _setup(jsc, 0, stream_cfg={"retention": retention})  # the consumer first: interest keeps nothing before
    for i in range(3):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    msgs = await _fetch(jsc, s, 3)
    await msgs[1].ack()

    async def state():
        st = (await jsc.info(s))["state"]
        return st["messages"], st["first_seq"]
    assert await _until(lambda: _is(state, (2, 1))) == (2, 1)
    await msgs[0].ack()
    assert await _until(lambda: _is(state, (1, 3))) == (1, 3)
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 1
    assert (info["ack_floor"]["consumer_seq"], info["ack_floor"]["stream_seq"]) == (2, 2)


async def _is(get, want):
    """``want`` once ``get()`` answers it, else None (for :func:`_until`)."""
    got = await get()
    return got if got == want else None


async def test_interest_stream_keeps_until_all_consumers_ack(jsc):
    s = jsc.name()
    await jsc.create(s, retention="interest")
    await jsc.pub(f"{s}.a", b"nobody")  # no consumer yet: not stored, but acked
    assert (await jsc.info(s))["state"]["messages"] == 0
    await add_consumer(jsc, s, "A", ack_policy="explicit")
    await add_consumer(jsc, s, "B", ack_policy="explicit", filter_subject=f"{s}.b")
    await jsc.pub(f"{s}.a", b"a1")
    await jsc.pub(f"{s}.b", b"b1")
    assert (await jsc.info(s))["state"]["messages"] == 2
    (ma1, mb1a) = await _fetch(jsc, s, 2, "A")
    await ma1.ack_sync()
    assert (await jsc.info(s))["state"]["messages"] == 1  # only A wanted s.a
    await mb1a.ack_sync()
    assert (await jsc.info(s))["state"]["messages"] == 1  # B still needs s.b
    (mb1b,) = await _fetch(jsc, s, 1, "B")
    await mb1b.ack_sync()
    assert (await jsc.info(s))["state"]["messages"] == 0


async def test_interest_discard_new_max_msgs_one_frees_the_slot(jsc):
    s = jsc.name()
    await jsc.create(s, retention="interest", max_msgs=1, discard="new")
    await add_consumer(jsc, s, "A", ack_policy="explicit")
    await jsc.pub(f"{s}.a", b"1")
    r = await jsc.nc.request(f"{s}.a", b"2", timeout=1)
    assert json.loads(r.data)["error"]["err_code"] == 10077
    (m,) = await _fetch(jsc, s, 1, "A")
    await m.ack_sync()
    ack = await jsc.pub(f"{s}.a", b"3")
    assert ack["seq"] == 2
