"""Closed connections are freed by reference counting alone (issue #15 finding 10).

The runner freezes the start-up heap and raises the collector's thresholds, so a closed connection caught in a
reference cycle waited for a rare full collection: 26,478 dead connections were held after 40,000 (RSS +1.3 KiB
per connection).  These tests turn the collector off, open and close connections in every way a connection
ends, and count the ClientConnection objects still in memory.  A process-level figure (RSS over 60,000 cycles
against nats-server) is in bench/churn_rss.py.
"""
from __future__ import annotations

import asyncio
import gc

import pytest

from skiff.server.core.client import ClientConnection
from skiff.server.core.server import Server

pytestmark = pytest.mark.skiff_only

CYCLES = 200


def live_connections() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is ClientConnection)


async def _session(port: int, script: bytes, until: bytes | None) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    await r.readline()  # INFO
    w.write(script)
    await w.drain()
    if until is not None:
        while True:
            line = await r.readline()
            if not line or line == until:
                break
    else:
        await r.read()  # the server closes
    w.close()
    try:
        await w.wait_closed()
    except ConnectionError:
        pass


# What each kind of connection sends; the last element is what to read up to (None: until the server closes).
SESSIONS = {
    # nats-py's CONNECT: headers on, verbose and pedantic off -> the PUB fast path (on_pub = partial(route, conn)).
    "fast_path": (b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB a.* 1\r\nSUB q.x grp 2\r\n'
                  b'PUB a.b _INBOX.r 2\r\nhi\r\nPING\r\n', b"PONG\r\n"),
    # Defaults (verbose, pedantic) -> on_pub is the connection's own bound method.
    "checked_path": (b"CONNECT {}\r\nSUB a.* 1\r\nPUB a.b 2\r\nhi\r\nUNSUB 1\r\nPING\r\n", b"PONG\r\n"),
    # Closed by the server: a protocol error.
    "protocol_error": (b"CONNECT {}\r\nSUB a 1\r\nBOGUS\r\n", None),
    # Closed by the server: a big read worked through in slices (reading paused) and then a parse error.
    "big_read": (b'CONNECT {"verbose":false}\r\n' + b"SUB b.* 1\r\nUNSUB 1\r\n" * 1500 + b"BOGUS\r\n", None),
}


@pytest.mark.parametrize("kind", list(SESSIONS))
async def test_closed_connections_are_freed_without_the_collector(kind):
    script, until = SESSIONS[kind]
    cycles = CYCLES // 4 if kind == "big_read" else CYCLES
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        async with Server(port=0) as srv:
            base = live_connections()
            for _ in range(cycles):
                await _session(srv.port, script, until)
            for _ in range(50):  # connection_lost runs on a later loop turn
                if not srv.clients:
                    break
                await asyncio.sleep(0.01)
            assert not srv.clients
            await asyncio.sleep(0.05)
            left = live_connections() - base
            assert left == 0, f"{left} of {cycles} closed connections still in memory ({kind})"
    finally:
        if was_enabled:
            gc.enable()
