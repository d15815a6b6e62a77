"""kill -9 while a mirror and a source are copying: after the restart both catch up with no message lost or
duplicated (both servers).

A publisher keeps the origin busy; the server is SIGKILLed once the copies are under way (some copied, some not).
After the restart the mirror must equal the origin sequence for sequence, and the source must hold every origin
sequence exactly once (its Nats-Stream-Source headers), resumed from what it had stored before the kill.
"""
from __future__ import annotations

import asyncio
import base64
import time

import nats

from .kill9_support import Publisher, api, kill_and_restart, sourced_origin_seqs, state

N = 3000


async def test_kill9_during_sourcing_loses_and_duplicates_nothing(server_factory):
    server = server_factory()
    nc = await nats.connect(server.url)
    for body in ({"name": "O", "subjects": ["o.>"]}, {"name": "M", "mirror": {"name": "O"}},
                 {"name": "S", "sources": [{"name": "O"}]}):
        r = await api(nc, f"$JS.API.STREAM.CREATE.{body['name']}", body)
        assert "error" not in r, r
    pub = Publisher(7)
    pub_nc = await nats.connect(server.url, allow_reconnect=False)
    task = asyncio.ensure_future(pub.publish(pub_nc, N, b"m"))
    # Kill while the origin is being written and the copies are under way.
    deadline = time.monotonic() + 20
    states = None
    while time.monotonic() < deadline:
        m, s = await state(nc, "M"), await state(nc, "S")
        if m["messages"] > 0 and s["messages"] > 0 and pub.acked >= N // 3:
            states = (pub.acked, m["messages"], s["messages"])
            break
        await asyncio.sleep(0.005)
    assert states is not None
    nc = await kill_and_restart(server, pub, task, nc, pub_nc)
    o = await state(nc, "O")
    n = o["messages"]
    assert n >= pub.acked and o["last_seq"] == n  # every acknowledged origin message survived
    pub.acked = 0
    await pub.publish(nc, 100, b"after")  # more after the restart
    total = n + 100
    deadline = time.monotonic() + 30
    while True:
        m, s = await state(nc, "M"), await state(nc, "S")
        if m["last_seq"] == total and s["messages"] >= total:
            break
        assert time.monotonic() < deadline, (states, n, m, s)
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # nothing more comes in (no duplicates arriving late)
    m, s = await state(nc, "M"), await state(nc, "S")
    assert m["messages"] == total and m["first_seq"] == 1 and m["last_seq"] == total
    assert s["messages"] == total, (states, n, s)
    # Every origin sequence exactly once in the source, and the mirror holds the origin's own messages.
    assert sorted(await sourced_origin_seqs(nc, "S", total)) == list(range(1, total + 1))
    for seq in (1, states[1], n, total):
        a = (await api(nc, "$JS.API.STREAM.MSG.GET.O", {"seq": seq}))["message"]
        b = (await api(nc, "$JS.API.STREAM.MSG.GET.M", {"seq": seq}))["message"]
        assert a == b
    assert base64.b64decode(a["data"]) == b"after99"
    await nc.close()
