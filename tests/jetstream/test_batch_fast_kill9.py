"""kill -9 while fast batches (ADR-50 fast ingest) are written: after the restart every message the server had
acknowledged is there, on both servers.

A fast batch is stored as it comes and acknowledged twice over: a flow-control ack ``{"type":"ack","seq":N}`` says
the batch's messages up to N were processed, and the commit's reply (a PubAck with ``batch`` and ``count``) covers
the whole batch.  Skiff sends both through the same queue as PubAcks (server/jetstream/durability.py: after the
store handed the appends to the OS), including the short cut an in-order append takes (batching_fast.py
``FastBatches.append``).  Fast batches are not atomic: what was sent after the last ack may or may not be there.
"""
from __future__ import annotations

import asyncio
import json

import nats

from tests.jetstream.kill9_support import api, close_dead, create_stream, direct_get_all

PUBLISHERS = 4
BATCH = 40
FLOW = 10
KILL_AFTER = 40  # committed batches


class FastPublisher:
    """Sends batches ``p<pid>-<n>`` of BATCH messages (payload ``<batch id>/<batch seq>``) on one connection and
    records, per batch, the highest batch sequence a flow ack confirmed and the commit's reply."""

    def __init__(self, nc, pid: int) -> None:
        self.nc, self.pid = nc, pid
        self.prefix = f"_FIK{pid}"
        self.flow_acked: dict[str, int] = {}
        self.window: dict[str, int] = {}  # the highest batch sequence the server's flow acks allow out
        self.committed: dict[str, dict] = {}
        self.commits: asyncio.Queue = asyncio.Queue()
        self.acked = asyncio.Condition()

    async def start(self) -> None:
        await self.nc.subscribe(f"{self.prefix}.>", cb=self._reply)

    async def _reply(self, msg) -> None:
        bid = msg.subject[len(self.prefix) + 1:].split(".", 1)[0]
        body = json.loads(msg.data)
        if body.get("type") == "ack":
            async with self.acked:
                self.flow_acked[bid] = max(self.flow_acked.get(bid, 0), body["seq"])
                self.window[bid] = max(self.window.get(bid, 0), body["seq"] + body["msgs"])
                self.acked.notify_all()
        elif "batch" in body or "error" in body:
            await self.commits.put((bid, body))

    async def run(self, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set():
            bid = f"p{self.pid}-{n}"
            n += 1
            try:
                for i in range(1, BATCH + 1):
                    if i > 1:
                        # as a client does (ADR-50): no further than the last flow ack's seq + msgs
                        async with self.acked:
                            await asyncio.wait_for(self.acked.wait_for(lambda: self.window.get(bid, 0) >= i), 10)
                    op = 0 if i == 1 else 2 if i == BATCH else 1
                    await self.nc.publish(f"f.{self.pid}", b"%s/%d" % (bid.encode(), i),
                                          reply=f"{self.prefix}.{bid}.{FLOW}.fail.{i}.{op}.$FI")
                got, body = await asyncio.wait_for(self.commits.get(), 10)
            except Exception:
                return  # the kill
            assert got == bid and "error" not in body, (bid, got, body)
            self.committed[bid] = body

    def partly_acked(self) -> set[str]:
        """Batches a flow ack confirmed in part (beyond the opening seq 0) and no commit reply finished."""
        return {bid for bid, seq in self.flow_acked.items() if seq and bid not in self.committed}


async def test_kill9_during_fast_batches_keeps_every_acknowledged_message(server):
    await create_stream(server.url, {"name": "F", "subjects": ["f.>"], "allow_batched": True, "allow_direct": True})

    conns = [await nats.connect(server.url, allow_reconnect=False) for _ in range(PUBLISHERS)]
    pubs = [FastPublisher(nc, p) for p, nc in enumerate(conns)]
    for p in pubs:
        await p.start()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(p.run(stop)) for p in pubs]

    async def killer() -> None:
        # enough batches committed, and one of them half-way: flow-acked in part, not committed
        while sum(len(p.committed) for p in pubs) < KILL_AFTER or not any(p.partly_acked() for p in pubs):
            await asyncio.sleep(0.001)
        server.kill()
        stop.set()

    await asyncio.wait_for(killer(), 60)
    for t in tasks:
        if not t.done():
            t.cancel()  # waiting for an answer that will not come (the server is dead)
    for t in await asyncio.gather(*tasks, return_exceptions=True):
        assert not isinstance(t, AssertionError), t  # a commit refused before the kill is a failure of its own
    await close_dead(*conns)
    committed = {bid: body for p in pubs for bid, body in p.committed.items()}
    flow_acked = {bid: seq for p in pubs for bid, seq in p.flow_acked.items()}
    assert len(committed) >= KILL_AFTER
    assert any(p.partly_acked() for p in pubs), "the kill came between batches: no batch was flow-acked in part"

    server.start()
    nc = await nats.connect(server.url)
    st = (await api(nc, "$JS.API.STREAM.INFO.F"))["state"]
    stored = {int(m.headers["Nats-Sequence"]): m.data for m in await direct_get_all(nc, "F", st["last_seq"])}
    await nc.close()
    assert len(stored) == st["messages"]
    where: dict[bytes, int] = {}
    for seq, data in stored.items():
        assert data not in where, f"{data!r} stored twice (seq {where[data]} and {seq})"
        where[data] = seq
    for bid, body in committed.items():
        seqs = [where.get(b"%s/%d" % (bid.encode(), i)) for i in range(1, BATCH + 1)]
        lost = [i + 1 for i, s in enumerate(seqs) if s is None]
        assert not lost, f"committed batch {bid} lost messages {lost}"
        assert body["count"] == BATCH and seqs[-1] == body["seq"], (bid, body, seqs[-1])
    for bid, upto in flow_acked.items():
        lost = [i for i in range(1, upto + 1) if b"%s/%d" % (bid.encode(), i) not in where]
        assert not lost, f"batch {bid}: flow-acked up to {upto}, lost {lost}"
