"""nats.js over WebSocket against both servers: a JavaScript client connects, publishes and subscribes.

The client is ``@nats-io/nats-core`` (``wsconnect``) run by Node; tests/nodejs.py installs the pinned packages of
``js/package.json`` with npm into a cache directory outside the tree (once per version) and skips, saying why, when
Node or npm is missing or the registry cannot be reached.  Node 20 needs ``--experimental-websocket`` for the
global ``WebSocket`` the client uses; Node 22 has it by default.
"""
import json
import subprocess
from pathlib import Path

from tests.client.test_websocket import ws_server  # noqa: F401 - the fixture
from tests.nodejs import node_package

JS = Path(__file__).resolve().parent / "js"


def _node_argv() -> list[str]:
    has_ws = subprocess.run(["node", "-e", "process.exit(typeof WebSocket === 'undefined' ? 1 : 0)"],
                            capture_output=True, timeout=30).returncode == 0
    return ["node"] if has_ws else ["node", "--experimental-websocket", "--no-warnings"]


def test_nats_js_over_websocket(ws_server):  # noqa: F811
    client = node_package(JS, "ws_client.mjs")
    srv, port = ws_server()
    p = subprocess.run(_node_argv() + [str(client / "ws_client.mjs"), f"ws://127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=60, cwd=client)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [["js.a", 5, "1"], ["js.b", 100000, ""], "re:q"]
