"""Fixtures for nats-py client tests: a connection factory that closes everything after each test."""
from __future__ import annotations

import itertools

import nats
import pytest

_unique = itertools.count()


class Connections:
    """``await conns.connect(server, **options)`` -> a nats-py Client; errors reported to the client are kept."""

    def __init__(self) -> None:
        self.clients: list = []
        self.errors: list[Exception] = []

    async def connect(self, server, **kw):
        async def error_cb(e: Exception) -> None:
            self.errors.append(e)

        kw.setdefault("connect_timeout", 2)
        kw.setdefault("allow_reconnect", False)
        kw.setdefault("error_cb", error_cb)
        nc = await nats.connect(server.url, **kw)
        self.clients.append(nc)
        return nc

    async def close(self) -> None:
        for nc in self.clients:
            if not nc.is_closed:
                try:
                    await nc.close()
                except Exception:
                    pass


@pytest.fixture
async def conns():
    c = Connections()
    yield c
    await c.close()


@pytest.fixture
def subj(request) -> str:
    """A subject prefix no other test uses, so tests can share one server."""
    name = request.node.name.split("[")[0].replace("test_", "c")
    return f"{name}.{next(_unique)}"
