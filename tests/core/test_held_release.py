"""A slow reader's backlog is held by Skiff and freed a slice per loop turn when it goes (issue #15 finding 8:
200 slow subscribers closing together freed 2.3 GB in one turn and stalled everyone 100-250 ms; the lab's
stall probe, `python -m bench.lab stall-probes`, measures it against nats-server)."""
import asyncio
import socket

import pytest

from skiff.server.core import client as client_mod
from skiff.server.core.server import Server

pytestmark = pytest.mark.skiff_only

SIZE = 64 * 1024


async def _slow_subscriber(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
    await asyncio.sleep(0.05)
    s.recv(4096)  # INFO
    s.send(b'CONNECT {"verbose":false}\r\nSUB big.> 1\r\n')
    return s


async def test_backlog_is_held_counted_and_freed_in_slices(monkeypatch):
    # A small slice, so that freeing the ~20 MB takes many loop turns and the test can watch them.
    monkeypatch.setattr(client_mod, "RELEASE_SLICE", 128 * 1024)
    async with Server(port=0) as srv:
        socks = [await _slow_subscriber(srv.port) for _ in range(3)]
        r, w = await asyncio.open_connection("127.0.0.1", srv.port)
        await r.readline()
        w.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        frame = b"PUB big.x %d\r\n%s\r\n" % (SIZE, b"b" * SIZE)
        for _ in range(200):  # 12.5 MB to each subscriber, none of which reads
            w.write(frame)
        w.write(b"PING\r\n")
        await w.drain()
        for _ in range(2):
            assert await asyncio.wait_for(r.readline(), 10) == b"PONG\r\n"
        subs = [c for c in srv.clients.values() if c.subs]
        assert len(subs) == 3
        for c in subs:
            # The transport keeps about WRITE_HIGH; the rest waits in the connection's own list, and connz
            # counts both.
            assert c.transport.get_write_buffer_size() < 2 * client_mod.WRITE_HIGH
            assert c._held_bytes > 5 * 1024 * 1024
            assert c.pending_bytes() == c._held_bytes + c.transport.get_write_buffer_size()
        held = sum(c._held_bytes for c in subs)
        for s in socks:
            s.close()
        for _ in range(2000):
            await asyncio.sleep(0)
            if not any(c.subs for c in subs):
                break
        # Freed over several loop turns, RELEASE_SLICE bytes at a time, not in the turn that saw the closes.
        waiting = sum(len(b) for chunks in client_mod._dropped for b in chunks)
        biggest = max(len(b) for chunks in client_mod._dropped for b in chunks)  # a slice may end past the limit
        assert waiting > 0 and held > 2 * client_mod.RELEASE_SLICE
        for _ in range(1000):
            if not client_mod._dropped:
                break
            before = sum(len(b) for chunks in client_mod._dropped for b in chunks)
            await asyncio.sleep(0)
            after = sum(len(b) for chunks in client_mod._dropped for b in chunks)
            assert before - after < client_mod.RELEASE_SLICE + biggest
        assert not client_mod._dropped
        w.close()
