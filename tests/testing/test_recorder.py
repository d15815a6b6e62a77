"""skiff.testing.recorder: what each client sent and received, and the JetStream acks decoded (embedded Skiff)."""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server
from skiff.testing.recorder import Recorder, parse_ack_subject

pytestmark = pytest.mark.skiff_only


@pytest.fixture
async def srv(tmp_path):
    s = Server(port=0, jetstream=True, store_dir=str(tmp_path), clock=ManualClock())
    await s.start()
    yield s
    await s.shutdown()


async def _raw(srv, connect: dict):
    r, w = await asyncio.open_connection("127.0.0.1", srv.port)
    await r.readline()
    w.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
    await w.drain()
    assert await r.readline() in (b"+OK\r\n", b"PONG\r\n")
    return r, w


async def test_off_by_default_and_records_both_directions(srv):
    assert srv.recorder is None
    r, w = await _raw(srv, {"verbose": False, "pedantic": False, "headers": True, "name": "raw"})
    (conn,) = srv.clients.values()
    assert conn.on_pub != conn._pub  # the fast path while nothing records
    rec = Recorder(srv).start()
    assert conn.on_pub == conn._pub and srv.recorder is rec
    w.write(b"SUB foo q 1\r\nPUB foo r 5\r\nhello\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\nUNSUB 1 3\r\n"
            b"PUB bad.>. 1\r\nx\r\nPING\r\n")
    await w.drain()
    got = b""
    while not got.endswith(b"PONG\r\n"):
        got += await asyncio.wait_for(r.read(4096), 2)
    sent = [(o.op, o.subject, o.reply, o.size) for o in rec.sent(name="raw")]
    assert sent == [("SUB", "foo", "", 0), ("PUB", "foo", "r", 5), ("HPUB", "foo", "", 14), ("UNSUB", "", "", 0),
                    ("PUB", "bad.>.", "", 1), ("PING", "", "", 0)]
    sub, _, hpub, unsub = rec.sent(name="raw")[:4]
    assert (sub.queue, sub.sid, unsub.sid, unsub.max_msgs) == ("q", "1", "1", 3)
    assert hpub.hdr == b"NATS/1.0\r\n\r\n" and hpub.payload == b"hi"
    recv = rec.received(conn.cid)
    assert [o.op for o in recv] == ["MSG", "HMSG", "PONG"]
    assert (recv[0].subject, recv[0].sid, recv[0].reply, recv[0].data) == ("foo", "1", "r", b"hello")
    assert (recv[1].hdr_len, recv[1].payload) == (12, b"hi")
    rec.stop()
    assert srv.recorder is None and conn.on_pub != conn._pub
    n = len(rec.ops())
    w.write(b"PUB foo 1\r\nx\r\nPING\r\n")
    await w.drain()
    await r.readline()
    assert len(rec.ops()) == n  # stopped: nothing more
    w.close()


async def test_connect_info_ok_and_err(srv):
    with Recorder(srv) as rec:
        r, w = await _raw(srv, {"verbose": True, "name": "v", "pass": "secret", "user": "u"})
        w.write(b"SUB foo.. 1\r\n")  # bad subject: -ERR, connection stays
        await w.drain()
        lines = [await r.readline() for _ in range(2)]  # the PONG of _raw's PING, then the -ERR
        assert lines[0] == b"PONG\r\n" and lines[1].startswith(b"-ERR")
    ops = rec.ops(name="v")
    assert [o.op for o in ops[:1]] == ["CONNECT"] and "secret" not in ops[0].text and "[REDACTED]" in ops[0].text
    kinds = [(o.direction, o.op) for o in rec.ops()]
    assert kinds[0] == ("received", "INFO")  # recorded before CONNECT: the name is not known yet
    assert ("received", "+OK") in kinds and rec.received(op="-ERR")[0].text == "Invalid Subject"
    w.close()


async def test_acks_decoded_with_kind_and_count(srv):
    nc = await nats.connect(srv.client_url, name="acker")
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    for i in range(3):
        await js.publish("s", b"%d" % i)
    psub = await js.pull_subscribe("s", durable="C")
    with Recorder(srv) as rec:
        m1, m2, m3 = await psub.fetch(3, timeout=1)
        await m1.ack()
        await nc.publish(m1.reply, b"+ACK")  # the same sequence acked twice
        await m2.nak(delay=5)
        await m2.in_progress()
        await m3.term()
        await nc.flush()
    acks = rec.acks(name="acker", stream="S", consumer="C")
    assert [(a.kind, a.stream_seq, a.consumer_seq, a.delivered) for a in acks] == [
        ("+ACK", 1, 1, 1), ("+ACK", 1, 1, 1), ("-NAK", 2, 2, 1), ("+WPI", 2, 2, 1), ("+TERM", 3, 3, 1)]
    assert json.loads(acks[2].body) == {"delay": 5_000_000_000}
    assert rec.ack_counts(name="acker") == {1: 2}
    assert rec.ack_counts(kind=None) == {1: 2, 2: 2, 3: 1}
    assert rec.acks(kind="+TERM")[0].op.direction == "sent"
    await nc.close()


def test_parse_ack_subject_forms():
    assert parse_ack_subject("$JS.ACK.S.C.2.5.4.1700000000.0") == ("S", "C", 2, 5, 4)
    assert parse_ack_subject("$JS.ACK.dom.HASH.S.C.2.5.4.1700000000.0.rnd") == ("S", "C", 2, 5, 4)
    assert parse_ack_subject("$JS.ACK.S.C.x.5.4.1.0") is None
    assert parse_ack_subject("$JS.ACK.S.C") is None
    assert parse_ack_subject("foo") is None


async def test_limit_keeps_the_last_ops(srv):
    rec = Recorder(srv, limit=3, payloads=False).start()
    r, w = await _raw(srv, {"verbose": False, "pedantic": False})
    w.write(b"PUB a 3\r\nabc\r\n" * 5 + b"PING\r\n")
    await w.drain()
    await r.readline()
    ops = rec.ops()
    assert len(ops) == 3 and ops[-1].op == "PONG"
    assert [(o.op, o.size, o.data) for o in ops[:2]] == [("PUB", 3, b""), ("PING", 0, b"")]
    rec.stop()
    w.close()
