"""Faults on an embedded server (skiff/testing/faults.py) and what a nats-py client sees, beside the same event
caused for real where a test can cause it."""
import asyncio
import errno
import socket
import time
from pathlib import Path

import nats
import nats.js.errors
import pytest
from skiff.log import capture_logs

from skiff.testing.faults import Faults

pytestmark = pytest.mark.skiff_only


async def _events(url: str, **kw):
    ev = {"disconnected": asyncio.Event(), "reconnected": asyncio.Event(), "errors": []}

    async def disconnected():
        ev["disconnected"].set()

    async def reconnected():
        ev["reconnected"].set()

    async def error(e):
        ev["errors"].append(e)

    nc = await nats.connect(url, disconnected_cb=disconnected, reconnected_cb=reconnected, error_cb=error,
                            reconnect_time_wait=0.05, **kw)
    return nc, ev


async def test_drop_is_a_network_failure_and_the_client_reconnects(nats_server):
    nc, ev = await _events(nats_server.client_url, name="app")
    assert Faults(nats_server).drop(name="app")
    await asyncio.wait_for(ev["disconnected"].wait(), 5)
    await asyncio.wait_for(ev["reconnected"].wait(), 5)
    sub = await nc.subscribe("after")
    await nc.publish("after", b"ok")
    assert (await sub.next_msg(timeout=2)).data == b"ok"
    await nc.close()


async def test_real_killed_connection_looks_the_same(nats_server_factory):
    """The real event: the server goes away and comes back on its port; the client goes through the same
    disconnect and reconnect."""
    srv = await nats_server_factory()
    nc, ev = await _events(srv.client_url, name="app", max_reconnect_attempts=-1)
    srv = await nats_server_factory.restart(srv)
    await asyncio.wait_for(ev["disconnected"].wait(), 5)
    await asyncio.wait_for(ev["reconnected"].wait(), 10)
    await nc.close()


async def test_stalled_writes_make_a_slow_consumer(nats_server_factory):
    srv = await nats_server_factory(max_pending=256 * 1024)
    nc, ev = await _events(srv.client_url, name="slow", allow_reconnect=False)
    await nc.subscribe("flood")
    await nc.flush()
    pub = await nats.connect(srv.client_url)
    with Faults(srv).stall(name="slow", reads=False, writes=True):
        for _ in range(400):
            await pub.publish("flood", b"x" * 1024)
        await pub.flush()
        await asyncio.wait_for(ev["disconnected"].wait(), 5)  # closed as a slow consumer at max_pending
    assert srv.slow_consumers == 1
    await pub.close()
    await nc.close()


async def test_stalled_reads_then_undo(nats_server):
    nc = await nats.connect(nats_server.client_url, name="app")
    sub = await nc.subscribe("echo")
    fault = Faults(nats_server).stall(name="app", reads=True)
    await nc.publish("echo", b"1")
    with pytest.raises(nats.errors.TimeoutError):
        await sub.next_msg(timeout=0.3)  # the server does not read what the client sent
    fault.undo()
    assert (await sub.next_msg(timeout=2)).data == b"1"
    await nc.close()


async def test_latency(nats_server):
    nc = await nats.connect(nats_server.client_url, name="app")
    sub = await nc.subscribe("lat")
    with Faults(nats_server).latency(0.3, name="app"):
        t = time.monotonic()
        await nc.publish("lat", b"x")
        await sub.next_msg(timeout=2)
        assert time.monotonic() - t >= 0.29
    t = time.monotonic()
    await nc.publish("lat", b"y")
    await sub.next_msg(timeout=2)
    assert time.monotonic() - t < 0.29
    await nc.close()


async def _receive(sub, n: int) -> tuple[float, list[bytes]]:
    t = time.monotonic()
    got = [(await sub.next_msg(timeout=5)).data for _ in range(n)]
    return time.monotonic() - t, got


