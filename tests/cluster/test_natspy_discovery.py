"""nats.py's own cluster discovery tests (nats.py nats/tests/test_client.py ClusterDiscoveryTest and
ClusterDiscoveryReconnectTest, with its tests/utils.py clusters), ported to free ports and run against both servers.

As in nats.py, every node is started with the routes of all three nodes, its own included: a node must notice the
route to itself and drop it (route.go "Detect route to self")."""
from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from unittest import mock

import nats
import pytest

from tests.harness import ServerProcess, free_ports


class Trio:
    def __init__(self, kind: str, auth: bool) -> None:
        self.cluster_ports = free_ports(3)
        routes = ",".join(f"nats://127.0.0.1:{p}" for p in (self.cluster_ports if not auth else
                                                             self.cluster_ports[:1]))
        extra = ["--user", "foo", "--pass", "bar"] if auth else []
        self.nodes = [ServerProcess(kind=kind, jetstream=False, args=[
            "--cluster", f"nats://127.0.0.1:{p}", "--routes", routes, *extra]) for p in self.cluster_ports]

    def url(self, i: int) -> str:
        return f"nats://127.0.0.1:{self.nodes[i].port}"


@pytest.fixture
def trio(target):
    made = []

    def make(auth: bool = False) -> Trio:
        t = Trio(target, auth)
        made.append(t)
        return t

    yield make
    for t in made:
        for n in t.nodes:
            n.cleanup()


async def _start(node: ServerProcess, peers: int, others: list[ServerProcess]) -> None:
    """Start a node and wait until it and the running ``others`` have routes to ``peers`` servers each (nats.py
    sleeps 1 s instead)."""
    await asyncio.get_running_loop().run_in_executor(None, node.start)
    for _ in range(300):
        if all(_remote_ids(n) >= peers for n in [node, *others]):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(node.log())


def _info(node: ServerProcess) -> dict:
    """The INFO a client gets from ``node`` right now."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=2) as sock:
        buf = b""
        while b"\r\n" not in buf:
            buf += sock.recv(65536)
    return json.loads(buf.split(b"\r\n", 1)[0][5:])


def _remote_ids(node: ServerProcess) -> int:
    with urllib.request.urlopen(f"{node.http_url}/routez", timeout=2) as r:
        return len({x["remote_id"] for x in json.loads(r.read())["routes"]})


async def _until(pred) -> None:
    for _ in range(200):
        if pred():
            return
        await asyncio.sleep(0.02)


async def test_discover_servers_on_first_connect(trio):
    t = trio()
    t.nodes[0].start()
    await _start(t.nodes[1], 1, t.nodes[:1])
    await _start(t.nodes[2], 2, t.nodes[:2])
    # nats-server adds a new route's client URLs just after the route shows in /routez: wait until node 0's INFO
    # names all three, so that the client gets them on its first connect as the test means.
    for _ in range(300):
        if len(_info(t.nodes[0]).get("connect_urls") or []) == 3:
            break
        await asyncio.sleep(0.02)
    cb = mock.AsyncMock()
    nc = await nats.connect(servers=[t.url(0)], discovered_server_cb=cb)
    assert nc.is_connected
    await nc.close()
    assert len(nc.servers) == 3 and len(nc.discovered_servers) == 2 and cb.call_count == 0


async def test_discover_servers_after_first_connect(trio):
    t = trio()
    t.nodes[0].start()
    cb = mock.AsyncMock()
    nc = await nats.connect(servers=[t.url(0)], discovered_server_cb=cb)
    await _start(t.nodes[1], 1, t.nodes[:1])
    await _start(t.nodes[2], 2, t.nodes[:2])
    await _until(lambda: cb.call_count == 2)  # the asynchronous INFOs
    await nc.close()
    assert len(nc.servers) == 3 and len(nc.discovered_servers) == 2 and cb.call_count == 2


async def test_reconnect_to_new_server_with_auth(trio):
    t = trio(auth=True)
    for n in t.nodes:
        n.start()
    reconnected = asyncio.get_running_loop().create_future()

    async def on_reconnect():
        if not reconnected.done():
            reconnected.set_result(True)

    async def on_error(e):
        pass
    nc = await nats.connect(servers=[t.url(0)], reconnected_cb=on_reconnect, error_cb=on_error,
                            reconnect_time_wait=0.1, user="foo", password="bar")
    # The cluster assembles (nats.py sleeps 1 s): every node routed to the two others, and the client told of them.
    for _ in range(500):
        if all(_remote_ids(n) >= 2 for n in t.nodes) and len(nc.servers) == 3:
            break
        await asyncio.sleep(0.02)
    assert len(nc.servers) == 3, [_remote_ids(n) for n in t.nodes]

    async def handler(msg):
        await nc.publish(msg.reply, b"ok")
    await nc.subscribe("foo", cb=handler)
    await asyncio.get_running_loop().run_in_executor(None, t.nodes[0].stop)
    # nats.py allows 2 s; with three server processes on a loaded 2-core CI machine, 5 (seen: 2 s missed once in a
    # full directory run, never alone).
    await asyncio.wait_for(reconnected, 5)
    msg = await nc.request("foo", b"hi")
    assert msg.data == b"ok"
    await nc.close()
    assert len(nc.servers) > 1 and len(nc.discovered_servers) > 0
