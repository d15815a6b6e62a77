"""Clusters of Skiff and nats-server processes, started with nats-server's own flags.

``arrangement`` is the kinds of the nodes in order: every test runs on an all-nats-server cluster (the oracle), an
all-Skiff one, and mixed ones where Skiff nodes and nats-server nodes route to each other.  ``--target`` narrows it
as for the other tests: ``skiff`` keeps the all-Skiff cluster, ``nats-server`` the all-nats-server one.
"""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.conftest import selected_targets
from tests.harness import ServerProcess, free_ports

ARRANGEMENTS = {
    "nats-server": ("nats-server", "nats-server", "nats-server"),
    "skiff": ("skiff", "skiff", "skiff"),
    "skiff-seed": ("skiff", "nats-server", "nats-server"),
    "nats-seed": ("nats-server", "skiff", "skiff"),
}


def wait_listening(port: int, timeout: float = 10.0) -> None:
    """Until something accepts on ``port``: the harness waits for the client port, and a server opens its route and
    leaf ports a moment later."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.02)


async def publish_until_received(nc, subject: str, data: bytes, got: list, timeout: float = 10.0,
                                 why=lambda: "") -> None:
    """Publish ``data`` on ``subject`` every 0.1 s until a subscriber's callback has filled ``got``: interest takes
    a moment to cross a route or leaf connection, and a message sent before it arrives goes nowhere."""
    import asyncio

    deadline = time.monotonic() + timeout
    while not got:
        assert time.monotonic() < deadline, why()
        await nc.publish(subject, data)
        await nc.flush()
        await asyncio.sleep(0.1)


def pytest_generate_tests(metafunc):
    if "arrangement" in metafunc.fixturenames:
        targets = selected_targets(metafunc.config)
        names = [n for n in ARRANGEMENTS if len(targets) > 1 or n == targets[0]]
        metafunc.parametrize("arrangement", [ARRANGEMENTS[n] for n in names], ids=names)


class Cluster:
    """Nodes started with ``--cluster`` and ``--routes`` to the first node only (the seed): gossip makes the mesh."""

    def __init__(self, kinds: tuple[str, ...], name: str = "c1") -> None:
        self.kinds = kinds
        self.name = name
        self.cluster_ports = free_ports(len(kinds))
        self.nodes: list[ServerProcess] = []

    def args(self, i: int) -> list[str]:
        args = ["--cluster", f"nats://127.0.0.1:{self.cluster_ports[i]}", "--cluster_name", self.name,
                "-n", f"node{i}"]
        if i:
            args += ["--routes", f"nats-route://127.0.0.1:{self.cluster_ports[0]}"]
        return args

    def start(self, count: int | None = None) -> "Cluster":
        for i in range(len(self.nodes), count or len(self.kinds)):
            self.nodes.append(ServerProcess(kind=self.kinds[i], args=self.args(i), jetstream=False).start())
        return self

    def routez(self, i: int) -> dict:
        with urllib.request.urlopen(f"{self.nodes[i].http_url}/routez", timeout=2) as r:
            return json.loads(r.read())

    def remote_ids(self, i: int) -> set[str]:
        return {r["remote_id"] for r in self.routez(i)["routes"]}

    def wait_mesh(self, timeout: float = 10.0) -> None:
        """Until every node has a route to every other one (nats-server pools several per server: ids, not
        routes, are counted)."""
        n = len(self.nodes)
        deadline = time.monotonic() + timeout
        while True:
            counts = [len(self.remote_ids(i)) for i in range(n)]
            if all(c == n - 1 for c in counts):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no full mesh after {timeout}s: {counts}\n" +
                                     "\n".join(node.log()[-2000:] for node in self.nodes))
            time.sleep(0.05)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()


@pytest.fixture
def cluster(arrangement):
    c = Cluster(arrangement)
    yield c
    c.cleanup()
