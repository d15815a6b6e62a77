"""JetStream start-up against both servers: ``-js`` without a store directory uses nats-server's temporary directory
(``$TMPDIR/nats/jetstream``) and warns; the "Took <duration> to start JetStream" line; and, Skiff only, an embedded
server without ``store_dir`` stores in a directory of its own that is gone after shutdown (issue #14)."""
from __future__ import annotations

import os
import re

import pytest

from skiff.server.core.server import Server

TOOK = re.compile(r"\[INF\] Took (\d+(\.\d+)?(ns|µs|ms|s)|\d+m[\d.]+s) to start JetStream$")


def test_js_without_store_dir_uses_the_temporary_directory(server_factory, tmp_path, monkeypatch):
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    srv = server_factory("-js", jetstream=False)
    log = srv.log()
    lines = [ln.split(" ", 3)[3] for ln in log.splitlines() if ln.count(" ") >= 3]
    i = lines.index("[INF] Starting JetStream")
    assert lines[i + 1] == "[WRN] Temporary storage directory used, data could be lost on system reboot"
    assert f'[INF]   Store Directory: "{tmp}/nats/jetstream"' in lines
    took = [n for n, ln in enumerate(lines) if TOOK.search(ln)]
    assert len(took) == 1 and lines[took[0] - 1] == "[INF] -------------------------------------------", lines
    assert lines[took[0] + 1].startswith("[INF] Listening for client connections on ")
    assert (tmp / "nats" / "jetstream").is_dir()
    assert not os.path.exists(os.path.join(os.path.dirname(srv.log_path), "data"))  # not ./data of its cwd


def test_store_dir_given_no_warning(server):
    log = server.log()
    assert "Temporary storage directory" not in log
    assert len([ln for ln in log.splitlines() if TOOK.search(ln)]) == 1


def test_both_limits_set_uses_the_temporary_directory_itself(server_factory, tmp_path, monkeypatch):
    """With max_memory_store and max_file_store both set nats-server skips its dynamic configuration and stores in
    os.TempDir()/jetstream (still with the warning)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    srv = server_factory(jetstream=False, config="jetstream { max_memory_store: 64MB, max_file_store: 64MB }\n")
    log = srv.log()
    assert f'Store Directory: "{tmp}/jetstream"' in log
    assert "[WRN] Temporary storage directory used, data could be lost on system reboot" in log


@pytest.mark.skiff_only
async def test_embedded_server_without_store_dir_cleans_up(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    async with Server(port=0, jetstream=True) as srv:
        store = srv.jetstream.store_dir
        assert os.path.isdir(store) and not store.startswith(str(tmp_path))
    assert not os.path.exists(os.path.dirname(store))
    assert os.listdir(tmp_path) == []  # nothing in ./data
