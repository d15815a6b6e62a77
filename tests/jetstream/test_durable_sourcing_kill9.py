"""kill -9 while a source copies a workqueue stream through a durable ``ack_policy: flow_control`` consumer (ADR-60):
after the restart the source holds every origin message exactly once and the origin is empty (both servers).

The origin drops a message only when the source's flow-control answer says it was stored, so what was delivered
but not yet stored when the server died is delivered again after the restart (the consumer is reset to its ack
floor), and what was stored is skipped by origin sequence.
"""
from __future__ import annotations

import asyncio
import json
import time

import nats

N = 2000


async def _api(nc, subject: str, body: dict | bytes = b"") -> dict:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def _state(nc, name: str) -> dict:
    return (await _api(nc, f"$JS.API.STREAM.INFO.{name}"))["state"]


async def test_kill9_during_durable_sourcing_loses_and_duplicates_nothing(server_factory):
    server = server_factory()
    nc = await nats.connect(server.url)
    r = await _api(nc, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "retention": "workqueue"})
    assert "error" not in r, r
    r = await _api(nc, "$JS.API.CONSUMER.CREATE.O.W", {"stream_name": "O", "config": {
        "durable_name": "W", "deliver_subject": "dw", "ack_policy": "flow_control", "max_ack_pending": 100}})
    assert "error" not in r, r
    r = await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "sources": [
        {"name": "O", "consumer": {"name": "W", "deliver_subject": "dw"}}]})
    assert "error" not in r, r
    acked = 0
    killed = asyncio.Event()

    async def publish(conn, n: int, prefix: bytes) -> None:
        nonlocal acked
        for start in range(0, n, 100):
            futs = [asyncio.ensure_future(conn.request(f"o.{i % 5}", prefix + b"%d" % i, timeout=10))
                    for i in range(start, min(start + 100, n))]
            for f in futs:
                try:
                    json.loads((await f).data)
                except Exception:
                    return  # the kill
                acked += 1
            if killed.is_set():
                return

    pub_nc = await nats.connect(server.url, allow_reconnect=False)
    task = asyncio.ensure_future(publish(pub_nc, N, b"m"))
    deadline = time.monotonic() + 20
    before = None
    while time.monotonic() < deadline:
        s = await _state(nc, "S")
        if s["messages"] > 0 and acked >= N // 3:
            before = (acked, s["messages"])
            break
        await asyncio.sleep(0.005)
    assert before is not None
    server.kill()
    killed.set()
    await asyncio.gather(task, return_exceptions=True)
    for c in (nc, pub_nc):
        try:
            await c.close()
        except Exception:
            pass
    server.start()
    nc = await nats.connect(server.url)
    acked_before = acked
    acked = 0
    await publish(nc, 100, b"after")
    deadline = time.monotonic() + 40
    while True:
        o, s = await _state(nc, "O"), await _state(nc, "S")
        if o["messages"] == 0 and s["messages"] >= o["last_seq"] >= acked_before + 100:
            break
        assert time.monotonic() < deadline, (before, acked_before, o, s)
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # nothing more comes in (no duplicates arriving late)
    o, s = await _state(nc, "O"), await _state(nc, "S")
    total = o["last_seq"]
    assert o["messages"] == 0 and s["messages"] == total, (before, o, s)
    seen = []
    sub = await nc.subscribe("chk.s")
    r = await _api(nc, "$JS.API.CONSUMER.CREATE.S", {"stream_name": "S", "config": {
        "deliver_subject": "chk.s", "ack_policy": "none", "headers_only": True}})
    assert "error" not in r, r
    while len(seen) < total:
        msg = await sub.next_msg(timeout=5)
        seen.append(int(msg.headers["Nats-Stream-Source"].split(" ")[1]))
    assert sorted(seen) == list(range(1, total + 1))
    await nc.close()
