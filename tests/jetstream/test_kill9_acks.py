"""kill -9 while consumers ack with ``ack_sync``: every confirmed ack stays acked after the restart (both servers).

Under ``sync_interval: always`` a confirmed ack (the empty reply to an ack sent as a request: nats-py ``ack_sync``,
the clients' "double ack") is a promise like a PubAck: the consumer will not hand that message out again.  Workers
pull and ``ack_sync`` on several connections; once enough acks were confirmed the server is SIGKILLed while acks
are still in flight.  After the restart everything the durable consumer still owes is pulled (a short ``ack_wait``
brings the delivered-but-unconfirmed messages back); none of them may be a message whose ack was confirmed.

nats-server 2.15.1 does not keep that promise (measured here: it redelivers confirmed acks of the last ~100 ms,
all of them when the kill comes right after the acks); on nats-server the test checks only that no message
vanished and prints the loss.
"""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

MESSAGES = 3000
WORKERS = 6
KILL_AFTER = 600
ACK_WAIT_NS = 1_000_000_000


async def _setup(server) -> None:
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    r = json.loads((await nc.request("$JS.API.STREAM.CREATE.ACKS", json.dumps(
        {"name": "ACKS", "subjects": ["acks.>"]}).encode(), timeout=3)).data)
    assert "error" not in r, r
    r = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.ACKS.W", json.dumps(
        {"stream_name": "ACKS", "config": {"durable_name": "W", "ack_policy": "explicit", "ack_wait": ACK_WAIT_NS,
                                           "max_ack_pending": 10000}}).encode(), timeout=3)).data)
    assert "error" not in r, r
    for i in range(MESSAGES):
        await js.publish(f"acks.{i % 7}", b"m%d" % i)
    await nc.close()


async def _ack_storm(server, confirmed: set[int], sent: set[int]) -> None:
    conns = [await nats.connect(server.url, allow_reconnect=False) for _ in range(WORKERS)]
    stop = asyncio.Event()

    async def worker(nc) -> None:
        js = nc.jetstream()
        psub = await js.pull_subscribe_bind("W", "ACKS")
        while not stop.is_set():
            try:
                msgs = await psub.fetch(20, timeout=1)
            except Exception:
                if stop.is_set() or nc.is_closed:
                    return
                continue
            for m in msgs:
                sent.add(m.metadata.sequence.stream)
                try:
                    await m.ack_sync(timeout=2)
                except Exception:
                    return
                confirmed.add(m.metadata.sequence.stream)

    async def killer() -> None:
        while len(confirmed) < KILL_AFTER:
            await asyncio.sleep(0.002)
        server.kill()
        stop.set()

    tasks = [asyncio.create_task(worker(nc)) for nc in conns]
    await asyncio.wait_for(killer(), 60)
    await asyncio.gather(*tasks, return_exceptions=True)
    for nc in conns:
        try:
            await nc.close()
        except Exception:
            pass


async def _drain_after_restart(server) -> list[int]:
    """Every stream sequence the consumer delivers after the restart (redeliveries and never-delivered ones)."""
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    psub = await js.pull_subscribe_bind("W", "ACKS")
    seen: list[int] = []
    idle_since = asyncio.get_running_loop().time()
    # Stop once nothing came for longer than ack_wait plus the restart's first pending check (nats-server: <= 1.5s).
    while asyncio.get_running_loop().time() - idle_since < ACK_WAIT_NS / 1e9 + 2.5:
        try:
            msgs = await psub.fetch(500, timeout=0.5)
        except Exception:
            continue
        for m in msgs:
            seen.append(m.metadata.sequence.stream)
            await m.ack()
        if msgs:
            idle_since = asyncio.get_running_loop().time()
    await nc.close()
    return seen


async def test_kill9_keeps_every_confirmed_ack(server_factory, target):
    server = server_factory(config="jetstream { sync_interval: always }\n")
    await _setup(server)
    confirmed: set[int] = set()
    sent: set[int] = set()  # acks sent, confirmed or not
    await _ack_storm(server, confirmed, sent)
    assert len(confirmed) >= KILL_AFTER

    server.start()
    seen = await _drain_after_restart(server)
    lost = sorted(set(seen) & confirmed)
    print(f"{target}: {len(lost)} of {len(confirmed)} confirmed acks lost (redelivered after kill -9)")
    # Both servers: no message vanished - each one was confirmed, is delivered again, or had its ack sent (an ack
    # stored before the kill whose confirmation the kill swallowed is an ack all the same).
    missing = set(range(1, MESSAGES + 1)) - set(seen) - confirmed
    assert missing <= sent - confirmed, sorted(missing - sent)[:10]
    if target == "nats-server":
        # Deliberate difference (docs/parity.md): nats-server 2.15.1 writes consumer state on a flusher after the
        # ack reply, so it loses the confirmed acks of the last moments before a kill -9 even with
        # sync_interval: always.  Skiff keeps the promise.
        return
    assert not lost, f"{len(lost)} of {len(confirmed)} confirmed acks lost (redelivered), e.g. {lost[:5]}"
