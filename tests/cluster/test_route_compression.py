"""Route compression (nats-server 2.10+, ``cluster { compression }``; server.go selectCompressionMode, route.go
negotiateRouteCompression), on Skiff, on nats-server and in mixed pairs.

Each side names a mode (``accept`` by default: compress if the other asks); they agree on one per connection, shown
as ``compression`` in /routez, and from then on the route is an S2 stream both ways.  ``s2_auto`` picks its level by
the connection's RTT (below 10 ms ``s2_uncompressed``, then fast, better, best at 50 and 100 ms).
"""
from __future__ import annotations

import asyncio
import re
import subprocess

import pytest

from skiff.server.conf import ConfigError
from skiff.server.options import options_from_config
from tests.cluster.conftest import wait_listening
from tests.cluster.test_route_pooling import (ACCOUNTS, _accounts_cross, _error, _fake_pooled, pairs,  # noqa: F401
                                              pytest_generate_tests)
from tests.harness import free_port, nats_server_binary


@pytest.mark.parametrize("modes, want", [
    (("s2_fast", "s2_fast"), ("s2_fast", "s2_fast")),
    (("accept", "s2_best"), ("s2_best", "s2_best")),  # accept takes the other's mode
    (("s2_better", "accept"), ("s2_better", "s2_better")),
    (("s2_fast", "s2_better"), ("s2_fast", "s2_better")),  # asymmetric: each writes at its own level
    (("s2_auto", "s2_auto"), ("s2_auto", "s2_auto")),  # a level by RTT (see below)
    (("accept", "accept"), ("off", "off")),
    (("s2_fast", "off"), ("off", "off")),
    (("on", "true"), ("s2_fast", "s2_fast")),
], ids=lambda v: "-".join(v))
def test_negotiated_mode_and_traffic(pair, pairs, modes, want):  # noqa: F811
    """The mode both ends agree on, per connection of the pool (3 pooled and $SYS's), and three accounts'
    messages across the compressed routes."""
    p = pairs(pair, tuple(f"compression: {m}" for m in modes))
    rz = p.wait_routes(4)
    levels = {"s2_uncompressed", "s2_fast", "s2_better", "s2_best"}
    for z, w in zip(rz, want):
        got = {r["compression"] for r in z["routes"]}
        if w == "s2_auto":
            # computeRTT(c.start): the time from connecting to the other's INFO, 10 ms or less on an idle
            # loopback (s2_uncompressed), more on a loaded machine: a level of S2 in any case.
            assert got <= levels, z["routes"]
        else:
            assert got == {w}, z["routes"]
    asyncio.run(_accounts_cross(p))


def test_default_is_accept(pair, pairs):  # noqa: F811
    """Without the key both servers are in ``accept``: routes are not compressed, and /routez says ``off``."""
    p = pairs(pair)
    for z in p.wait_routes(4):
        assert {r["compression"] for r in z["routes"]} == {"off"}


def test_unsupported_mode_on_the_wire(server_factory):
    """A route INFO naming a mode nats-server does not know is refused (-ERR and close)."""
    port = free_port()
    server_factory(jetstream=False, config=f'cluster {{ name: c1, listen: "127.0.0.1:{port}", '
                                           f'compression: s2_fast }}\n')
    wait_listening(port)
    r = _fake_pooled(port, route_pool_size=3, compression="s2_zzz")
    try:
        assert _error(r) == b"-ERR 'unsupported route compression mode \"s2_zzz\"'"
    finally:
        r.close()


@pytest.mark.parametrize("text, error, at_start", [
    ("cluster { listen: 127.0.0.1:-1, compression: bogus }", 'unsupported compression mode "bogus"', True),
    ("cluster { listen: 127.0.0.1:-1, compression: 5 }",
     'field "compression" should be a boolean or a structure, got int64', False),
    ("cluster { listen: 127.0.0.1:-1, compression: { mode: fast, bad: 1 } }", 'unknown field "bad"', False),
])
def test_refused_settings(tmp_path, text, error, at_start):
    """Bad compression settings: nats-server's words, from both servers (an unknown mode only when nats-server
    starts: its -t does not check it)."""
    f = tmp_path / "c.conf"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=re.escape(error)):
        options_from_config(str(f))
    args = [nats_server_binary(), "-c", str(f)] + (["-p", "-1"] if at_start else ["-t"])
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and error in out.stdout + out.stderr


def test_rtt_thresholds_refused(tmp_path):
    """s2_auto's own RTT thresholds are not implemented by Skiff: refused with the key's line."""
    f = tmp_path / "c.conf"
    f.write_text('cluster {\n  listen: 127.0.0.1:-1\n  compression: { mode: s2_auto, rtt_thresholds: ["5ms"] }\n}\n')
    with pytest.raises(ConfigError, match=r"c\.conf:3:\d+: .*rtt_thresholds"):
        options_from_config(str(f))
