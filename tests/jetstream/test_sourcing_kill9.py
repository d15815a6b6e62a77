"""kill -9 while a mirror and a source are copying: after the restart both catch up with no message lost or
duplicated (both servers).

A publisher keeps the origin busy; the server is SIGKILLed once the copies are under way (some copied, some not).
After the restart the mirror must equal the origin sequence for sequence, and the source must hold every origin
sequence exactly once (its Nats-Stream-Source headers), resumed from what it had stored before the kill.
"""
from __future__ import annotations

import asyncio
import base64
import json
import time

import nats

N = 3000


async def _api(nc, subject: str, body: dict | bytes = b"") -> dict:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def _state(nc, name: str) -> dict:
    return (await _api(nc, f"$JS.API.STREAM.INFO.{name}"))["state"]


async def test_kill9_during_sourcing_loses_and_duplicates_nothing(server_factory):
    server = server_factory()
    nc = await nats.connect(server.url)
    for body in ({"name": "O", "subjects": ["o.>"]}, {"name": "M", "mirror": {"name": "O"}},
                 {"name": "S", "sources": [{"name": "O"}]}):
        r = await _api(nc, f"$JS.API.STREAM.CREATE.{body['name']}", body)
        assert "error" not in r, r
    acked = 0
    killed = asyncio.Event()

    async def publish(conn, n: int, prefix: bytes) -> None:
        nonlocal acked
        for start in range(0, n, 100):
            futs = [asyncio.ensure_future(conn.request(f"o.{i % 7}", prefix + b"%d" % i, timeout=10))
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
    # Kill while the origin is being written and the copies are under way.
    deadline = time.monotonic() + 20
    states = None
    while time.monotonic() < deadline:
        m, s = await _state(nc, "M"), await _state(nc, "S")
        if m["messages"] > 0 and s["messages"] > 0 and acked >= N // 3:
            states = (acked, m["messages"], s["messages"])
            break
        await asyncio.sleep(0.005)
    assert states is not None
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
    o = await _state(nc, "O")
    n = o["messages"]
    assert n >= acked and o["last_seq"] == n  # every acknowledged origin message survived
    acked = 0
    await publish(nc, 100, b"after")  # more after the restart
    total = n + 100
    deadline = time.monotonic() + 30
    while True:
        m, s = await _state(nc, "M"), await _state(nc, "S")
        if m["last_seq"] == total and s["messages"] >= total:
            break
        assert time.monotonic() < deadline, (states, n, m, s)
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # nothing more comes in (no duplicates arriving late)
    m, s = await _state(nc, "M"), await _state(nc, "S")
    assert m["messages"] == total and m["first_seq"] == 1 and m["last_seq"] == total
    assert s["messages"] == total, (states, n, s)
    # Every origin sequence exactly once in the source, and the mirror holds the origin's own messages.
    seen = []
    sub = await nc.subscribe("chk.s")
    r = await _api(nc, "$JS.API.CONSUMER.CREATE.S", {"stream_name": "S", "config": {
        "deliver_subject": "chk.s", "ack_policy": "none", "headers_only": True}})
    assert "error" not in r, r
    while len(seen) < total:
        msg = await sub.next_msg(timeout=5)
        seen.append(int(msg.headers["Nats-Stream-Source"].split(" ")[1]))
    assert sorted(seen) == list(range(1, total + 1))
    for seq in (1, states[1], n, total):
        a = (await _api(nc, "$JS.API.STREAM.MSG.GET.O", {"seq": seq}))["message"]
        b = (await _api(nc, "$JS.API.STREAM.MSG.GET.M", {"seq": seq}))["message"]
        assert a == b
    assert base64.b64decode(a["data"]) == b"after99"
    await nc.close()
