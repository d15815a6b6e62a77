"""Output to a client that stops reading and then catches up (issue #15 finding 8).

Skiff keeps at most WRITE_HIGH (1 MB) unsent bytes in the transport and holds the rest of a slow reader's output
in its own list (server/core/client.py pause_writing/resume_writing), so that a backlog can be freed a slice per
loop turn when the client goes.  What the client sees must not change: every message, in order, once it reads
again, and a slow consumer is still closed at max_pending."""
from __future__ import annotations

import pytest

N = 6000
SIZE = 1024


def _frame(i: int) -> bytes:
    body = b"%08d" % i + b"z" * (SIZE - 8)
    return b"PUB held.x %d\r\n%s\r\n" % (SIZE, body)


def test_a_reader_that_catches_up_gets_every_message_in_order(server_factory, raw):
    """6 MB published while the subscriber does not read (more than the kernel and the transport hold, less
    than max_pending): all of it arrives, in order, when it reads."""
    srv = server_factory(jetstream=False)
    sub = raw.connect(srv, rcvbuf=4096, timeout=10)
    sub.send(b'CONNECT {"verbose":false}\r\nSUB held.> 1\r\nPING\r\n')
    sub.expect(b"PONG\r\n")
    pub = raw.handshake(srv)
    for start in range(0, N, 500):
        pub.send(b"".join(_frame(i) for i in range(start, start + 500)))
    assert pub.is_open(2)
    for i in range(N):
        hdr = sub.read_line()
        assert hdr == b"MSG held.x 1 %d\r\n" % SIZE, (i, hdr[:60])
        body = sub.read_exactly(SIZE + 2)
        assert body[:8] == b"%08d" % i, (i, body[:8])
    assert sub.is_open()


def test_slow_consumer_with_held_output_is_closed_at_max_pending(server_factory, raw):
    """max_pending (8 MB here) counts the held output too: 24 MB to a reader that never reads closes it."""
    srv = server_factory(jetstream=False, config="max_pending: 8MB\n")
    sub = raw.connect(srv, rcvbuf=4096, timeout=10)
    sub.send(b'CONNECT {"verbose":false}\r\nSUB held.> 1\r\nPING\r\n')
    sub.expect(b"PONG\r\n")
    pub = raw.handshake(srv)
    for start in range(0, 24000, 500):
        pub.send(b"".join(_frame(i % 100000) for i in range(start, start + 500)))
    # Open, not prompt: nats-server stalls a producer that feeds a slow consumer (client.go stalledWait, the
    # fast-producer stall, up to stallTotalAllowed per read loop), so on a loaded machine its PONG came 0.65-1.76 s
    # after the last send (3 busy loops on 2 CPUs) and once in a full suite run later than 2 s
    assert pub.is_open(10), "the publisher must not be affected"
    data = sub.assert_closed(10)
    assert b"-ERR" not in data
    assert len(data) < 24000 * (SIZE + 40)
