"""One fixture runs every client-visible test against Skiff and against the real nats-server.

``--target=both`` (the default, and what CI runs) parametrizes the ``target`` fixture with both kinds;
``--target=skiff`` or ``--target=nats-server`` (or ``SKIFF_TARGET``) picks one.  Tests marked ``skiff_only``
exercise what only Skiff offers (embedding, the driven clock, fault injection) and run once.

The suite runs on three pytest-xdist workers (``-n 3 --dist loadgroup``, the Makefile's ``test``; on 2 cores the
workers' processes use about a third of the CPU time with two workers, the rest is waiting): each test goes
to whichever worker is free, except the groups of ``XDIST_GROUPS``, each of which runs whole on one worker because
its tests share something costly or single: a module-scoped fixture (built once per worker that runs any of its
tests), a SparkSession (a JVM), or a cache directory that an install fills.  Ports are picked race-free
across processes (``tests/harness.py`` ``free_ports``), and every server has its own temporary directory.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import jsonschema
import pytest
from jsonschema.exceptions import best_match

from tests import harness, natspy_flush
from tests.harness import TARGETS, ServerProcess

TMPDIR = harness.use_memory_tmpdir()  # before pytest picks its base temporary directory and the workers start
harness.cache_bytecode_outside_the_tree()  # before the workers start and the test modules are imported
natspy_flush.apply()  # nats-py's flush() must be a barrier for the tests that rely on it: tests/natspy_flush.py

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def pytest_report_header(config):
    return f"temporary files: {TMPDIR or harness.SYSTEM_TMP} ({'memory' if TMPDIR else 'disk'}; SKIFF_TEST_TMPDIR)"


def pytest_addoption(parser):
    parser.addoption(
        "--target",
        default=os.environ.get("SKIFF_TARGET", "both"),
        choices=["both", *TARGETS],
        help="which server the client-visible tests run against",
    )


# Path under tests/ (a file, or a folder ending in "/") -> the group whose tests run all on one xdist worker.
XDIST_GROUPS = {
    # The Spark tests are ~750 s of one worker's time on 2 cores (kill -9 cases 300 s, installs 95 s), about a
    # third of the whole suite's: in three groups, so that no one worker holds the suite's critical path (measured
    # with the split: the three workers end within a second of each other).  The kill -9 cases get a
    # SparkSession of their own (a second JVM, ~5 s and 1 GiB: they start a killed driver's JVM each anyway); the
    # installs of test_discovery use no SparkSession (module fixtures: the copied source and the deps links).
    # The first match wins: these two before "spark/".
    "spark/test_kill9.py": "spark-kill9",
    "spark/test_discovery.py": "spark-discovery",
    "spark/": "spark",  # one SparkSession (a JVM, ~5 s to start and 1 GiB) for every other Spark test: conftest.py
    "packaging/test_wheel.py": "wheel",  # the wheel is built once (module fixture)
    "bench/test_bench_smoke.py": "bench-smoke",  # the benchmark runs once (module fixture)
    "bench/test_lab_smoke.py": "lab-smoke",  # the lab campaigns run once (module fixture)
    "client/test_cclient.py": "c-client",  # the C client's scenario is compiled once (module fixture)
    "wire/test_parser_differential.py": "parser-differential",  # one server of each kind (module fixture)
    # they fill (npm install) and then use the same nats.js cache directory under the temporary directory
    "client/test_websocket_js.py": "nats-js",
    "testing/test_control_js.py": "nats-js",
    "client/test_natsjs_jetstream.py": "nats-js",
    # fixed ports (4222, 8222, 6222): the README's and docs' server commands run as printed (and ./data), and
    # nats.py's own test harness (tests/upstream/natspy)
    "test_docs_commands.py": "fixed-ports",
    "upstream/": "fixed-ports",
}


def xdist_group_of(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0].removeprefix("tests/")
    for prefix, group in XDIST_GROUPS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return group
    return None


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent without it
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups of XDIST_GROUPS, read off the test ids by the controller.

    xdist's own way (an ``xdist_group`` mark that its worker appends to the test id) does nothing with pytest 9.2,
    whose test ids no longer come from the attribute xdist 3.8 rewrites; a test id's path is all the controller
    needs.  Every other test is a unit of its own, as with ``--dist load``, and the groups (more than one test
    each) are handed out first, the largest first, so that the long ones do not end up last on one worker."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid) or super()._split_scope(nodeid)

    return GroupScheduling(config, log)


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


@functools.cache
def _schema_validator(type_name: str):
    schema = load_schema(type_name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def check_schema(instance: dict, type_name: str | None = None) -> None:
    """Validate a reply or advisory against the schema of its ``type`` (or of ``type_name``), raising the error
    jsonschema.validate would.  The schema is loaded and checked once per run: jsonschema.validate reads it, checks
    it against its metaschema and builds a validator at every call, 30x the cost of the validation itself (21 ms
    against 0.7 ms for a stream info reply), and the JetStream tests validate every API reply they read."""
    error = best_match(_schema_validator(type_name or instance["type"]).iter_errors(instance))
    if error is not None:
        raise error
