"""Publishes whose headers are only Nats-Msg-Id and Nats-Expected-Stream (the Spark connector's writes, the clients'
``publish(msg_id=...)``): Skiff answers them on a direct path (stream_publish.py ``_publish_with_ids``); every PubAck
and every stored header must stay byte for byte what nats-server gives, next to blocks that look alike and take the
general path.  The header blocks are written by hand (nats-py would normalise them)."""
from __future__ import annotations

import base64
import json

import pytest

from tests.wire.rawclient import RawClient

TOO_LARGE = b'{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},' \
            b'"stream":"{n}","seq":0}'

# (header lines, payload size, the PubAck with {n} for the stream's name); published in this order to one stream
# with max_msg_size 200.
CASES = [
    # the connector's block, then its retry
    (b"Nats-Msg-Id: w:0:1\r\nNats-Expected-Stream: {n}", 3, b'{"stream":"{n}","seq":1}'),
    (b"Nats-Msg-Id: w:0:1\r\nNats-Expected-Stream: {n}", 3, b'{"stream":"{n}","seq":1,"duplicate": true}'),
    # the other order, one key alone, spaces before the value
    (b"Nats-Expected-Stream: {n}\r\nNats-Msg-Id: w:0:1", 3, b'{"stream":"{n}","seq":1,"duplicate": true}'),
    (b"Nats-Msg-Id:   w:0:1", 3, b'{"stream":"{n}","seq":1,"duplicate": true}'),
    (b"Nats-Expected-Stream: {n}", 3, b'{"stream":"{n}","seq":2}'),
    # the wrong stream is refused before the duplicate is looked at
    (b"Nats-Msg-Id: w:0:1\r\nNats-Expected-Stream: X{n}",
     3, b'{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"{n}",'
        b'"seq":0}'),
    # an empty expected stream expects nothing; an empty id is no id
    (b"Nats-Expected-Stream:\r\nNats-Msg-Id: w:0:2", 3, b'{"stream":"{n}","seq":3}'),
    (b"Nats-Msg-Id:", 3, b'{"stream":"{n}","seq":4}'),
    (b"Nats-Msg-Id:", 3, b'{"stream":"{n}","seq":5}'),
    # too large: refused before any header check, a duplicate's or a wrong stream's (nats-server 2.15.1)
    (b"Nats-Msg-Id: w:0:3", 250, TOO_LARGE),
    (b"Nats-Msg-Id: w:0:2", 250, TOO_LARGE),
    (b"Nats-Msg-Id: w:0:2\r\nNats-Expected-Stream: X{n}", 250, TOO_LARGE),
    (b"Nats-Msg-Id: w:0:2\r\nNats-Expected-Last-Sequence: 1", 250, TOO_LARGE),
    # blocks of the general path: an id that names a key, a repeated key (the first wins), a third key
    (b"Nats-Msg-Id: Nats-Rollup: all", 3, b'{"stream":"{n}","seq":6}'),
    (b"Nats-Msg-Id: Nats-Rollup: all", 3, b'{"stream":"{n}","seq":6,"duplicate": true}'),
    (b"Nats-Msg-Id: w:0:4\r\nNats-Msg-Id: w:0:5", 3, b'{"stream":"{n}","seq":7}'),
    (b"Nats-Msg-Id: w:0:4", 3, b'{"stream":"{n}","seq":7,"duplicate": true}'),
    (b"Nats-Msg-Id: w:0:5", 3, b'{"stream":"{n}","seq":8}'),
    (b"Nats-Msg-Id: w:0:6\r\nNats-Expected-Stream: {n}\r\nNats-Expected-Last-Sequence: 1",
     3, b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 8"},"stream":"{n}","seq":0}'),
    (b"Nats-Msg-Id: w:0:6\r\nX-Other: 1", 3, b'{"stream":"{n}","seq":9}'),
    (b"Nats-Msg-Id: w:0:6", 3, b'{"stream":"{n}","seq":9,"duplicate": true}'),
]


async def test_id_header_publishes_answer_as_nats_server(jsc):
    name = jsc.name()
    await jsc.create(name, storage="file", max_msg_size=200)
    n = name.encode()
    stored = {}  # seq -> the header block sent
    with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
        c.send(b"SUB _r.* 1\r\n")
        for i, (lines, size, want) in enumerate(CASES):
            hdr = b"NATS/1.0\r\n" + lines.replace(b"{n}", n) + b"\r\n\r\n"
            c.send(b"HPUB %s.a _r.%d %d %d\r\n%s%s\r\n" % (n, i, len(hdr), len(hdr) + size, hdr, b"x" * size))
            line, payload = c.read_msg()
            assert line.split()[1] == b"_r.%d" % i
            ack = payload[:-2]
            assert ack == want.replace(b"{n}", n), (i, lines)
            seq = json.loads(ack)["seq"]
            if seq and b"duplicate" not in ack:
                stored[seq] = hdr
    # every stored message keeps the header block it was sent with, byte for byte
    assert sorted(stored) == list(range(1, 10))
    for seq, hdr in stored.items():
        got = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": seq})
        assert base64.b64decode(got["message"]["hdrs"]) == hdr, seq


async def test_id_header_publishes_with_no_reply_and_no_ack(jsc):
    """Without a reply subject, and on a stream with ``no_ack``, the same blocks are stored and nothing answers."""
    for no_ack in (False, True):
        name = jsc.name()
        await jsc.create(name, storage="file", no_ack=no_ack)
        n = name.encode()
        hdr = b"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-Expected-Stream: %s\r\n\r\n" % n
        with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
            c.send(b"SUB _r 1\r\n")
            reply = b" _r" if no_ack else b""
            for _ in range(2):  # the second one is a duplicate
                c.send(b"HPUB %s.a%s %d %d\r\n%sxy\r\n" % (n, reply, len(hdr), len(hdr) + 2, hdr))
            c.send(b"PING\r\n")
            c.expect(b"PONG\r\n")
            c.expect_nothing(0.2)
        st = (await jsc.info(name))["state"]
        assert (st["messages"], st["last_seq"]) == (1, 1), no_ack


@pytest.mark.parametrize("hdrs", [
    {"Nats-Msg-Id": "m1"},  # a duplicate
    {"Nats-Expected-Stream": "other"},
    {"Nats-Expected-Last-Sequence": "9"},
    {"Nats-Expected-Last-Subject-Sequence": "9"},
    {"Nats-Expected-Last-Msg-Id": "zz"},
    {"Nats-TTL": "5s"},  # TTL disabled
    {"Nats-Incr": "1"},  # counters disabled
    {"Nats-Schedule": "@every 1s"},  # schedules disabled
    {"Nats-Rollup": "all"},  # roll-ups not permitted
    {"Nats-Msg-Id": "m1", "Nats-TTL": "5s", "Nats-Rollup": "all"},
], ids=lambda v: "+".join(v))
async def test_max_msg_size_is_checked_before_the_headers(jsc, hdrs):
    """nats-server 2.15.1 answers 10054 to a message over max_msg_size whatever else its headers would be refused
    (or deduplicated) for; the stream keeps its one message."""
    name = jsc.name()
    await jsc.create(name, storage="file", max_msg_size=100)
    assert (await jsc.pub(f"{name}.a", b"x", {"Nats-Msg-Id": "m1"}))["seq"] == 1
    ack = await jsc.pub(f"{name}.a", b"x" * 150, hdrs)
    assert ack == {"error": {"code": 400, "err_code": 10054, "description": "message size exceeds maximum allowed"},
                   "stream": name, "seq": 0}
    assert (await jsc.info(name))["state"]["messages"] == 1


def _raw_pub(c: RawClient, subject: bytes, lines: bytes, payload: bytes = b"x") -> dict:
    hdr = b"NATS/1.0\r\n" + lines + b"\r\n\r\n"
    c.send(b"HPUB %s _r %d %d\r\n%s%s\r\n" % (subject, len(hdr), len(hdr) + len(payload), hdr, payload))
    return json.loads(c.read_msg()[1])


def _err_code(ack: dict) -> int:
    return ack["error"]["err_code"] if "error" in ack else 0


async def test_header_values_are_read_as_nats_server_reads_them(jsc):
    """nats-server getHeader: spaces before the value skipped, nothing else trimmed.  A tab or a trailing blank makes
    another id, another stream name, a malformed sequence, an invalid roll-up."""
    name = jsc.name()
    await jsc.create(name, storage="file", allow_rollup_hdrs=True)
    n = name.encode()
    s = n + b".a"
    with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
        c.send(b"SUB _r 1\r\n")
        assert _raw_pub(c, s, b"Nats-Msg-Id: a")["seq"] == 1
        assert _raw_pub(c, s, b"Nats-Msg-Id:    a").get("duplicate") is True
        assert _raw_pub(c, s, b"Nats-Msg-Id:\ta") == {"stream": name, "seq": 2}
        assert _raw_pub(c, s, b"Nats-Msg-Id: a ") == {"stream": name, "seq": 3}
        assert _raw_pub(c, s, b"Nats-Msg-Id: a \r\nNats-Expected-Stream: " + n).get("duplicate") is True
        assert _err_code(_raw_pub(c, s, b"Nats-Expected-Stream: " + n + b" ")) == 10060
        assert _err_code(_raw_pub(c, s, b"Nats-Expected-Stream:\t" + n)) == 10060
        assert _raw_pub(c, s, b"Nats-Expected-Stream:   " + n)["seq"] == 4
        # the general path reads the other keys the same way
        assert _err_code(_raw_pub(c, s, b"Nats-Expected-Last-Sequence: 4 ")) == 10071
        assert _raw_pub(c, s, b"Nats-Expected-Last-Sequence:  4")["seq"] == 5
        assert _err_code(_raw_pub(c, s, b"Nats-Expected-Last-Msg-Id: a ")) == 10070
        assert _err_code(_raw_pub(c, s, b"Nats-Rollup: sub ")) == 10111
        assert _raw_pub(c, s, b"Nats-Msg-Id: b \r\nNats-Rollup: sub")["seq"] == 6
        assert _raw_pub(c, s, b"Nats-Expected-Last-Msg-Id: b ")["seq"] == 7
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["last_seq"]) == (2, 7)  # the roll-up at 6 left 6 and 7