@pytest.mark.parametrize("limited", ["name", "every"])
async def test_bandwidth_makes_a_slow_reader_that_still_reads(nats_server, limited):
    """40 messages of 1 KB to a reader limited to 80 KB/s take about half a second (without the limit: a few
    milliseconds), all of them arrive in order, and the reader is not a slow consumer: it is below max_pending."""
    nc, ev = await _events(nats_server.client_url, name="reader")
    sub = await nc.subscribe("bw")
    await nc.flush()
    pub = await nats.connect(nats_server.client_url)
    payloads = [b"%04d" % i + b"x" * 1020 for i in range(40)]

    async def burst() -> tuple[float, list[bytes]]:
        for p in payloads:
            await pub.publish("bw", p)
        await pub.flush()
        return await _receive(sub, len(payloads))

    fast, got = await burst()
    assert got == payloads
    kw = {"every": True} if limited == "every" else {"name": "reader"}
    with Faults(nats_server).bandwidth(80_000, **kw):
        slow, got = await burst()
    assert got == payloads
    assert 0.4 <= slow < 3, slow  # ~42 KB on the wire at 80 KB/s
    again, got = await burst()
    assert got == payloads
    assert max(fast, again) * 2 < slow, (fast, slow, again)  # unlimited: milliseconds (bounds loose for a busy CI)
    assert not ev["disconnected"].is_set() and nats_server.slow_consumers == 0
    await pub.close()
    await nc.close()


async def test_bandwidth_on_every_connection_covers_connections_made_later(nats_server):
    """``every=True`` is "throttle every connection", as a toxiproxy toxic limits every connection through its
    proxy: a reader that connects after the call is limited too, until undo(); then a new connection is not."""
    early = await nats.connect(nats_server.client_url, name="early")  # connected at the call
    fault = Faults(nats_server).bandwidth(80_000, every=True)
    late, ev = await _events(nats_server.client_url, name="late")  # accepted while the fault lasts
    sub = await late.subscribe("bw")
    await late.flush()
    payloads = [b"%04d" % i + b"x" * 1020 for i in range(40)]

    async def burst(pub, sub) -> tuple[float, list[bytes]]:
        for p in payloads:
            await pub.publish("bw", p)
        await pub.flush()
        return await _receive(sub, len(payloads))

    slow, got = await burst(early, sub)
    assert got == payloads
    assert 0.4 <= slow < 3, slow  # ~42 KB on the wire at 80 KB/s: the late reader is limited
    fault.undo()
    fast, got = await burst(early, sub)  # the late reader's link is fast again
    assert got == payloads
    after = await nats.connect(nats_server.client_url)  # accepted after undo(): never limited
    sub2 = await after.subscribe("bw")
    await after.flush()
    again, got = await burst(early, sub2)
    assert got == payloads
    assert max(fast, again) * 2 < slow, (fast, slow, again)
    assert type(nats_server.clients) is dict  # nothing waits for new connections any more
    assert not ev["disconnected"].is_set() and nats_server.slow_consumers == 0
    for nc in (early, late, after):
        await nc.close()


async def test_bandwidth_below_the_publish_rate_ends_in_a_slow_consumer(nats_server_factory):
    """The reader gets some of its messages (it is slow, not stalled) until its unsent output passes max_pending:
    then it is closed as a slow consumer, as nats-server closes a reader on a slow link."""
    srv = await nats_server_factory(max_pending=64 * 1024)
    nc, ev = await _events(srv.client_url, name="reader", allow_reconnect=False)
    got = []

    async def on_msg(msg):
        got.append(msg)

    await nc.subscribe("bw", cb=on_msg)
    await nc.flush()
    pub = await nats.connect(srv.client_url)
    fault = Faults(srv).bandwidth(20_000, name="reader")
    for _ in range(10):
        await pub.publish("bw", b"x" * 1024)
    await pub.flush()
    await asyncio.sleep(0.3)
    assert 0 < len(got) < 10 and srv.slow_consumers == 0  # a slow link, below max_pending: still reading
    for _ in range(100):
        await pub.publish("bw", b"x" * 1024)
    await pub.flush()
    await asyncio.wait_for(ev["disconnected"].wait(), 5)
    assert srv.slow_consumers == 1
    fault.undo()
    await pub.close()
    await nc.close()


async def test_refused_connections_then_accepted_on_the_same_port(nats_server):
    port = nats_server.port
    fault = Faults(nats_server).refuse_connections()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    with pytest.raises(ConnectionRefusedError):  # what nats.connect meets (it then reports NoServersError)
        await asyncio.open_connection("127.0.0.1", port)
    fault.undo()
    await asyncio.sleep(0.05)
    nc = await nats.connect(nats_server.client_url)
    assert nc.is_connected
    await nc.close()


