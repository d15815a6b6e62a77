"""Done-when of issue #14 point 5: a test in another language (nats.js from npm) drives the clock and a fault of a
Skiff process through ``$SKIFF.>`` (examples/js/skiff_control.mjs, the example docs/testing.md points at).

tests/nodejs.py installs the pinned packages of ``examples/js/package.json`` with npm into a cache directory
outside the tree (once per version); the test skips, saying why, when Node or npm is missing or the registry cannot
be reached.
"""
import json
import subprocess
from pathlib import Path

import pytest

from tests.nodejs import node_package

pytestmark = pytest.mark.skiff_only

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "js"


def test_nats_js_drives_the_clock_and_a_fault(server_factory, target):
    client = node_package(EXAMPLE, "skiff_control.mjs")
    srv = server_factory("--control", "--clock=manual")
    p = subprocess.run(["node", str(client / "skiff_control.mjs"), srv.url], capture_output=True, text=True,
                       timeout=60, cwd=client)
    assert p.returncode == 0, p.stderr + srv.log()
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["first"] == ["first order", 1]
    assert out["second"] == ["first order", 2, True]
    assert out["waitedMs"] < 5000  # redelivered at once, not after the 30 s ack_wait
    assert out["timersRan"] >= 1
    assert out["ackFloor"] == {"consumer_seq": 2, "stream_seq": 1} and out["numAckPending"] == 0
    assert "disconnect" in out["events"] and out["events"][-1] == "reconnect"
    assert out["manual"] is True
