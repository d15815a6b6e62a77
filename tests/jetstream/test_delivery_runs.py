"""Runs of deliveries against both servers: what a consumer sends when many stored messages are ready at once.

Skiff sends such a run in one pass (delivery.py ``_send_run``: one store read, the frames appended together, the
bookkeeping once); a client must see exactly what the one-message path (and nats-server) sends: every message's
stored subject, headers and payload, its ack subject with the stream and consumer sequences and the count still
pending, ``max_ack_pending`` and a pull request's batch as limits, flow-control requests between the frames where
the window asks for one, and a client without header support getting the payload only.
"""
from __future__ import annotations

import asyncio
import re

import nats

from tests.jetstream.conftest import collect
from tests.jetstream.test_consumer_support import MS, add_consumer, ack_info, cinfo, pull, status
from tests.wire.rawclient import RawClient


async def _fill(jsc, s: str, n: int, size: int = 0) -> list[tuple[str, bytes, dict | None]]:
    """``n`` messages over two subjects, every third with headers; what was stored, in order."""
    stored = []
    for i in range(n):
        subj = f"{s}.a" if i % 2 == 0 else f"{s}.b.c"
        hdrs = {"X-N": str(i)} if i % 3 == 0 else None
        data = (b"m%d-" % i).ljust(size, b"x") if size else b"m%d" % i
        await jsc.pub(subj, data, headers=hdrs)
        stored.append((subj, data, hdrs))
    return stored


def _check(msgs, stored, first_seq: int = 1, total: int | None = None) -> None:
    total = len(stored) if total is None else total
    assert [m.subject for m in msgs] == [s for s, _, _ in stored]
    assert [m.data for m in msgs] == [d for _, d, _ in stored]
    assert [(m.headers or {}).get("X-N") for m in msgs] == [(h or {}).get("X-N") for _, _, h in stored]
    infos = [ack_info(m.reply) for m in msgs]
    assert [i["stream_seq"] for i in infos] == list(range(first_seq, first_seq + len(msgs)))
    assert [i["consumer_seq"] for i in infos] == list(range(first_seq, first_seq + len(msgs)))
    assert [i["delivered"] for i in infos] == [1] * len(msgs)
    left = total - first_seq + 1
    assert [i["pending"] for i in infos] == list(range(left - 1, left - 1 - len(msgs), -1))


async def test_push_run_sends_every_message_as_stored(jsc):
    s = jsc.name()
    await jsc.create(s)
    stored = await _fill(jsc, s, 40)
    dsubj = jsc.name("dlv")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "P", deliver_subject=dsubj, ack_policy="explicit", filter_subject=f"{s}.>")
    msgs = await collect(sub, 40, timeout=1)
    _check(msgs, stored)
    info = await cinfo(jsc, s, "P")
    assert info["num_ack_pending"] == 40 and info["num_pending"] == 0
    assert info["delivered"]["consumer_seq"] == 40 and info["delivered"]["stream_seq"] == 40
    for m in msgs:
        await m.ack()
    await jsc.nc.flush()
    await asyncio.sleep(0.05)
    info = await cinfo(jsc, s, "P")
    assert info["num_ack_pending"] == 0
    assert (info["ack_floor"]["consumer_seq"], info["ack_floor"]["stream_seq"]) == (40, 40)


async def test_pull_run_stops_at_the_batch(jsc):
    s = jsc.name()
    await jsc.create(s)
    stored = await _fill(jsc, s, 60)
    await add_consumer(jsc, s, "C", ack_policy="explicit")
    msgs = await pull(jsc.nc, s, "C", {"batch": 25, "expires": 500 * MS}, timeout=0.3, until_status=False)
    _check(msgs, stored[:25], total=60)
    info = await cinfo(jsc, s, "C")
    assert (info["num_ack_pending"], info["num_pending"], info["num_waiting"]) == (25, 35, 0)
    msgs = await pull(jsc.nc, s, "C", {"batch": 100, "expires": 300 * MS}, timeout=0.5)
    assert [status(m) for m in msgs[-1:]] == [(408, "Request Timeout")]
    _check(msgs[:-1], stored[25:], first_seq=26, total=60)


