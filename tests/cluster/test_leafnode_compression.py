"""Leaf node compression (nats-server 2.10+, ``leafnodes { compression }`` and a remote's ``compression``;
leafnode.go processLeafnodeInfo, negotiateLeafCompression), in the four arrangements of test_leafnodes.py.

Both ends default to ``s2_auto``.  The spoke, on the hub's first INFO, selects a mode from its own and the hub's
(server.go selectCompressionMode), sends an INFO with it and switches to an S2 stream; the hub, on that INFO, switches
and answers with its INFO, compressed.  A spoke that does not compress sends CONNECT at once, with ``compress_mode``.
/leafz shows the mode on both sides.  Over TLS the S2 stream runs inside the TLS records.
"""
from __future__ import annotations

import asyncio

import nats
import pytest

from tests.cluster.test_leafnode_tls import tls
from tests.cluster.test_leafnodes import (PAIRS, LeafPair, _settle, leaf_pair,  # noqa: F401
                                          pytest_generate_tests)

LEVELS = {"s2_uncompressed", "s2_fast", "s2_better", "s2_best"}


async def _cross(lp: LeafPair) -> None:
    """Messages (with headers, 64 KiB of repetitive bytes among them) and a request cross the link both ways."""
    hub, spoke = await nats.connect(lp.hub.url), await nats.connect(lp.spoke.url)
    try:
        at_hub, at_spoke = [], []

        async def on_hub(m):
            at_hub.append(m.data)

        async def on_spoke(m):
            at_spoke.append((m.data, m.headers))

        async def answer(m):
            await m.respond(b"spoke:" + m.data)

        await hub.subscribe("up.>", cb=on_hub)
        await spoke.subscribe("down.>", cb=on_spoke)
        await spoke.subscribe("svc", cb=answer)
        await _settle(hub, spoke)
        big = b"compress me " * 5000
        for i in range(50):
            await spoke.publish(f"up.{i}", big if i == 7 else str(i).encode())
            await hub.publish("down.x", str(i).encode(), headers={"K": str(i)})
        await hub.flush()
        await spoke.flush()
        for _ in range(200):
            if len(at_hub) == 50 and len(at_spoke) == 50:
                break
            await asyncio.sleep(0.05)
        assert len(at_hub) == 50 and at_hub[7] == big
        assert [d for d, _ in at_spoke] == [str(i).encode() for i in range(50)]
        assert all(h == {"K": d.decode()} for d, h in at_spoke)
        r = await hub.request("svc", b"q", timeout=3)
        assert r.data == b"spoke:q"
    finally:
        await hub.close()
        await spoke.close()


def _modes(lp: LeafPair) -> tuple[str, str]:
    return lp.leafz(lp.hub)["leafs"][0]["compression"], lp.leafz(lp.spoke)["leafs"][0]["compression"]


@pytest.mark.parametrize("hub_mode, spoke_mode, want", [
    ("", "", "auto"),  # both default to s2_auto: a level by RTT
    ("s2_fast", "s2_fast", ("s2_fast", "s2_fast")),
    ("accept", "s2_best", ("s2_best", "s2_best")),
    ("s2_better", "accept", ("s2_better", "s2_better")),
    ("off", "s2_fast", ("off", "off")),
    ("s2_fast", "off", ("off", "off")),
])
async def test_negotiated_modes(leaf_pair, hub_mode, spoke_mode, want):  # noqa: F811
    lp = leaf_pair(hub_extra=f"compression: {hub_mode}" if hub_mode else "",
                   spoke_extra=f"compression: {spoke_mode}" if spoke_mode else "")
    got = _modes(lp)
    if want == "auto":
        assert set(got) <= LEVELS, got
    else:
        assert got == want
    await _cross(lp)


async def test_s2_auto_uses_its_thresholds(leaf_pair):  # noqa: F811
    """rtt_thresholds ["0", "0", "100h"] on both ends: any RTT up to 100 hours is s2_better, at the first INFO and at
    every PONG after it (leafnode.go negotiateLeafCompression, client.go processPong)."""
    comp = 'compression: { mode: s2_auto, rtt_thresholds: ["0", "0", "100h"] }'
    lp = leaf_pair(hub_extra=comp, spoke_extra=comp)
    assert _modes(lp) == ("s2_better", "s2_better")
    await _cross(lp)
    assert _modes(lp) == ("s2_better", "s2_better")


async def test_compressed_inside_tls(leaf_pair):  # noqa: F811
    """Mutual TLS and s2_fast: the S2 stream inside the TLS records, both ways."""
    lp = leaf_pair(hub_extra="compression: s2_fast, " + tls("server", verify=True),
                   spoke_extra="compression: s2_fast, " + tls("client"))
    assert _modes(lp) == ("s2_fast", "s2_fast")
    await _cross(lp)


@pytest.mark.parametrize("text", [
    "leafnodes { listen: 127.0.0.1:-1, compression: bogus }",
    'leafnodes { remotes [ { url: "nats-leaf://127.0.0.1:1", compression: bogus } ] }',
])
def test_unknown_mode_refused(tmp_path, text):
    """An unknown mode in the hub's block or a remote's: nats-server's words from both (nats-server at start)."""
    import re
    import subprocess

    from skiff.server.conf import ConfigError
    from skiff.server.options import options_from_config
    from tests.harness import nats_server_binary

    f = tmp_path / "c.conf"
    f.write_text(text + "\n")
    error = 'unsupported compression mode "bogus"'
    with pytest.raises(ConfigError, match=re.escape(error)):
        options_from_config(str(f))
    out = subprocess.run([nats_server_binary(), "-c", str(f), "-p", "-1"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode != 0 and error in out.stdout + out.stderr
