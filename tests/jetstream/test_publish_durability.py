"""When PubAcks leave (Skiff only: embedded server, injected store faults).

* ``sync_interval: always``: acks wait for an fsync that started after their message was written, and concurrent
  publishes share fsyncs (group commit).
* A write that fails (disk full) gets the store-failure error ack (10077 with the OS error text); messages stored
  before are intact, and publishing works again once the disk does.
"""
from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest

from skiff.server.core.server import Server
from skiff.testing.faults import Faults

pytestmark = pytest.mark.skiff_only


async def _create(nc, name: str, **cfg) -> None:
    r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{name}",
                                     json.dumps({"name": name, "subjects": [f"{name}.>"], **cfg}).encode(),
                                     timeout=3)).data)
    assert "error" not in r, r


def full_disk(srv):
    """Every store write fails with ENOSPC until the returned fault is undone (the kit's own injection)."""
    return Faults(srv).fail_next_write("ENOSPC", count=1_000_000)


STORE_FAILED = {"code": 503, "err_code": 10077, "description": "no space left on device"}


def slow_fsyncs(srv, stream: str, delay: float) -> list[tuple[int, float]]:
    """Make every fsync of ``stream``'s store take ``delay`` longer; the list it returns gets, per fsync, the
    stream's last sequence when it began and the monotonic time when it ended."""
    store = srv.jetstream.streams[stream].store
    real_sync = store.sync
    syncs: list[tuple[int, float]] = []

    def slow_sync() -> None:  # runs in the worker thread
        began = store.last_seq
        time.sleep(delay)
        real_sync()
        syncs.append((began, time.monotonic()))

    store.sync = slow_sync
    return syncs


async def test_sync_always_group_commit(tmp_path, target):
    srv = await Server(jetstream=True, store_dir=str(tmp_path), sync_always=True).start()
    nc = await nats.connect(srv.client_url)
    try:
        await _create(nc, "G")
        syncs = slow_fsyncs(srv, "G", 0.02)
        inbox = nc.new_inbox()
        acks: list[tuple[float, int]] = []
        got = asyncio.Event()

        async def on_ack(m):
            acks.append((time.monotonic(), json.loads(m.data)["seq"]))
            if len(acks) == 300:
                got.set()

        await nc.subscribe(inbox + ".*", cb=on_ack)
        for i in range(300):
            await nc.publish("G.x", b"%d" % i, reply=f"{inbox}.{i}")
        await nc.flush()
        await asyncio.wait_for(got.wait(), 10)
        assert sorted(s for _, s in acks) == list(range(1, 301))
        assert syncs and min(t for t, _ in acks) >= syncs[0][1]  # nothing acked before the first fsync ended
        assert len(syncs) < 60, f"{len(syncs)} fsyncs for 300 publishes: no group commit"
    finally:
        await nc.close()
        await srv.shutdown()


async def test_disk_full_error_ack_and_nothing_lost(tmp_path, target):
    srv = await Server(jetstream=True, store_dir=str(tmp_path)).start()
    nc = await nats.connect(srv.client_url)
    try:
        await _create(nc, "D", allow_direct=True)
        for i in range(3):
            assert json.loads((await nc.request("D.x", b"ok%d" % i, timeout=2)).data)["seq"] == i + 1
        with full_disk(srv):
            ack = json.loads((await nc.request("D.x", b"lost", headers={"Nats-Msg-Id": "m"}, timeout=2)).data)
        assert ack == {"error": STORE_FAILED, "stream": "D", "seq": 0}
        # The failed message is not a duplicate of anything: its id was forgotten with it.
        ack = json.loads((await nc.request("D.x", b"again", headers={"Nats-Msg-Id": "m"}, timeout=2)).data)
        assert ack == {"stream": "D", "seq": 4}
    finally:
        await nc.close()
        await srv.shutdown()
    srv = await Server(jetstream=True, store_dir=str(tmp_path)).start()
    nc = await nats.connect(srv.client_url)
    try:
        data = []
        for seq in range(1, 5):
            m = await nc.request("$JS.API.DIRECT.GET.D", json.dumps({"seq": seq}).encode(), timeout=2)
            data.append(m.data)
        assert data == [b"ok0", b"ok1", b"ok2", b"again"]
    finally:
        await nc.close()
        await srv.shutdown()


async def test_sync_always_fast_batch_acks_wait_for_the_fsync(tmp_path, target):
    """A fast batch's flow-control acks and its commit reply promise what a PubAck does (nats-server fsyncs every
    write under ``sync_interval: always`` before it answers): none leaves before an fsync that began after the
    messages it covers were written."""
    srv = await Server(jetstream=True, store_dir=str(tmp_path), sync_always=True).start()
    nc = await nats.connect(srv.client_url)
    try:
        await _create(nc, "FB", allow_batched=True)
        syncs = slow_fsyncs(srv, "FB", 0.02)
        replies: list[tuple[float, dict]] = []

        async def on_reply(m):
            replies.append((time.monotonic(), json.loads(m.data)))

        await nc.subscribe("_FB.>", cb=on_reply)
        for i in range(1, 31):
            op = 0 if i == 1 else 2 if i == 30 else 1
            await nc.publish("FB.x", b"%d" % i, reply=f"_FB.b.10.fail.{i}.{op}.$FI")
            if i % 10 == 0:
                await asyncio.sleep(0.05)  # let the flow ack come: the window is 10 messages
        deadline = time.monotonic() + 5
        while not any("batch" in r for _, r in replies) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert [r.get("type", "commit") for _, r in replies] == ["ack", "ack", "ack", "commit"], replies
        for at, r in replies:
            # a flow ack's batch sequence, the commit's stream sequence (one batch, from 1); the first ack (seq 0,
            # the window, sent as the batch opens) reports nothing stored
            if r["seq"]:
                assert any(began >= r["seq"] and ended <= at for began, ended in syncs), (r, syncs, at)
    finally:
        await nc.close()
        await srv.shutdown()


