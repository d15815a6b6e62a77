"""Start-up cost: what a server process imports and how the harness starts it (issue #13: start within 100 ms)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.harness import ROOT, server_env

pytestmark = pytest.mark.skiff_only


def test_harness_server_process_caches_bytecode(monkeypatch):
    # PYTHONDONTWRITEBYTECODE in the test environment must not make every server start compile every module.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env = server_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    prefix = env["PYTHONPYCACHEPREFIX"]
    assert not prefix.startswith(str(ROOT))  # the source tree stays free of __pycache__ as the variable asked
    out = subprocess.run([sys.executable, "-c", "import sys; print(sys.dont_write_bytecode, sys.pycache_prefix)"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", prefix]


def test_harness_leaves_a_chosen_cache_alone(monkeypatch, tmp_path):
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    assert "PYTHONPYCACHEPREFIX" not in server_env()
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path))
    assert server_env()["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"  # the test process itself is untouched


def test_the_test_run_caches_bytecode_outside_the_tree(monkeypatch, tmp_path):
    """conftest.py: under PYTHONDONTWRITEBYTECODE the run itself and what it starts cache bytecode in a directory
    outside the checkout (pytest's rewritten test modules too), never in the source tree."""
    from tests import harness

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    harness.cache_bytecode_outside_the_tree()
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert os.environ["PYTHONPYCACHEPREFIX"] == sys.pycache_prefix == harness.PYCACHE
    assert not harness.PYCACHE.startswith(str(ROOT)) and sys.dont_write_bytecode is False
    # A cache directory the user chose is the one used.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    harness.cache_bytecode_outside_the_tree()
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ and sys.dont_write_bytecode is False
    assert os.environ["PYTHONPYCACHEPREFIX"] == sys.pycache_prefix == str(tmp_path)


# Modules a server start must not import: each is needed only by a request that may never come.
NOT_AT_START = ("skiff.server.jetstream.snapshot", "skiff.server.jetstream.restore", "skiff.storage.s2stream", "skiff.storage.snaparchive",
                "cramjam", "skiff.storage.filestore", "skiff.storage.filestore.store", "skiff.storage.memstore")


def test_start_path_imports_nothing_only_a_request_needs():
    code = ("import sys, server.cli, server.runner, server.core.server, server.jetstream.engine, "
            "server.jetstream.api_streams, server.jetstream.api_consumers\n"
            f"print(' '.join(m for m in {NOT_AT_START!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env=server_env(), cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == []


async def test_restart_serves_first_and_wakes_subjects_in_slices(tmp_path, monkeypatch):
    """A restart leaves the recovered subjects asleep and wakes them on the loop in slices after it serves
    (server/jetstream/engine.py _start_waking): nothing is lost, and no request has to wake them all at once."""
    import asyncio

    import nats

    from skiff.server.core.server import Server
    from skiff.server.jetstream import engine

    n = 4000
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        js = nc.jetstream()
        await js.add_stream(name="W", subjects=["w.>"])
        for i in range(n):  # 2 KiB each: several 4 MiB blocks, sealed ones with their summary
            await nc.publish(f"w.{i}", b"x" * 2048)
        await nc.flush()
        for _ in range(200):
            if (await js.stream_info("W")).state.messages == n:
                break
            await asyncio.sleep(0.02)
        await nc.close()
    monkeypatch.setattr(engine, "WAKE_SLICE", 32)  # many slices: the server is up long before the last one
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        store = srv.jetstream.streams["W"].store
        assert len(store._lazy) > 1000  # started serving before making an object per subject
        for _ in range(1000):
            if not store._lazy:
                break
            await asyncio.sleep(0)
        assert not store._lazy and len(store._fss) == n
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        info = await nc.jetstream().stream_info("W", subjects_filter="w.*")
        assert info.state.messages == n and len(info.state.subjects) == n and store.state().num_subjects == n
        await nc.close()


def test_collector_back_on_once_serving():
    """python -m skiff.server loads and recovers with the collector off (server/__main__.py); the runner must turn it on
    again once the server is up, or a long-running server would never collect a reference cycle."""
    script = (
        "import gc, os, signal, threading, time\n"
        "gc.disable()\n"
        "from server.options import _finish\n"
        "from server import runner\n"
        "seen = []\n"
        "def probe():\n"
        "    time.sleep(1.5)\n"
        "    seen.append(gc.isenabled())\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "threading.Thread(target=probe, daemon=True).start()\n"
        "rc = runner.run(_finish({'port': -1, 'host': '127.0.0.1'}))\n"
        "print(seen, rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env=server_env(), cwd=ROOT, capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.split("\n")[-2] == "[True] 0", out.stdout + out.stderr


# A server started from the command line with JetStream and nothing else, up to its first client connection
# (cli -> Server.start -> INFO), in a fresh interpreter; prints the modules it loaded.
_START_AND_CONNECT = """
import asyncio, os, sys
import skiff.server.runner
from skiff.server.cli import parse_args
from skiff.server.core.server import Server

async def main(argv):
    srv = Server(parse_args(argv))
    await srv.start()
    r, w = await asyncio.open_connection("127.0.0.1", srv.port)
    assert (await r.readline()).startswith(b"INFO")
    w.close()
    await srv.shutdown()

import uvloop  # what the skiff process runs on (server/runner.py)

uvloop.run(main(sys.argv[1:]))
threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
print(" ".join(sorted(sys.modules)), f"threads={threads}")
"""

# What a plain JetStream start must leave alone (issue #13, start-up <= 100 ms): each costs milliseconds of every
# start and is needed only by a configuration that asks for it or by a request that may never come.
_NOT_FOR_A_PLAIN_START = (
    "pydantic", "pydantic_core",  # nothing uses it any more; ~100 ms with the models built on it
    "h11", "email",  # the monitoring port, and there only with its first request
    "skiff.server.monitor",  # -m
    "skiff.server.core.websocket", "skiff.server.core.cluster", "skiff.server.core.route",
    "skiff.server.core.leafnode", "skiff.server.core.jwt", "skiff.server.core.nkey", "skiff.server.core.operator",
    "skiff.server.core.resolver", "nkeys", "nacl", "bcrypt",  # websocket {}, cluster {}, leafnodes {}, operator mode
    "prometheus_client", "cramjam",  # /metrics, snapshots
    "skiff.server.conf.digest", "decimal",  # a configuration file's digest
    "skiff.server.conf.parser", "skiff.server.conf.mapping",  # a configuration file (these start from flags)
    "importlib.resources",  # protocol/errors.py reads errors.json beside itself
    "shutil", "tempfile", "bz2", "lzma",  # shutil imports both compressors; only deleting a stream needs it
    "msgpack",  # the first metadata file (storage/meta.py)
    "secrets", "hmac", "_hashlib",  # OpenSSL's hashlib, ~0.6 MiB resident: ids come from random.SystemRandom
    "structlog", "uuid", "pickle", "platform",  # ~13 ms and ~2 MiB: skiff/log.py writes the same lines
    # the first stream's (server/jetstream/engine.py _open): ~2 ms
    "skiff.server.jetstream.stream", "skiff.server.jetstream.batching", "skiff.server.jetstream.publish_checks",
    "skiff.server.jetstream.schedules", "skiff.server.jetstream.schedules_cron", "skiff.server.jetstream.transform",
    "skiff.server.jetstream.dedupe",
    # the API handler modules, with the first request to one of their rows (server/jetstream/api.py LAZY; their
    # first requests: tests/jetstream/test_api_lazy.py): ~29 M instructions, 7% of a start
    "skiff.server.jetstream.api_streams", "skiff.server.jetstream.api_snapshot",
    "skiff.server.jetstream.api_consumers", "skiff.protocol.jsapi.consumer_config", "skiff.storage.consumer",
    "skiff.server.jetstream.stream_consumers", "skiff.server.jetstream.consumer",
    "skiff.server.jetstream.consumer_core", "skiff.server.jetstream.consumer_advisories",
    "skiff.server.jetstream.consumer_reset", "skiff.server.jetstream.consumer_state", "skiff.server.jetstream.acks",
    "skiff.server.jetstream.delivery", "skiff.server.jetstream.lifecycle", "skiff.server.jetstream.pause",
    "skiff.server.jetstream.priority", "skiff.server.jetstream.pull", "skiff.server.jetstream.push",
    "skiff.server.jetstream.redelivery",
    # dataclass() execs generated code per class (protocol/record.py Fields replaced them); calendar and datetime
    # come with the first date checked or config date; gzip with the first $SYS request accepting it; the
    # transform checks with the first transform; the file configuration's tables with a file (conf/support.py)
    "dataclasses", "calendar", "datetime", "gzip", "skiff.protocol.jsapi._transform", "skiff.server.conf.support",
    # the store classes' bases and records, with the first store (storage/layout.py, server/jetstream/persist.py)
    "skiff.storage.base", "skiff.storage.records",
)


def _loaded_at_start(tmp_path, *flags: str) -> set[str]:
    argv = ["-js", "-sd", str(tmp_path / "store"), "-a", "127.0.0.1", "-p", "-1", *flags]
    out = subprocess.run([sys.executable, "-c", _START_AND_CONNECT, *argv], env=server_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def _offenders(loaded: set[str], names) -> list[str]:
    return sorted(m for m in loaded for n in names if m == n or m.startswith(n + "."))


def test_plain_jetstream_start_imports_only_what_it_uses(tmp_path):
    loaded = _loaded_at_start(tmp_path)
    assert "skiff.server.jetstream.engine" in loaded and "skiff.server.core.client" in loaded  # it did start
    assert _offenders(loaded, _NOT_FOR_A_PLAIN_START) == []
    # An IPv4 literal is bound without an address lookup, which uvloop would run on libuv's pool of four threads
    # (server/startup.py ipv4_listen_socket): the idle server is one thread.
    assert "threads=1" in loaded


def test_monitoring_port_loads_its_http_parser_with_the_first_request(tmp_path):
    loaded = _loaded_at_start(tmp_path, "-m", "-1")
    assert "skiff.server.monitor.http" in loaded
    assert _offenders(loaded, ("pydantic", "h11", "email", "prometheus_client")) == []