async def test_max_ack_pending_ends_a_run(jsc):
    s = jsc.name()
    await jsc.create(s)
    stored = await _fill(jsc, s, 25)
    dsubj = jsc.name("dlv")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "P", deliver_subject=dsubj, ack_policy="explicit", max_ack_pending=10)
    msgs = await collect(sub, timeout=0.3)
    _check(msgs, stored[:10], total=25)
    for m in msgs[:4]:
        await m.ack()
    more = await collect(sub, timeout=0.3)
    _check(more, stored[10:14], first_seq=11, total=25)


async def test_flow_control_requests_go_between_the_frames(jsc):
    """300 messages of 8 KiB: past half of the 2 MiB window a FlowControl Request follows a message, past the
    window delivery waits for its answer; answered, the rest follows.  Nothing is lost or reordered."""
    s = jsc.name()
    await jsc.create(s)
    stored = await _fill(jsc, s, 300, size=8192)
    dsubj = jsc.name("dlv")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "F", deliver_subject=dsubj, ack_policy="none", flow_control=True,
                       idle_heartbeat=5_000_000_000)
    got = await collect(sub, timeout=0.5)
    fc = [i for i, m in enumerate(got) if status(m) is not None]
    assert fc, "no flow-control request"
    assert status(got[fc[0]]) == (100, "FlowControl Request") and got[fc[0]].reply
    data = [m for m in got if status(m) is None]
    assert 128 <= len(data) < 300  # stalled at the window, which a request asked about at half of it
    assert fc[0] < len(got) - 1  # messages went on after the request, up to the window
    seen = list(data)
    while len(seen) < 300:
        reqs = [m for m in got if status(m) == (100, "FlowControl Request")]
        assert reqs, f"stalled after {len(seen)} messages without a request"
        await jsc.nc.publish(reqs[-1].reply, b"")
        got = await collect(sub, timeout=0.5)
        assert got, f"nothing after the answer, {len(seen)} messages seen"
        seen += [m for m in got if status(m) is None]
    _check(seen, stored)


async def test_client_without_headers_gets_the_payload_of_a_run(jsc):
    s = jsc.name()
    await jsc.create(s)
    stored = await _fill(jsc, s, 12)
    dsubj = jsc.name("dlv")
    c = RawClient("127.0.0.1", jsc.server.port).handshake()  # CONNECT without "headers"
    try:
        c.send(f"SUB {dsubj} 1\r\nPING\r\n".encode())
        c.expect(b"PONG\r\n")
        await add_consumer(jsc, s, "P", deliver_subject=dsubj, ack_policy="explicit")
        frames = []
        pat = re.compile(rb"MSG (\S+) 1 (\S+) (\d+)\r\n")
        for _ in range(12):
            line = c.read_until(re.compile(rb"\r\n"))
            m = pat.fullmatch(line)
            assert m, line
            payload = c.read_exactly(int(m.group(3)) + 2)[:-2]
            frames.append((m.group(1).decode(), ack_info(m.group(2).decode()), payload))
    finally:
        c.close()
    assert [(f[0], f[2]) for f in frames] == [(subj, data) for subj, data, _ in stored]
    assert [f[1]["pending"] for f in frames] == list(range(11, -1, -1))
    assert [f[1]["stream_seq"] for f in frames] == list(range(1, 13))


async def test_new_messages_after_a_run_continue_it(jsc):
    s = jsc.name()
    await jsc.create(s)
    stored = await _fill(jsc, s, 10)
    dsubj = jsc.name("dlv")
    nc2 = await nats.connect(jsc.server.url)
    try:
        sub = await nc2.subscribe(dsubj)
        await nc2.flush()
        await add_consumer(jsc, s, "P", deliver_subject=dsubj, ack_policy="explicit")
        msgs = await collect(sub, 10, timeout=1)
        stored += await _fill(jsc, s, 5)
        msgs += await collect(sub, 5, timeout=1)
    finally:
        await nc2.close()
    assert [m.data for m in msgs] == [d for _, d, _ in stored]
    assert [ack_info(m.reply)["stream_seq"] for m in msgs] == list(range(1, 16))


