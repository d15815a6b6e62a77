"""Server limits from the configuration file: max_payload, max_control_line, max_subscriptions, max_connections,
the server's PING interval with stale-connection detection, and slow consumers.

Config syntax checked against nats-server 2.15.1: durations are strings ("200ms", "1s"); a bare float for
ping_interval is rejected; max_payload may not exceed max_pending.
Ref: jetstream-notes.md 1.1 and 1.8; nats-server client.go (processPingTimer, slow consumer in flushOutbound),
server.go (max connections check in createClient).
"""
from __future__ import annotations

import time

from tests.wire.rawclient import Closed

STALE = b"-ERR 'Stale Connection'\r\n"


def test_max_payload_from_config(server_factory, raw):
    srv = server_factory(jetstream=False, config="max_payload: 100\n")
    c = raw.handshake(srv)
    assert c.info["max_payload"] == 100
    c.send(b"SUB big 1\r\nPUB big 100\r\n" + b"x" * 100 + b"\r\n")
    c.expect(b"MSG big 1 100\r\n" + b"x" * 100 + b"\r\n")
    # The size on the control line decides, before any payload byte arrives.
    c.send(b"PUB big 101\r\n")
    assert c.assert_closed() == b"-ERR 'Maximum Payload Violation'\r\n"


def test_max_payload_counts_headers(server_factory, raw):
    srv = server_factory(jetstream=False, config="max_payload: 100\n")
    c = raw.handshake(srv, headers=True)
    c.send(b"HPUB big 12 101\r\n")
    assert c.assert_closed() == b"-ERR 'Maximum Payload Violation'\r\n"


def test_max_payload_default_boundary(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    payload = b"p" * 1048576
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 1048576\r\n" + payload + b"\r\n")
    c.expect(b"MSG " + s + b" 1 1048576\r\n" + payload + b"\r\n", timeout=5)


def test_max_control_line_from_config(server_factory, raw):
    srv = server_factory(jetstream=False, config="max_control_line: 512\n")
    ok = raw.handshake(srv)
    ok.send(b"SUB " + b"a" * 510 + b" 1\r\nPING\r\n")  # 512 bytes of arguments
    ok.expect(b"PONG\r\n")
    bad = raw.handshake(srv)
    bad.send(b"SUB " + b"a" * 511 + b" 1\r\n")
    assert bad.assert_closed() == b"-ERR 'maximum control line exceeded'\r\n"


def test_max_subscriptions(server_factory, raw):
    srv = server_factory(jetstream=False, config="max_subscriptions: 2\n")
    c = raw.handshake(srv)
    c.send(b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
    # Stays open; the third subscription does not exist.
    c.expect(b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n")
    c.send(b"PUB c 1\r\nx\r\nPUB a 1\r\ny\r\nPING\r\n")
    c.expect(b"MSG a 1 1\r\ny\r\nPONG\r\n")


def _connect_when_room(raw, srv, deadline: float):
    """A connection the server accepted (PING answered).  Retries: the server may not have noticed yet that an
    earlier connection (the harness's readiness probe, or one the test closed) is gone."""
    while True:
        c = raw.connect(srv)
        c.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
        try:
            if c.read_until(b"\r\n", 1) == b"PONG\r\n":
                return c
        except Closed:
            pass
        assert time.monotonic() < deadline, "the server never had room for a connection"
        time.sleep(0.05)


def test_max_connections(server_factory, raw):
    srv = server_factory(jetstream=False, config="max_connections: 1\n")
    first = _connect_when_room(raw, srv, time.monotonic() + 3)
    second = raw.connect(srv)  # the server still sends INFO first, then the error
    assert second.info["server_id"] == first.info["server_id"]
    assert second.assert_closed() == b"-ERR 'maximum connections exceeded'\r\n"
    assert first.is_open()
    # Once the first leaves, there is room again.
    first.close()
    _connect_when_room(raw, srv, time.monotonic() + 3)


def test_stale_connection(server_factory, raw):
    srv = server_factory(jetstream=False, config='ping_interval: "200ms"\nping_max: 1\n')
    c = raw.connect(srv)
    c.send(b'CONNECT {"verbose":false}\r\n')
    t0 = time.monotonic()
    # One PING (first one after ~interval, up to +20% jitter), then with it unanswered at the next tick: close.
    assert c.assert_closed(3) == b"PING\r\n" + STALE
    assert time.monotonic() - t0 < 1.5


def test_stale_connection_ping_max_two(server_factory, raw):
    srv = server_factory(jetstream=False, config='ping_interval: "200ms"\nping_max: 2\n')
    c = raw.connect(srv)
    c.send(b'CONNECT {"verbose":false}\r\n')
    assert c.assert_closed(3) == b"PING\r\nPING\r\n" + STALE


def test_stale_connection_before_connect(server_factory, raw):
    # The ping timer runs from accept, CONNECT or not.
    srv = server_factory(jetstream=False, config='ping_interval: "200ms"\nping_max: 1\n')
    c = raw.connect(srv)
    assert c.assert_closed(3) == b"PING\r\n" + STALE


def test_client_answering_pings_stays(server_factory, raw):
    srv = server_factory(jetstream=False, config='ping_interval: "200ms"\nping_max: 1\n')
    c = raw.connect(srv)
    c.send(b'CONNECT {"verbose":false}\r\n')
    for _ in range(4):
        c.expect(b"PING\r\n", timeout=1)
        c.send(b"PONG\r\n")
    assert c.is_open(0.5)


def test_slow_consumer_is_closed_without_err(server_factory, raw):
    # max_pending bounds the bytes the server buffers for one client; max_payload must not exceed it.
    srv = server_factory(jetstream=False, config="max_pending: 65536\nmax_payload: 16384\n")
    sub = raw.connect(srv, rcvbuf=4096)
    sub.send(b'CONNECT {"verbose":false}\r\nSUB slow 1\r\nPING\r\n')
    sub.expect(b"PONG\r\n")
    pub = raw.handshake(srv)
    payload = b"x" * 8192
    frame = b"PUB slow 8192\r\n" + payload + b"\r\n"
    # The subscriber does not read while 8 MB are published: far beyond what the kernel buffers (~3 MB on
    # loopback with a 4 KB receive buffer) plus max_pending can hold.
    for _ in range(8):
        pub.send(frame * 128)
    assert pub.is_open(2), "the publisher must not be affected"
    # Now read what the subscriber got: whatever was in flight, then EOF, and never an -ERR.
    data = sub.assert_closed(5)
    assert b"-ERR" not in data
    assert len(data) < 8 * 128 * len(frame)
    assert data.startswith(b"MSG slow 1 8192\r\n")


def test_fast_consumer_gets_everything(server_factory, raw):
    # Control for the slow-consumer test: same limits, a reader that keeps up loses nothing.
    srv = server_factory(jetstream=False, config="max_pending: 65536\nmax_payload: 16384\n")
    sub = raw.handshake(srv)
    sub.send(b"SUB fast 1\r\nPING\r\n")
    sub.expect(b"PONG\r\n")
    pub = raw.handshake(srv)
    frame = b"PUB fast 1024\r\n" + b"y" * 1024 + b"\r\n"
    expected = b"MSG fast 1 1024\r\n" + b"y" * 1024 + b"\r\n"
    for _ in range(20):
        pub.send(frame * 10)
        for _ in range(10):
            sub.expect(expected)
    assert sub.is_open()
