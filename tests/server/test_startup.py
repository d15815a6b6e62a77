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


# Modules a server start must not import: each is needed only by a request that may never come.
NOT_AT_START = ("server.jetstream.snapshot", "server.jetstream.restore", "storage.s2stream", "storage.snaparchive",
                "cramjam")


def test_start_path_imports_nothing_only_a_request_needs():
    code = ("import sys, server.cli, server.runner, server.core.server, server.jetstream.engine, "
            "server.jetstream.api_streams, server.jetstream.api_consumers\n"
            f"print(' '.join(m for m in {NOT_AT_START!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env=server_env(), cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == []
