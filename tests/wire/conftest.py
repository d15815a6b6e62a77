"""Fixtures for raw-TCP wire tests: a pool of RawClients that is closed after each test."""
from __future__ import annotations

import itertools
import shutil
import subprocess

import pytest

from tests.wire.rawclient import RawClient

_unique = itertools.count()


class RawPool:
    """Opens RawClients to a server and closes them all when the test ends."""

    def __init__(self) -> None:
        self.clients: list[RawClient] = []

    def connect(self, server, timeout: float = 2.0, **kw) -> RawClient:
        """Connected, first INFO read, nothing sent."""
        c = RawClient("127.0.0.1", server.port, timeout=timeout)
        self.clients.append(c)
        return c.connect(**kw)

    def handshake(self, server, **connect_fields) -> RawClient:
        """CONNECT sent (verbose and pedantic off unless given) and one PING/PONG done."""
        c = RawClient("127.0.0.1", server.port)
        self.clients.append(c)
        return c.handshake(**connect_fields)

    def close(self) -> None:
        for c in self.clients:
            c.close()


@pytest.fixture
def raw():
    pool = RawPool()
    yield pool
    pool.close()


@pytest.fixture
def subj(request) -> str:
    """A subject prefix no other test uses, so tests can share a server without seeing each other's traffic."""
    name = request.node.name.split("[")[0].replace("test_", "t")
    return f"{name}.{next(_unique)}"


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert path, key path), made with the openssl binary."""
    if not shutil.which("openssl"):
        pytest.skip("openssl binary not available")
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )
    return cert, key
