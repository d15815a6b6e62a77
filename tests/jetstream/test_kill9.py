"""kill -9 during a publish storm: every acknowledged message is there after the restart (both servers).

Publishers pipeline requests on several connections; once enough acks came back the server is SIGKILLed while
publishes are still in flight.  After the restart every sequence that was acknowledged must exist with the payload
that was acknowledged for it (DESIGN.md: a PubAck is sent only after the message reached the OS).
"""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from .kill9_support import close_dead

PUBLISHERS = 4
KILL_AFTER = 1000


async def _storm(server, acked: dict[int, bytes]) -> None:
    conns = [await nats.connect(server.url, allow_reconnect=False) for _ in range(PUBLISHERS)]
    stop = asyncio.Event()

    async def publisher(nc, pid: int) -> None:
        i = 0
        while not stop.is_set():
            payload = b"p%d-%d" % (pid, i)
            i += 1
            try:
                msg = await nc.request(f"storm.{pid}", payload, timeout=2)
            except Exception:
                return
            ack = json.loads(msg.data)
            if "seq" in ack and "error" not in ack:
                acked[ack["seq"]] = payload

    async def killer() -> None:
        while len(acked) < KILL_AFTER:
            await asyncio.sleep(0.005)
        server.kill()
        stop.set()

    tasks = [asyncio.create_task(publisher(nc, p)) for p, nc in enumerate(conns)]
    await asyncio.wait_for(killer(), 30)
    await asyncio.gather(*tasks, return_exceptions=True)
    await close_dead(*conns)


@pytest.mark.parametrize("sync", ["default", "always"])
async def test_kill9_keeps_every_acked_message(server_factory, sync):
    config = "jetstream { sync_interval: always }\n" if sync == "always" else None
    server = server_factory(config=config)
    nc = await nats.connect(server.url)
    r = json.loads((await nc.request("$JS.API.STREAM.CREATE.STORM", json.dumps(
        {"name": "STORM", "subjects": ["storm.>"], "allow_direct": True}).encode(), timeout=3)).data)
    assert "error" not in r, r
    await nc.close()

    acked: dict[int, bytes] = {}
    await _storm(server, acked)
    assert len(acked) >= KILL_AFTER

    server.start()
    nc = await nats.connect(server.url)
    info = json.loads((await nc.request("$JS.API.STREAM.INFO.STORM", b"", timeout=3)).data)
    st = info["state"]
    top = max(acked)
    assert st["first_seq"] == 1 and st["last_seq"] >= top and st["messages"] == st["last_seq"], st
    # Read everything back in direct-get batches and compare with what was acknowledged.
    stored: dict[int, bytes] = {}
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    seq = 1
    while seq <= top:
        await nc.publish("$JS.API.DIRECT.GET.STORM", json.dumps({"seq": seq, "batch": 1000}).encode(), reply=inbox)
        while True:
            m = await sub.next_msg(timeout=3)
            if m.headers and m.headers.get("Status") == "204":
                break
            stored[int(m.headers["Nats-Sequence"])] = m.data
        seq += 1000
    missing = [s for s in acked if stored.get(s) != acked[s]]
    assert not missing, f"{len(missing)} acknowledged messages lost or changed, e.g. {missing[:5]}"
    await nc.close()
