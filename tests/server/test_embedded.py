"""Skiff inside the test's own event loop: `async with Server(...)`, and a clock the test drives."""
import asyncio

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server

pytestmark = pytest.mark.skiff_only


async def test_embedded_server_in_own_loop():
    async with Server(port=0) as srv:
        assert srv.port > 0 and srv.client_url.endswith(str(srv.port))
        nc = await nats.connect(srv.client_url)
        sub = await nc.subscribe("greet.*")
        await nc.publish("greet.joe", b"hi")
        msg = await sub.next_msg(timeout=1)
        assert (msg.subject, msg.data) == ("greet.joe", b"hi")
        # The server's state is readable directly (the Sublist also holds the server's own internal subscriptions,
        # such as the system account's $SYS.REQ imports, so count the client's).
        (conn,) = srv.clients.values()
        assert [s.subject for s in conn.subs.values()] == ["greet.*"]
        await nc.close()


async def test_manual_clock_drives_pings_and_stale_connection():
    clock = ManualClock()
    async with Server(port=0, ping_interval=10.0, ping_max=1, clock=clock) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await reader.readline()  # INFO
        writer.write(b'CONNECT {"verbose":false}\r\n')
        await writer.drain()
        await asyncio.sleep(0.05)
        # Nothing happens in real time: only when the test moves the clock.
        clock.advance(2.5)  # first PING (~2s after connect)
        assert await asyncio.wait_for(reader.readline(), 1) == b"PING\r\n"
        clock.advance(10)  # unanswered: stale
        assert await asyncio.wait_for(reader.readline(), 1) == b"-ERR 'Stale Connection'\r\n"
        assert await asyncio.wait_for(reader.read(), 1) == b""
        writer.close()


async def test_auth_timeout_with_manual_clock():
    clock = ManualClock()
    async with Server(port=0, authorization="secret", clock=clock) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await reader.readline()
        clock.advance(1.9)
        writer.write(b"")
        clock.advance(0.2)
        assert await asyncio.wait_for(reader.readline(), 1) == b"-ERR 'Authentication Timeout'\r\n"
        writer.close()
