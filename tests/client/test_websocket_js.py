"""nats.js over WebSocket against both servers: a JavaScript client connects, publishes and subscribes.

The client is ``@nats-io/nats-core`` (``wsconnect``) run by Node; the test installs the pinned package from
``js/package.json`` with npm into a cache directory outside the tree (once per version) and skips, saying why, when
Node or npm is missing or the registry cannot be reached.  Node 20 needs ``--experimental-websocket`` for the
global ``WebSocket`` the client uses; Node 22 has it by default.
"""
import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.client.test_websocket import ws_server  # noqa: F401 - the fixture

JS = Path(__file__).resolve().parent / "js"


def _node_client_dir() -> Path:
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed for the nats.js test")
    pkg = (JS / "package.json").read_bytes()
    cache = Path(tempfile.gettempdir()) / "skiff-nats-js" / hashlib.sha256(pkg).hexdigest()[:16]
    if not (cache / "node_modules" / "@nats-io" / "nats-core").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "package.json").write_bytes(pkg)
        p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=cache,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            pytest.skip(f"npm install of the nats.js client failed: {p.stderr.strip()[-300:]}")
    shutil.copy(JS / "ws_client.mjs", cache / "ws_client.mjs")
    return cache


def _node_argv() -> list[str]:
    has_ws = subprocess.run(["node", "-e", "process.exit(typeof WebSocket === 'undefined' ? 1 : 0)"],
                            capture_output=True, timeout=30).returncode == 0
    return ["node"] if has_ws else ["node", "--experimental-websocket", "--no-warnings"]


def test_nats_js_over_websocket(ws_server):  # noqa: F811
    client = _node_client_dir()
    srv, port = ws_server()
    p = subprocess.run(_node_argv() + [str(client / "ws_client.mjs"), f"ws://127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=60, cwd=client)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [["js.a", 5, "1"], ["js.b", 100000, ""], "re:q"]
