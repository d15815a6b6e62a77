"""One fixture runs every client-visible test against Skiff and against the real nats-server.

``--target=both`` (the default, and what CI runs) parametrizes the ``target`` fixture with both kinds;
``--target=skiff`` or ``--target=nats-server`` (or ``SKIFF_TARGET``) picks one.  Tests marked ``skiff_only``
exercise what only Skiff offers (embedding, the driven clock, fault injection) and run once.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.harness import TARGETS, ServerProcess

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def pytest_addoption(parser):
    parser.addoption(
        "--target",
        default=os.environ.get("SKIFF_TARGET", "both"),
        choices=["both", *TARGETS],
        help="which server the client-visible tests run against",
    )


def selected_targets(config) -> list[str]:
    t = config.getoption("--target")
    return list(TARGETS) if t == "both" else [t]


def pytest_generate_tests(metafunc):
    if "target" in metafunc.fixturenames:
        targets = selected_targets(metafunc.config)
        if metafunc.definition.get_closest_marker("skiff_only"):
            targets = [t for t in targets if t == "skiff"]
        metafunc.parametrize("target", targets, scope="session" if "shared_server" in metafunc.fixturenames else "function")


@pytest.fixture
def server_factory(target, tmp_path):
    """Start servers of the current target with extra nats-server flags or a config file text."""
    started: list[ServerProcess] = []

    def start(*args: str, jetstream: bool = True, config: str | None = None, **kw) -> ServerProcess:
        srv = ServerProcess(kind=target, args=list(args), jetstream=jetstream, config=config, **kw)
        started.append(srv)
        return srv.start()

    yield start
    for srv in started:
        srv.cleanup()


@pytest.fixture
def server(server_factory) -> ServerProcess:
    """A fresh server (JetStream on, file store in a temp dir) for one test."""
    return server_factory()


_shared: dict[str, ServerProcess] = {}


@pytest.fixture(scope="session")
def shared_server(target) -> ServerProcess:
    """One server per target for the whole session, for tests that do not depend on a clean state."""
    if target not in _shared:
        _shared[target] = ServerProcess(kind=target).start()
    return _shared[target]


def pytest_sessionfinish(session, exitstatus):
    for srv in _shared.values():
        srv.cleanup()


def load_schema(type_name: str) -> dict:
    """The schema whose file name matches a JetStream reply/advisory `type` (io.nats.jetstream.api.v1.X)."""
    parts = type_name.split(".")
    kind, version, name = parts[-3], parts[-2], parts[-1]
    path = SCHEMAS / "jetstream" / kind / version / f"{name}.json"
    return json.loads(path.read_text())