async def test_ttl_values_are_read_as_nats_server_reads_them(jsc):
    """getMessageTTL reads getHeader's value: a tab before it or a blank after it makes it invalid (10165), on a
    stream with per-message TTLs and on one without."""
    for allow in (True, False):
        name = jsc.name()
        await jsc.create(name, storage="file", allow_msg_ttl=allow)
        s = name.encode() + b".a"
        with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
            c.send(b"SUB _r 1\r\n")
            for lines in (b"Nats-TTL: 5s ", b"Nats-TTL:\t5s", b"Nats-TTL: never ", b"Nats-TTL: 7 "):
                assert _err_code(_raw_pub(c, s, lines)) == 10165, (allow, lines)
            ack = _raw_pub(c, s, b"Nats-TTL:   5s")
            assert ack == ({"stream": name, "seq": 1} if allow else
                           {"error": {"code": 400, "err_code": 10166, "description": "per-message TTL is disabled"},
                            "stream": name, "seq": 0}), allow


async def test_batch_counter_and_level_values_are_read_as_nats_server_reads_them(jsc):
    """getBatchId, getBatchSequence, getMessageIncr and errorOnRequiredApiLevel read sliceHeader/getHeader values:
    a tab is an atomic batch id, a blank after a sequence, an increment or an API level makes it invalid (nats-py
    strips values before it sends them, so only a raw client shows this)."""
    name, counter, atomic = jsc.name(), jsc.name(), jsc.name()
    await jsc.create(name, storage="file")
    await jsc.create(counter, storage="file", allow_msg_counter=True)
    await jsc.create(atomic, storage="file", allow_atomic=True)
    s, cs, at = name.encode() + b".a", counter.encode() + b".a", atomic.encode() + b".a"
    with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
        c.send(b"SUB _r 1\r\n")
        # a batch id of a tab (or of a blank and a tab) is an id: refused on a stream without atomic publishes
        assert _err_code(_raw_pub(c, s, b"Nats-Batch-Id:\t")) == 10174
        assert _err_code(_raw_pub(c, s, b"Nats-Batch-Id:  \t")) == 10174
        assert _raw_pub(c, s, b"Nats-Batch-Id:   ") == {"stream": name, "seq": 1}  # only spaces: no id
        # a blank after the batch sequence makes it no sequence
        assert _err_code(_raw_pub(c, at, b"Nats-Batch-Id: b\r\nNats-Batch-Sequence: 1 ")) == 10175
        assert _err_code(_raw_pub(c, at, b"Nats-Batch-Id: b\r\nNats-Batch-Sequence:\t1")) == 10175
        # counters: the increment is a decimal and nothing else
        for bad in (b"1 ", b"\t1", b"1\t", "\u0661".encode()):
            assert _err_code(_raw_pub(c, cs, b"Nats-Incr: " + bad, b"")) == 10171, bad
        assert _raw_pub(c, cs, b"Nats-Incr:   +2", b"") == {"stream": counter, "seq": 1, "val": "2"}
        # the required API level of a request: Atoi on the raw value
        for bad in (b"0 ", b"\t0", b"0\t", b"1_0"):
            assert _err_code(_raw_pub(c, b"$JS.API.INFO", b"Nats-Required-Api-Level: " + bad, b"")) == 10185, bad
        assert "error" not in _raw_pub(c, b"$JS.API.INFO", b"Nats-Required-Api-Level:   0", b"")
