"""A route whose peer stops reading is closed after the write deadline, as nats-server closes it ("Slow Consumer
(Write Deadline)", client.go handleWriteTimeout), instead of buffering without end.  Skiff only: the server is
embedded with a ManualClock so the 10 s deadline passes at once."""
from __future__ import annotations

import asyncio
import json
import socket

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.link import LINK_WRITE_DEADLINE, SLOW_CONSUMER_WRITE_DEADLINE
from skiff.server.core.server import Server
from skiff.server.options import ClusterOptions

pytestmark = pytest.mark.skiff_only


async def test_a_route_that_stops_reading_is_closed_at_the_write_deadline():
    clock = ManualClock()
    srv = Server(clock=clock, cluster=ClusterOptions(host="127.0.0.1", port=-1, name="c1"))
    await srv.start()
    try:
        loop = asyncio.get_running_loop()
        peer = socket.create_connection(("127.0.0.1", srv.cluster.port))
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        peer.setblocking(False)
        info = {"server_id": "NSTUCKPEER", "server_name": "stuck", "cluster": "c1", "headers": True, "port": 1}
        connect = {"name": "NSTUCKPEER", "cluster": "c1", "headers": True}
        await loop.sock_sendall(peer, b"CONNECT " + json.dumps(connect).encode() + b"\r\nINFO " +
                                json.dumps(info).encode() + b"\r\nRS+ $G stuck\r\n")
        for _ in range(200):
            if srv.cluster.all_routes() and srv.cluster.all_routes()[0].subs:
                break
            await asyncio.sleep(0.01)
        route = srv.cluster.all_routes()[0]
        nc = await nats.connect(srv.client_url)
        payload = b"x" * 65536
        while route._wd_timer is None:  # until the transport is full and the deadline runs
            for _ in range(64):
                await nc.publish("stuck", payload)
            await nc.flush()
        clock.advance(LINK_WRITE_DEADLINE - 1)
        await asyncio.sleep(0.05)
        assert not route.closed  # still within the deadline
        clock.advance(2)
        await asyncio.sleep(0.05)
        assert route.closed and route.close_reason == SLOW_CONSUMER_WRITE_DEADLINE
        assert srv.cluster.routes == {} and not srv.sublist.has_interest("stuck")
        # The server goes on serving its clients.
        sub = await nc.subscribe("still.here")
        await nc.publish("still.here", b"ok")
        assert (await sub.next_msg(timeout=2)).data == b"ok"
        await nc.close()
        peer.close()
    finally:
        await srv.shutdown()
