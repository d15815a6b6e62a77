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
import time

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


@pytest.mark.parametrize("thresholds, error", [
    ('"50ms", "10ms"', "RTT threshold values [50ms 10ms] should be in ascending order"),
    ('"1ms", "2ms", "3ms", "4ms", "5ms"',
     'compression mode "s2_auto" should have no more than 4 RTT thresholds: [1ms 2ms 3ms 4ms 5ms]'),
    ('"0s"', 'compression mode "s2_auto" requires at least one RTT threshold'),
    ('"abc"', 'time: invalid duration "abc"'),
])
@pytest.mark.parametrize("where", ["cluster", "leafnodes", "remote"])
def test_rtt_thresholds_refused(tmp_path, thresholds, error, where):
    """s2_auto's RTT thresholds as nats-server checks them when it starts (server.go
    validateAndNormalizeCompressionOption), in the three places a compression mode is set."""
    comp = f"compression: {{ mode: s2_auto, rtt_thresholds: [{thresholds}] }}"
    text = {"cluster": f"cluster {{ listen: 127.0.0.1:-1, {comp} }}",
            "leafnodes": f"leafnodes {{ listen: 127.0.0.1:-1, {comp} }}",
            "remote": f'leafnodes {{ remotes [ {{ url: "nats://127.0.0.1:1", {comp} }} ] }}'}[where]
    f = tmp_path / "c.conf"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=re.escape(error)):
        options_from_config(str(f))
    out = subprocess.run([nats_server_binary(), "-c", str(f), "-p", "-1", "-m", "0"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode != 0 and error in out.stdout + out.stderr


def test_rtt_thresholds_normalized(tmp_path):
    """A negative threshold is 0 (its level is not used), trailing zeros go; another mode keeps none."""
    f = tmp_path / "c.conf"
    f.write_text('cluster { listen: 127.0.0.1:-1, compression: { mode: auto, rtt_thresholds: ["-5ms", "0", "20ms", '
                 '"0"] } }\nleafnodes { remotes [ { url: "nats://127.0.0.1:1", compression: { mode: s2_fast, '
                 'rtt_thresholds: ["50ms", "10ms"] } } ] }\n')
    o = options_from_config(str(f))
    assert (o.cluster.compression, o.cluster.compression_rtts) == ("s2_auto", [0.0, 0.0, 0.020])
    assert (o.leafnodes.remotes[0].compression, o.leafnodes.remotes[0].compression_rtts) == ("s2_fast", [])


def test_s2_auto_uses_its_thresholds(pair, pairs):  # noqa: F811
    """rtt_thresholds ["0", "0", "100h"]: uncompressed and fast are not used and any RTT up to 100 hours is
    s2_better (selectS2AutoModeBasedOnRTT), at the first INFO and at every PONG after it."""
    comp = 'compression: { mode: s2_auto, rtt_thresholds: ["0", "0", "100h"] }'
    p = pairs(pair, (comp, comp))
    for z in p.wait_routes(4):
        assert {r["compression"] for r in z["routes"]} == {"s2_better"}, z["routes"]
    asyncio.run(_accounts_cross(p))


def test_s2_auto_follows_the_rtt(pair, pairs):  # noqa: F811
    """s2_auto picks its level again from every RTT a PONG measures (client.go processPong,
    updateS2AutoCompressionLevel).  The other server is stopped (SIGSTOP) for 3 s: node 1's PINGs (every 2 s)
    wait, and the PONG that comes when it resumes gives the RTT of the last one, s2_better or s2_best with the
    default thresholds when it is over 50 ms, until the next PING.  In every /routez snapshot each route's level is
    the one its RTT gives.  (The last PING may fall just before the resume, or the next one come before a snapshot:
    up to four stops.)"""
    import signal

    from skiff.server.conf.values import parse_duration
    from skiff.server.core.link import auto_level

    extra = "compression: s2_auto"
    p = pairs(pair, (extra, extra), top='ping_interval: "2s"\nping_max: 5')
    p.wait_routes(4)

    def high_rtt() -> bool:
        routes = p.routez(1)["routes"]
        for r in routes:
            assert r["compression"] == auto_level(parse_duration(r["rtt"])), routes
        return any(parse_duration(r["rtt"]) > 0.05 for r in routes)

    high_rtt()
    for _ in range(4):
        p.nodes[0].proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(3)
        finally:
            p.nodes[0].proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            if high_rtt():
                return
            time.sleep(0.01)
    raise AssertionError(f"no RTT over 50 ms after four stops: {p.routez(1)['routes']}")
