"""protocol/client_wire.py, the client's half of the protocol (the Spark connector speaks NATS with it): every
input split at every byte."""
from __future__ import annotations

import pytest

from skiff.protocol import client_wire as wire

STREAM = (
    b'INFO {"server_id":"X","headers":true,"max_payload":1048576} \r\n'
    b"PING\r\n"
    b"MSG foo.bar 1 5\r\nhello\r\n"
    b"MSG foo 22 _INBOX.x.1 0\r\n\r\n"
    b"HMSG a.b 3 $JS.ACK.S.C.1.5.2.1700000000000000000.0 18 23\r\nNATS/1.0\r\nA: 1\r\n\r\nhello\r\n"
    b"HMSG _INBOX.y 4 28 28\r\nNATS/1.0 404 No Messages\r\n\r\n\r\n"
    b"+OK\r\n"
    b"PONG\r\n"
    b"MSG bin 5 4\r\n\r\n\r\n\r\n"  # a payload that contains CRLFs
    b"-ERR 'Authorization Violation'\r\n"
)

EXPECTED = [
    wire.Info({"server_id": "X", "headers": True, "max_payload": 1048576}),
    wire.Ping(),
    wire.Msg("foo.bar", 1, "", b"", b"hello"),
    wire.Msg("foo", 22, "_INBOX.x.1", b"", b""),
    wire.Msg("a.b", 3, "$JS.ACK.S.C.1.5.2.1700000000000000000.0", b"NATS/1.0\r\nA: 1\r\n\r\n", b"hello"),
    wire.Msg("_INBOX.y", 4, "", b"NATS/1.0 404 No Messages\r\n\r\n", b""),
    wire.Ok(),
    wire.Pong(),
    wire.Msg("bin", 5, "", b"", b"\r\n\r\n"),
    wire.Err("Authorization Violation"),
]


def test_whole():
    assert wire.ServerParser().feed(STREAM) == EXPECTED


@pytest.mark.parametrize("split", range(1, len(STREAM)))
def test_split_at_every_byte(split):
    p = wire.ServerParser()
    out = p.feed(STREAM[:split]) + p.feed(STREAM[split:])
    assert out == EXPECTED
    assert p.pending == 0


def test_byte_by_byte():
    p = wire.ServerParser()
    out = []
    for i in range(len(STREAM)):
        out += p.feed(STREAM[i : i + 1])
    assert out == EXPECTED


def test_unknown_operation_is_an_error():
    with pytest.raises(wire.WireError):
        wire.ServerParser().feed(b"BOGUS 1 2\r\n")
    with pytest.raises(wire.WireError):
        wire.ServerParser().feed(b"MSG foo notanumber 3\r\nabc\r\n")


def test_encoders():
    assert wire.pub("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert wire.pub("a.b", b"hi", "r.1") == b"PUB a.b r.1 2\r\nhi\r\n"
    hdr = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
    assert wire.pub("a", b"xy", "r", hdr) == b"HPUB a r %d %d\r\n" % (len(hdr), len(hdr) + 2) + hdr + b"xy\r\n"
    assert wire.sub("a.*", 3) == b"SUB a.* 3\r\n"
    assert wire.sub("a.*", 3, "q") == b"SUB a.* q 3\r\n"
    assert wire.unsub(3) == b"UNSUB 3\r\n" and wire.unsub(3, 5) == b"UNSUB 3 5\r\n"
    assert wire.connect({"verbose": False}) == b'CONNECT {"verbose":false}\r\n'


def test_ack_subject_and_direct_get_headers():
    from skiff.protocol.jsapi.timefmt import parse_time
    from pyspark_jetstream.jetstream import _time_ns, ack_metadata, split_direct_headers, status_of

    assert ack_metadata("$JS.ACK.S.C.1.5.2.1700000000000000000.7") == (5, 1700000000000000000, 7)
    assert ack_metadata("$JS.ACK.dom.ACCHASH.S.C.1.5.2.1700000000000000000.7.rnd") == (5, 1700000000000000000, 7)
    assert status_of(b"NATS/1.0 404 No Messages\r\n\r\n") == 404
    assert status_of(b"NATS/1.0\r\nA: 1\r\n\r\n") == 0
    for t in ("2026-11-21T21:16:38.01727887Z", "2026-11-21T21:16:38Z", "2026-11-21T21:16:38.5Z",
              "2026-11-21T21:16:39.000000001Z", "2026-11-21T21:16:38.123+02:00"):
        assert _time_ns(t.encode()) == parse_time(t).unix_ns, t
    hdr = (b"NATS/1.0\r\nA: 1\r\nA: 2\r\nNats-Stream: T\r\nNats-Subject: t.2\r\nNats-Sequence: 3\r\n"
           b"Nats-Time-Stamp: 2026-11-21T21:07:00.576372658Z\r\nNats-Num-Pending: 6\r\nNats-Last-Sequence: 0\r\n\r\n")
    assert split_direct_headers(hdr) == ("t.2", 3, parse_time("2026-11-21T21:07:00.576372658Z").unix_ns, 6,
                                         b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n")
    bare = b"NATS/1.0\r\nNats-Stream: T\r\nNats-Subject: x\r\nNats-Sequence: 9\r\nNats-Time-Stamp: 2026-01-01T00:00:00Z\r\n\r\n"
    assert split_direct_headers(bare)[4] == b""