async def test_sync_always_duplicate_ack_waits_for_the_original_fsync(tmp_path, target):
    """A duplicate's ack reports the original as stored: it must not leave before the original's fsync ended, even
    when the duplicate comes while that fsync is still running."""
    srv = await Server(jetstream=True, store_dir=str(tmp_path), sync_always=True).start()
    nc = await nats.connect(srv.client_url)
    try:
        await _create(nc, "D")
        syncs = slow_fsyncs(srv, "D", 0.1)
        first = asyncio.ensure_future(nc.request("D.x", b"1", headers={"Nats-Msg-Id": "m1"}, timeout=5))
        await asyncio.sleep(0.03)  # the original is written and its fsync is running
        dup = json.loads((await nc.request("D.x", b"1", headers={"Nats-Msg-Id": "m1"}, timeout=5)).data)
        dup_at = time.monotonic()
        assert dup == {"stream": "D", "seq": 1, "duplicate": True}
        assert json.loads((await first).data)["seq"] == 1
        assert syncs and dup_at >= syncs[0][1], "the duplicate's ack left before the original was fsynced"
    finally:
        await nc.close()
        await srv.shutdown()


async def _raw_publisher(srv):
    """A raw connection whose one ``write`` of several PUBs reaches the server as one read (one flush): nats-py's
    flusher gives no such promise."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    await reader.readline()  # INFO
    writer.write(b'CONNECT {"verbose":false,"headers":true}\r\nPING\r\n')
    assert await asyncio.wait_for(reader.readline(), 2) == b"PONG\r\n"
    return writer


def _pub(subject: str, reply: str, data: bytes, msg_id: str = "") -> bytes:
    if not msg_id:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), len(data), data)
    hdr = b"NATS/1.0\r\nNats-Msg-Id: %s\r\n\r\n" % msg_id.encode()
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject.encode(), reply.encode(), len(hdr), len(hdr) + len(data),
                                            hdr, data)




async def _replies(nc, subject: str) -> list[dict]:
    got: list[dict] = []

    async def on_reply(m):
        got.append(json.loads(m.data))

    await nc.subscribe(subject, cb=on_reply)
    await nc.flush()
    return got


async def _settle(got: list, n: int) -> None:
    deadline = time.monotonic() + 3
    while len(got) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # and nothing more


async def test_failed_write_turns_fast_batch_flow_acks_into_errors(tmp_path, target):
    """A fast batch's flow acks report messages stored: when the write of those messages fails, they are the
    store-failure error like a PubAck, the batch ends (a later append: 10208), and no reply claims a lost message."""
    srv = await Server(jetstream=True, store_dir=str(tmp_path)).start()
    nc = await nats.connect(srv.client_url)
    raw = await _raw_publisher(srv)
    try:
        await _create(nc, "FW", allow_batched=True)
        got = await _replies(nc, "_FW.>")

        def op(i: int, kind: int = 1) -> bytes:  # flow 1: a flow ack for every message
            return _pub("FW.x", f"_FW.b.1.fail.{i}.{kind}.$FI", b"%d" % i)

        raw.write(op(1, 0) + op(2) + op(3))
        await _settle(got, 4)
        assert got == [{"type": "ack", "seq": 0, "msgs": 1}] + [{"type": "ack", "seq": i, "msgs": 1}
                                                                for i in (1, 2, 3)], got
        got.clear()
        room = full_disk(srv).undo
        raw.write(op(4) + op(5) + op(6))
        await _settle(got, 3)
        assert got == [{"error": STORE_FAILED, "stream": "FW", "seq": 0}] * 3, got
        got.clear()
        room()
        raw.write(op(7))
        await _settle(got, 1)
        assert got == [{"error": {"code": 400, "err_code": 10208, "description": "batch publish ID unknown"},
                        "stream": "FW", "seq": 0}], got
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.FW", b"", timeout=2)).data)
        assert info["state"]["messages"] == 3 and info["state"]["last_seq"] == 3, info["state"]
    finally:
        raw.close()
        await nc.close()
        await srv.shutdown()


async def test_failed_write_turns_a_duplicate_ack_into_the_error(tmp_path, target):
    """A duplicate that comes in the same flush as its original reports the original stored: when that write
    fails, the duplicate gets the store-failure error too, not ``"duplicate": true`` for a message that is gone."""
    srv = await Server(jetstream=True, store_dir=str(tmp_path)).start()
    nc = await nats.connect(srv.client_url)
    raw = await _raw_publisher(srv)
    try:
        await _create(nc, "DW")
        got = await _replies(nc, "_DW.>")
        room = full_disk(srv).undo
        raw.write(_pub("DW.x", "_DW.1", b"a", "m1") + _pub("DW.x", "_DW.2", b"a", "m1"))
        await _settle(got, 2)
        assert got == [{"error": STORE_FAILED, "stream": "DW", "seq": 0}] * 2, got
        room()
        ack = json.loads((await nc.request("DW.x", b"a", headers={"Nats-Msg-Id": "m1"}, timeout=2)).data)
        assert ack == {"stream": "DW", "seq": 1}  # the lost original's id was forgotten
    finally:
        raw.close()
        await nc.close()
        await srv.shutdown()
