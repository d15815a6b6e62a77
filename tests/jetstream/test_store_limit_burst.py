"""The server's store limit (``max_file_store``) holds under a burst of publishes: every one past the limit gets 10023
"insufficient resources", and the stream never holds more than the limit plus the message that crossed it
(nats-server checks what is already used and accounts each message as it is stored: jetStream.limitsExceeded).
A burst faster than Skiff's periodic usage refresh used to run past the limit (found filling a real disk,
tests/testing/test_full_disk.py)."""
from __future__ import annotations

import asyncio
import json

import nats

LIMIT = 64 * 1024
SIZE = 8 * 1024


async def test_a_burst_stops_at_the_store_limit(server_factory):
    server = server_factory(config=f"jetstream {{ max_file_store: {LIMIT} }}\n")
    nc = await nats.connect(server.url)
    try:
        r = json.loads((await nc.request("$JS.API.STREAM.CREATE.B", json.dumps(
            {"name": "B", "subjects": ["b.>"]}).encode(), timeout=3)).data)
        assert "error" not in r, r
        # 20 publishes in flight at once: all are decided before a 50 ms refresh could come.
        replies = await asyncio.gather(*(nc.request("b.x", b"x" * SIZE, timeout=5) for _ in range(20)))
        acks = [json.loads(m.data) for m in replies]
        stored = [a for a in acks if "error" not in a]
        refused = [a["error"] for a in acks if "error" in a]
        assert refused and all((e["code"], e["err_code"]) == (503, 10023) for e in refused), refused
        assert [a["seq"] for a in stored] == list(range(1, len(stored) + 1))
        state = json.loads((await nc.request("$JS.API.STREAM.INFO.B", b"", timeout=3)).data)["state"]
        assert state["messages"] == len(stored)
        assert state["bytes"] <= LIMIT + SIZE + 100, state  # the one that crossed the limit, no more
    finally:
        await nc.close()