async def test_filtered_runs_skip_what_the_filter_does_not_select(jsc):
    """Runs of a wildcard filter end at the first message it does not select; the next run starts after it: with
    a prefix filter (``s.a.>``) and a token wildcard (``s.*``) over interleaved subjects, each consumer gets
    exactly its messages, in order, with the pending count of what it still has to get."""
    s = jsc.name()
    await jsc.create(s)
    subjects = []
    for i in range(60):
        subj = (f"{s}.a.{i % 3}" if i % 7 else f"{s}.b") if i % 11 else f"{s}.a"
        subjects.append(subj)
        await jsc.pub(subj, b"%d" % i)
    for filt, sel in ((f"{s}.a.>", lambda x: x.startswith(f"{s}.a.")),
                      (f"{s}.*", lambda x: x.count(".") == 1)):
        want = [(subj, b"%d" % i) for i, subj in enumerate(subjects) if sel(subj)]
        name = "P" + str(len(filt))
        dsubj = jsc.name("dlv")
        sub = await jsc.nc.subscribe(dsubj)
        await add_consumer(jsc, s, name, deliver_subject=dsubj, ack_policy="explicit", filter_subject=filt)
        msgs = await collect(sub, len(want), timeout=1)
        assert [(m.subject, m.data) for m in msgs] == want, filt
        assert [ack_info(m.reply)["pending"] for m in msgs] == list(range(len(want) - 1, -1, -1)), filt
        assert [ack_info(m.reply)["consumer_seq"] for m in msgs] == list(range(1, len(want) + 1)), filt
        assert (await cinfo(jsc, s, name))["num_pending"] == 0


async def test_run_of_a_stream_with_a_non_ascii_name(jsc):
    # A run formats its ack replies one way for an ASCII ack prefix and another for any other (delivery.py
    # _send_run); the client must see the same frames either way.
    s = jsc.name("Ström")
    await jsc.create(s)
    stored = await _fill(jsc, s, 12)
    dsubj = jsc.name("dlv")
    sub = await jsc.nc.subscribe(dsubj)
    await add_consumer(jsc, s, "Pü", deliver_subject=dsubj, ack_policy="explicit")
    msgs = await collect(sub, 12, timeout=1)
    _check(msgs, stored)
    assert all(m.reply.startswith(f"$JS.ACK.{s}.Pü.1.") for m in msgs)
    for m in msgs:
        await m.ack()
    await jsc.nc.flush()
    info = await cinfo(jsc, s, "Pü")
    for _ in range(50):  # nats-server applies acks from a queue of its own
        if info["num_ack_pending"] == 0:
            break
        await asyncio.sleep(0.02)
        info = await cinfo(jsc, s, "Pü")
    assert info["num_ack_pending"] == 0 and info["ack_floor"]["stream_seq"] == 12


async def test_changed_wildcard_filter_selects_by_the_new_filter(jsc):
    # Skiff keeps what a consumer's wildcard filters answered per subject (Consumer.matches): a filter update must
    # drop it, or subjects seen before would keep their old answer.
    s = jsc.name()
    await jsc.create(s)
    for i in range(6):
        await jsc.pub(f"{s}.a.{i % 2}", b"a%d" % i)
        await jsc.pub(f"{s}.b.{i % 2}", b"b%d" % i)
    await add_consumer(jsc, s, "F", ack_policy="explicit", filter_subject=f"{s}.a.*")
    msgs = [m for m in await pull(jsc.nc, s, "F", {"batch": 20, "expires": 300 * MS}, max_msgs=6, timeout=1)
            if status(m) is None]
    assert [m.data for m in msgs] == [b"a%d" % i for i in range(6)]
    for m in msgs:
        await m.ack_sync()
    await add_consumer(jsc, s, "F", ack_policy="explicit", filter_subject=f"{s}.b.*")
    for i in range(6, 10):
        await jsc.pub(f"{s}.a.{i % 2}", b"a%d" % i)
        await jsc.pub(f"{s}.b.{i % 2}", b"b%d" % i)
    assert (await cinfo(jsc, s, "F"))["num_pending"] == 4
    msgs = [m for m in await pull(jsc.nc, s, "F", {"batch": 20, "expires": 300 * MS}, max_msgs=4, timeout=1)
            if status(m) is None]
    assert [m.data for m in msgs] == [b"b%d" % i for i in range(6, 10)]


def test_stored_msg_fields_are_what_a_run_unpacks():
    # delivery.py _send_run unpacks each StoredMsg as (subject, seq, ts, hdr, data): a change of the record's
    # fields must change that loop too.
    from skiff.storage.records import StoredMsg

    assert StoredMsg._fields == ("subject", "seq", "ts", "hdr", "data")
