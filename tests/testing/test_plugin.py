"""The pytest plugin (skiff/testing/plugin.py) as a user meets it: a test file of their own, no conftest, run by
pytest in a fresh process with only the entry point loading the plugin."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness import ServerProcess

ROOT = Path(__file__).resolve().parents[2]

USER_TESTS = '''
import os
import nats


async def test_pubsub(nats_server):
    nc = await nats.connect(nats_server.client_url)
    sub = await nc.subscribe("greet.*")
    await nc.publish("greet.joe", b"hi")
    assert (await sub.next_msg(timeout=1)).data == b"hi"
    await nc.close()


async def test_redelivery_without_waiting(nats_server, nats_clock):
    nc = await nats.connect(nats_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    await js.publish("orders.new", b"1")
    sub = await js.pull_subscribe("orders.>", durable="worker", config=nats.js.api.ConsumerConfig(ack_wait=30))
    first = (await sub.fetch(1))[0]
    assert nats_clock.advance(29) == 0 or True
    await nats_clock.settle()
    await nats_clock.tick(2)  # 31 s after the delivery: due again, without sleeping
    again = (await sub.fetch(1))[0]
    assert again.data == first.data and again.metadata.num_delivered == 2
    await nc.close()


async def test_restart_keeps_messages_and_port(nats_server_factory):
    srv = await nats_server_factory()
    nc = await nats.connect(srv.client_url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"])
    await js.publish("s.1", b"kept")
    await nc.close()
    again = await nats_server_factory.restart(srv)
    assert again.port == srv.port
    nc = await nats.connect(again.client_url)
    assert (await nc.jetstream().get_msg("S", 1)).data == b"kept"
    await nc.close()


async def test_store_is_temporary(nats_server):
    store = getattr(nats_server, "store_dir", "") or nats_server.options.store_dir
    assert store and os.path.isdir(store)
    with open(os.environ["STORE_RECORD"], "a") as f:
        f.write(store + "\\n")
'''


def _run(tmp_path: Path, *args: str, source: str = USER_TESTS, mode: str = "auto") -> subprocess.CompletedProcess:
    (tmp_path / "test_user.py").write_text(source)
    env = dict(os.environ, PYTHONPATH=str(ROOT), STORE_RECORD=str(tmp_path / "stores.txt"))
    env.pop("SKIFF_NATS_SERVER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "-o", f"asyncio_mode={mode}", "-o", "asyncio_default_fixture_loop_scope=function", *args,
                           "test_user.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_fixtures_on_skiff(tmp_path):
    r = _run(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "4 passed" in r.stdout
    stores = (tmp_path / "stores.txt").read_text().split()
    assert stores and not any(os.path.exists(s) for s in stores), "the temporary store must be removed"


def test_strict_mode(tmp_path):
    src = USER_TESTS.replace("\nasync def", "\n@pytest.mark.asyncio\nasync def").replace("import os", "import os\nimport pytest")
    r = _run(tmp_path, source=src, mode="strict")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "4 passed" in r.stdout


def test_binary_runs_the_same_tests_and_skips_the_clock(tmp_path):
    r = _run(tmp_path, "--nats-server=binary")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "3 passed, 1 skipped" in r.stdout
    assert "nats_clock drives Skiff's own clock; --nats-server=binary has none" in r.stdout


def test_url_uses_a_running_server(tmp_path):
    srv = ServerProcess(kind="skiff").start()
    try:
        r = _run(tmp_path, f"--nats-server={srv.url}", "-k", "pubsub or restart")
    finally:
        srv.cleanup()
    assert r.returncode == 0, r.stdout[-3000:]
    assert "1 passed, 1 skipped" in r.stdout  # a running server cannot be restarted by the test


def test_bad_option_is_a_usage_error(tmp_path):
    r = _run(tmp_path, "--nats-server=bogus")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "--nats-server: expected skiff, binary or a nats:// URL, got 'bogus'" in r.stderr