@pytest.mark.parametrize("fsync", [False, True])
async def test_failed_store_write_is_an_error_puback_then_publishes_go_on(nats_server_factory, fsync):
    srv = await nats_server_factory(sync_always=fsync)
    nc = await nats.connect(srv.client_url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"])
    await js.publish("s.1", b"before")
    Faults(srv).fail_next_write("ENOSPC", fsync=fsync)
    with pytest.raises(nats.js.errors.APIError) as e:
        await js.publish("s.2", b"lost")
    assert e.value.err_code == 10077 and "no space left on device" in e.value.description.lower()
    ack = await js.publish("s.3", b"after")
    info = await js.stream_info("S")
    if fsync:
        # The write reached the OS before the fsync failed: the message is in the stream, but the PubAck, which
        # under sync_always promises an fsync, told the publisher it cannot count on it (a retry with a
        # Nats-Msg-Id is de-duplicated).
        assert (ack.seq, info.state.messages) == (3, 3)
    else:
        assert (ack.seq, info.state.messages) == (2, 2)  # the failed write was rolled back
    await nc.close()


async def test_crash_between_store_and_ack_keeps_the_message_and_the_retry_is_a_duplicate(nats_server_factory):
    """The server stores the order and dies before its PubAck leaves: the publisher only sees a timeout.  After the
    restart on the same store the order is there, and the publisher's retry with the same Nats-Msg-Id is told it
    is a duplicate (the de-duplication window is rebuilt from the stored messages' headers, as nats-server
    does), so the order is stored once."""
    srv = await nats_server_factory()
    nc, ev = await _events(srv.client_url, max_reconnect_attempts=-1)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    await js.publish("orders.new", b"order 41", headers={"Nats-Msg-Id": "order-41"})
    Faults(srv).crash_before_ack("ORDERS")
    with pytest.raises(nats.errors.TimeoutError):
        await js.publish("orders.new", b"order 42", timeout=0.5, headers={"Nats-Msg-Id": "order-42"})
    assert ev["disconnected"].is_set()  # the process died: its connections went with it
    with pytest.raises(ConnectionRefusedError):  # ... and nothing listens on its port
        await asyncio.open_connection("127.0.0.1", srv.port)
    srv = await nats_server_factory.restart(srv)
    await asyncio.wait_for(ev["reconnected"].wait(), 10)
    stored = await js.get_msg("ORDERS", 2)
    assert (stored.data, stored.headers["Nats-Msg-Id"]) == (b"order 42", "order-42")
    ack = await js.publish("orders.new", b"order 42", headers={"Nats-Msg-Id": "order-42"})
    assert (ack.seq, ack.duplicate) == (2, True)
    ack = await js.publish("orders.new", b"order 43", headers={"Nats-Msg-Id": "order-43"})
    assert ack.seq == 3 and not ack.duplicate
    await nc.close()


async def test_crash_before_ack_waits_for_its_stream_and_undo_disarms_it(nats_server):
    nc = await nats.connect(nats_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="A", subjects=["a"])
    await js.add_stream(name="B", subjects=["b"])
    f = Faults(nats_server)
    fault = f.crash_before_ack("B")
    assert (await js.publish("a", b"1")).seq == 1  # another stream's ack leaves
    with pytest.raises(ValueError):
        f.crash_before_ack()  # one armed at a time
    fault.undo()
    assert (await js.publish("b", b"1")).seq == 1  # disarmed: acked
    await nc.close()


@pytest.mark.parametrize("sync_always", [False, True])
async def test_power_loss_keeps_what_was_fsynced(nats_server_factory, nats_clock, sync_always):
    """What sync_interval guarantees.  Under the default (a background fsync every 2 minutes) a PubAck means the OS
    has the message: the acked messages after the last fsync are lost with the power.  Under sync_interval: always
    a PubAck follows an fsync: every acked message survives."""
    srv = await nats_server_factory(sync_always=sync_always)
    nc, ev = await _events(srv.client_url, max_reconnect_attempts=-1)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    for i in (1, 2):
        assert (await js.publish("s", b"%d" % i)).seq == i
    durability = next(iter(srv.jetstreams.values())).durability
    if not sync_always:
        fsyncs = durability.fsyncs
        await nats_clock.tick(120)  # the background fsync of sync_interval (2 minutes) runs, in a worker thread
        for _ in range(200):
            if durability.fsyncs > fsyncs:
                break
            await asyncio.sleep(0.01)
        assert durability.fsyncs > fsyncs
    assert (await js.publish("s", b"3")).seq == 3  # acked
    lost = Faults(srv).power_loss()["lost_bytes"]
    srv = await nats_server_factory.restart(srv)
    await asyncio.wait_for(ev["reconnected"].wait(), 10)
    state = (await js.stream_info("S")).state
    if sync_always:
        assert (lost, state.messages, state.last_seq) == ({}, 3, 3)
    else:
        assert lost["S"] > 0 and (state.messages, state.last_seq) == (2, 2)  # the third was acked, never fsynced
        assert (await js.publish("s", b"3")).seq == 3
    await nc.close()


BIG = 700 * 1024  # six of these pass the file store's 4 MB block size: the seventh starts a new block


async def _wait_fsync(durability, before: int) -> None:
    for _ in range(300):
        if durability.fsyncs > before:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the background fsync did not run")


async def _restart_quietly(factory, srv):
    """Restart on the same store; the structlog events of the start, and proof that nothing raised: no event
    carries an exception and asyncio logged no error (a failing callback)."""
    loop = asyncio.get_running_loop()
    failures = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: failures.append(ctx))
    try:
        with capture_logs() as logs:
            srv = await factory.restart(srv)
            await asyncio.sleep(0.05)  # what the start scheduled (consumer kicks, verifications) runs
    finally:
        loop.set_exception_handler(previous)
    assert not failures, failures
    assert not [e for e in logs if "exc_info" in e or "exception" in e], logs
    assert not [e for e in logs if "COULD NOT BE RECOVERED" in e["event"]], logs
    return srv, logs


