"""Push consumers against both servers: delivery starts with interest, deliver groups, idle heartbeats, flow
control, push_bound, headers_only, and nats-py's push subscribe."""
from __future__ import annotations

import asyncio

import nats

from tests.jetstream.conftest import collect
from tests.jetstream.test_consumer_support import MS, add_consumer, ack_info, cinfo, status


async def _stream(jsc, n: int = 0) -> str:
    s = jsc.name()
    await jsc.create(s)
    for i in range(n):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    return s


async def test_delivery_starts_with_interest(jsc):
    s = await _stream(jsc, 3)
    dsubj = jsc.name("dlv")
    r = await add_consumer(jsc, s, "P", deliver_subject=dsubj)
    assert "push_bound" not in r
    sub = await jsc.nc.subscribe(dsubj)
    msgs = await collect(sub, 3, timeout=1)
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
    assert [m.subject for m in msgs] == [f"{s}.a"] * 3  # the stored subject, not the deliver subject
    assert [ack_info(m.reply)["pending"] for m in msgs] == [2, 1, 0]
    info = await cinfo(jsc, s, "P")
    assert info["push_bound"] is True and info["num_pending"] == 0
    await jsc.pub(f"{s}.a", b"later")
    assert (await sub.next_msg(timeout=1)).data == b"later"
    await sub.unsubscribe()
    await jsc.nc.flush()
    await asyncio.sleep(0.05)
    assert "push_bound" not in await cinfo(jsc, s, "P")


async def test_deliver_group_splits_the_work(jsc):
    s = await _stream(jsc)
    dsubj = jsc.name("grp")
    await add_consumer(jsc, s, "G", deliver_subject=dsubj, deliver_group="workers", ack_policy="explicit")
    nc2 = await nats.connect(jsc.server.url)
    try:
        a = await jsc.nc.subscribe(dsubj, queue="workers")
        b = await nc2.subscribe(dsubj, queue="workers")
        await nc2.flush()
        for i in range(40):
            await jsc.pub(f"{s}.a", b"%d" % i)
        ga = await collect(a, timeout=0.3)
        gb = await collect(b, timeout=0.3)
        assert len(ga) + len(gb) == 40
        assert ga and gb
        assert sorted(int(m.data) for m in ga + gb) == list(range(40))
    finally:
        await nc2.close()


async def test_idle_heartbeats_while_idle(jsc):
    s = await _stream(jsc, 1)
    dsubj = jsc.name("hb")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "H", deliver_subject=dsubj, idle_heartbeat=100 * MS)
    msgs = await collect(sub, 4, timeout=1)
    assert msgs[0].data == b"m0"
    hbs = [m for m in msgs[1:] if status(m) == (100, "Idle Heartbeat")]
    assert len(hbs) == 3
    assert hbs[0].headers["Nats-Last-Consumer"] == "1" and hbs[0].headers["Nats-Last-Stream"] == "1"
    assert hbs[0].data == b"" and not hbs[0].reply


async def test_flow_control_request_and_reply(jsc):
    s = await _stream(jsc)
    dsubj = jsc.name("fc")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "F", deliver_subject=dsubj, flow_control=True, idle_heartbeat=SECOND_HB)
    big = b"x" * (512 * 1024)
    for _ in range(4):  # 2 MiB > half of the first 2 MiB window
        await jsc.pub(f"{s}.a", big)
    fc = None
    data = 0
    for _ in range(6):
        m = await sub.next_msg(timeout=2)
        if status(m) == (100, "FlowControl Request"):
            fc = m
            break
        data += 1
    assert fc is not None and fc.reply.startswith(f"$JS.FC.{s}.F.") and data >= 2
    await jsc.nc.publish(fc.reply, b"")
    await jsc.pub(f"{s}.a", b"after")
    rest = await collect(sub, timeout=0.5)
    assert b"after" in [m.data for m in rest]


SECOND_HB = 1_000_000_000


async def test_flow_control_subject_without_a_flow_control_consumer_has_no_responders(jsc):
    # nats-server subscribes $JS.FC.<stream>.<consumer>.* only for a consumer with flow control (consumer.go
    # fcSub): a request there for a missing consumer, or one without flow control, has nobody to answer it.
    s = await _stream(jsc)
    await add_consumer(jsc, s, "P", deliver_subject=jsc.name("plain"))
    await add_consumer(jsc, s, "F", deliver_subject=jsc.name("fc"), flow_control=True, idle_heartbeat=SECOND_HB)
    for subject in (f"$JS.FC.{s}.NONE.1", f"$JS.FC.{s}.P.1", f"$JS.FC.{s}.F.1.extra", f"$JS.FC.{s}.F"):
        try:
            await jsc.nc.request(subject, b"", timeout=1)
        except nats.errors.NoRespondersError:
            continue
        raise AssertionError(f"{subject}: answered")
    # The flow-control consumer's own subject has a subscriber: a stale answer is taken (no reply) and dropped.
    try:
        await jsc.nc.request(f"$JS.FC.{s}.F.1", b"", timeout=0.3)
    except nats.errors.TimeoutError:
        pass
    else:
        raise AssertionError("a flow-control answer got a reply")