async def test_power_loss_loses_every_unsynced_write_and_the_restart_is_consistent(nats_server_factory,
                                                                                 nats_clock):
    """Under the default sync_interval a power loss takes every write since the last background fsync, in every
    file: the messages after it (the block started since is gone, the one it covered is cut back to it), the
    state file and block summaries written since (left empty), and the consumer's state, which only
    sync_interval: always fsyncs (as nats-server).  The restart is clean: the stream is every fsynced message,
    the next publish continues after them, and the consumer starts over from what is on the disk: nothing
    acknowledged since (the messages come again: at least once, never lost)."""
    srv = await nats_server_factory()
    nc, ev = await _events(srv.client_url, max_reconnect_attempts=-1)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    sub = await js.pull_subscribe("s", durable="C")
    for i in (1, 2, 3):
        await js.publish("s", b"%d" % i)
    for m in await sub.fetch(3):
        await m.ack_sync()
    srv = await nats_server_factory.restart(srv)  # a clean stop: from here on, what is on disk counts as fsynced
    await asyncio.wait_for(ev["reconnected"].wait(), 10)
    payloads = {i: b"%d" % i for i in (1, 2, 3)}
    for i in range(4, 10):  # 4..8 fill the first block, 9 starts the second
        payloads[i] = b"%04d" % i * (BIG // 4)
        assert (await js.publish("s", payloads[i])).seq == i
    durability = next(iter(srv.jetstreams.values())).durability
    fsyncs = durability.fsyncs
    await nats_clock.tick(120)  # the background fsync of sync_interval: messages 1..9 are on the disk
    await _wait_fsync(durability, fsyncs)
    msgs = await sub.fetch(2)
    assert [m.metadata.sequence.stream for m in msgs] == [4, 5]
    for m in msgs:
        await m.ack_sync()  # confirmed: the consumer's state is written (not fsynced) on its 100 ms timer
    await nats_clock.tick(1)
    for i in range(10, 15):  # acked, never fsynced: 10..13 into the second block, 14 starts a third
        assert (await js.publish("s", b"%04d" % i * (BIG // 4))).seq == i
    store = next(iter(srv.jetstreams.values())).streams["S"].store
    msgs_dir = Path(store.msgs_dir)
    out = Faults(srv).power_loss()
    assert out["lost_bytes"]["S"] >= 5 * BIG
    assert out["removed"] == [str(msgs_dir / "3.blk")]  # created after the last fsync of msgs/
    emptied = {Path(p).name for p in out["emptied"]}
    assert {"state.dat", "1.idx", "2.idx", "o.dat"} <= emptied and "meta.inf" not in emptied

    srv, logs = await _restart_quietly(nats_server_factory, srv)
    await asyncio.wait_for(ev["reconnected"].wait(), 10)
    state = (await js.stream_info("S")).state
    assert (state.messages, state.first_seq, state.last_seq) == (9, 1, 9)
    assert not state.num_deleted and not state.lost  # nothing the disk had is missing: the rest was never fsynced
    for i, data in payloads.items():
        assert (await js.get_msg("S", i)).data == data
    assert (await js.publish("s", b"next")).seq == 10  # the sequence goes on after what survived
    info = await js.consumer_info("S", "C")
    # The consumer's state file was rewritten after the clean restart and never fsynced: it starts over.
    assert (info.delivered.stream_seq, info.ack_floor.stream_seq, info.num_pending) == (0, 0, 10)
    assert any("CORRUPT CONSUMER STATE" in e["event"] for e in logs)  # the empty o.dat is reported
    msgs = await sub.fetch(3)
    assert [m.data for m in msgs] == [b"1", b"2", b"3"]  # delivered again: at least once, nothing lost
    await nc.close()


async def test_power_loss_under_sync_always_keeps_every_acknowledgement(nats_server_factory):
    """sync_interval: always: a PubAck follows the fsync of its message (and of msgs/ when a block was created),
    a confirmed consumer ack follows the fsync of the consumer's state.  A power loss right after keeps all of
    it; only the files no acknowledgement depends on (summaries, the state file between its syncs) are empty,
    and the restart rebuilds from the blocks."""
    srv = await nats_server_factory(sync_always=True)
    nc, ev = await _events(srv.client_url, max_reconnect_attempts=-1)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    sub = await js.pull_subscribe("s", durable="C")
    payloads = {}
    for i in range(1, 15):  # three blocks, each created and fsynced with the PubAck of its first message
        payloads[i] = b"%04d" % i * (BIG // 4)
        assert (await js.publish("s", payloads[i])).seq == i
    msgs = await sub.fetch(4)
    for m in msgs[:3]:
        await m.ack_sync()  # 1..3 acknowledged and confirmed; 4 delivered, not acked
    out = Faults(srv).power_loss()
    assert (out["lost_bytes"], out["removed"]) == ({}, [])
    assert not [p for p in out["emptied"] if p.endswith(("o.dat", "meta.inf"))]

    srv, _ = await _restart_quietly(nats_server_factory, srv)
    await asyncio.wait_for(ev["reconnected"].wait(), 10)
    state = (await js.stream_info("S")).state
    assert (state.messages, state.last_seq) == (14, 14) and not state.num_deleted and not state.lost
    for i, data in payloads.items():
        assert (await js.get_msg("S", i)).data == data
    info = await js.consumer_info("S", "C")
    assert (info.ack_floor.stream_seq, info.delivered.stream_seq, info.num_ack_pending) == (3, 4, 1)
    assert (await js.publish("s", b"next")).seq == 15
    await nc.close()


async def test_api_status_503_is_jetstream_unavailable(nats_server):
    """A 503 status is what nats-server sends when nothing answers the API (JetStream off): nats-py reports it as
    ServiceUnavailableError, exactly as against a server without JetStream."""
    nc = await nats.connect(nats_server.client_url)
    js = nc.jetstream()
    Faults(nats_server).api_status(503, count=1)
    with pytest.raises(nats.js.errors.ServiceUnavailableError):
        await js.add_stream(name="S", subjects=["s.>"])
    await js.add_stream(name="S", subjects=["s.>"])  # only the next request
    await nc.close()


async def test_bad_arguments_are_refused(nats_server):
    f = Faults(nats_server)
    with f.bandwidth(1000, every=True), pytest.raises(ValueError):  # no connection yet: one fault owns later ones
        f.bandwidth(2000, every=True)
    with pytest.raises(ValueError):
        f.drop(name="nobody")
    with pytest.raises(ValueError):
        f.fail_next_write("ENOTANERRNO")
    with pytest.raises(ValueError):
        f.stall(name="x", reads=False, writes=False)
    nc = await nats.connect(nats_server.client_url, name="app")
    with pytest.raises(ValueError):
        f.bandwidth(0, name="app")
    with pytest.raises(ValueError):
        f.bandwidth(1000, name="app", every=True)
    with f.latency(0.1, name="app"), pytest.raises(ValueError):  # one fault on a connection's output at a time
        f.bandwidth(1000, name="app")
    with f.bandwidth(1000, name="app"), pytest.raises(ValueError):  # ... whichever came first
        f.latency(0.1, name="app")
    await nc.close()
    assert errno.ENOSPC  # the names are errno's