async def test_headers_only(jsc):
    s = await _stream(jsc)
    await jsc.pub(f"{s}.a", b"12345", headers={"X-A": "1"})
    dsubj = jsc.name("ho")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "O", deliver_subject=dsubj, headers_only=True)
    m = await sub.next_msg(timeout=1)
    assert m.data == b"" and m.headers["Nats-Msg-Size"] == "5" and m.headers["X-A"] == "1"


async def test_nats_py_push_subscribe_and_ack(jsc):
    s = await _stream(jsc, 3)
    js = jsc.nc.jetstream()
    sub = await js.subscribe(f"{s}.>", durable="pd", manual_ack=True)
    got = []
    for _ in range(3):
        m = await sub.next_msg(timeout=1)
        got.append(m.data)
        await m.ack_sync()
    assert got == [b"m0", b"m1", b"m2"]
    info = await js.consumer_info(s, "pd")
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 3
    await sub.unsubscribe()


async def test_replay_original_keeps_the_spacing(jsc):
    s = await _stream(jsc)
    for i in range(3):
        await jsc.pub(f"{s}.a", b"%d" % i)
        await asyncio.sleep(0.25)
    dsubj = jsc.name("rp")
    sub = await jsc.nc.subscribe(dsubj)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await add_consumer(jsc, s, "R", deliver_subject=dsubj, replay_policy="original")
    for _ in range(3):
        await sub.next_msg(timeout=2)
    took = loop.time() - t0  # two gaps of ~0.25s, as they were published; instant replay takes a few ms
    assert 0.4 < took < 1.5, took


async def test_rate_limit_bps(jsc):
    s = jsc.name()
    await jsc.create(s, max_msg_size=1000)  # the limiter's burst is the stream's max_msg_size
    for _ in range(6):
        await jsc.pub(f"{s}.a", b"x" * 900)
    dsubj = jsc.name("rl")
    sub = await jsc.nc.subscribe(dsubj)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await add_consumer(jsc, s, "L", deliver_subject=dsubj, rate_limit_bps=80_000)  # 10,000 bytes/s
    for _ in range(6):
        await sub.next_msg(timeout=2)
    took = loop.time() - t0
    assert 0.35 < took < 1.5, took


async def test_inbox_deliver_subject_follows_subscribers_between_deliveries(jsc):
    """An _INBOX. deliver subject (what clients create; the Sublist does not cache it) whose subscribers change
    between deliveries: each message goes to exactly the subscribers of that moment (Skiff keeps the consumer's
    last match until the Sublist changes: delivery.py DestCache)."""
    s = await _stream(jsc)
    dsubj = f"_INBOX.{jsc.name('dlv')}"
    a = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "P", deliver_subject=dsubj, ack_policy="none")
    nc2 = await nats.connect(jsc.server.url)
    try:
        for i in range(2):
            await jsc.pub(f"{s}.a", b"one%d" % i)
        assert [m.data for m in await collect(a, 2, timeout=1)] == [b"one0", b"one1"]
        b = await nc2.subscribe(dsubj)
        await nc2.flush()
        for i in range(2):
            await jsc.pub(f"{s}.a", b"two%d" % i)
        assert [m.data for m in await collect(a, 2, timeout=1)] == [b"two0", b"two1"]
        assert [m.data for m in await collect(b, 2, timeout=1)] == [b"two0", b"two1"]
        await a.unsubscribe()
        await jsc.nc.flush()
        for i in range(2):
            await jsc.pub(f"{s}.a", b"three%d" % i)
        assert [m.data for m in await collect(b, 2, timeout=1)] == [b"three0", b"three1"]
        await b.unsubscribe()
        await nc2.flush()
        await jsc.pub(f"{s}.a", b"four")
        c = await jsc.nc.subscribe(dsubj)
        assert [m.data for m in await collect(c, 1, timeout=1)] == [b"four"]  # delivered again with interest
    finally:
        await nc2.close()
