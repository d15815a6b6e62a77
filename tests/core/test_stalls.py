"""One client must never stall the others (issue #15 finding 8), against both servers.

A canary does request/reply every 10 ms through the server while a bad client, in its own process (so that it
cannot slow the canary's own event loop), does one expensive thing.  The largest gap between two canary replies
is the stall the others saw.  The bound is 50 ms on an idle machine; with the test suite sharing two cores with
other work a margin is allowed (see MAX_LATENCY), still far below what the bugs gave (5.3 s for a 5,000-subject
STREAM.CREATE, 11.9 s for 4,000 wildcard SUB/UNSUB pairs).  Figures measured on the development machine, canary
max gap:

===========================================  ==============  ========================
attack                                       nats-server     Skiff (before -> after)
===========================================  ==============  ========================
STREAM.CREATE with 5,000 subjects            16 ms           5,356 ms -> 45-140 ms
20,000 wildcard SUB/UNSUB pairs, one write   20-35 ms        11,864 ms (4,000) -> 28-45 ms
close of a connection with 100,000 subs      35-300 ms       253 ms -> 20-48 ms
===========================================  ==============  ========================

Run as a script, this file is the bad client: ``python test_stalls.py <port> <attack> <n>``.
"""
from __future__ import annotations

import asyncio
import json
import socket
import sys
import time

import nats
import pytest

# The bound is 50 ms; the margins are for a CI machine where the canary process itself may not be scheduled for a
# while (at load average 4 on two cores nats-server's own figures reach 140-300 ms).  The request latency is the
# part of a gap the server caused, so it gets the tighter bound.
MAX_LATENCY = 0.150
MAX_GAP = 0.300


def bad_client(port: int, attack: str, n: int) -> None:
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    f.readline()  # INFO
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
    if attack == "churn":
        # Wildcard subscriptions, each removed right away: every one used to walk the whole match cache.
        s.sendall(b"".join(b"SUB churn.%d.* %d\r\nUNSUB %d\r\n" % (i, i, i) for i in range(n)))
    elif attack == "stream":
        body = json.dumps({"name": "BIG", "subjects": [f"big.{i}" for i in range(n)], "storage": "memory"}).encode()
        s.sendall(b"SUB _bad.reply 1\r\nPUB $JS.API.STREAM.CREATE.BIG _bad.reply %d\r\n%s\r\n" % (len(body), body))
        while not f.readline().startswith(b"MSG"):
            pass
        reply = f.readline()
        assert b'"error"' not in reply, reply[:300]
    elif attack == "close":
        # Many subscriptions, then the connection closes: they all leave the subject index.
        s.sendall(b"".join(b"SUB many.%d %d\r\n" % (i, i) for i in range(n)) + b"PING\r\n")
        while f.readline() not in (b"PONG\r\n", b""):
            pass
        time.sleep(0.3)
        s.close()
        time.sleep(0.5)
        return
    else:
        raise ValueError(attack)
    s.sendall(b"PING\r\n")
    while f.readline() not in (b"PONG\r\n", b""):
        pass
    s.close()


async def canary_gaps(url: str, port: int, attack: str, n: int) -> tuple[list[float], list[float]]:
    """Gaps between canary replies, and request latencies, while the bad client runs (from its start to its
    exit)."""
    responder = await nats.connect(url)
    requester = await nats.connect(url)

    async def echo(m):
        await m.respond(m.data)

    await responder.subscribe("canary.svc", cb=echo)
    await responder.flush()
    # A warm match cache: the wildcard churn used to walk all of it for every SUB and UNSUB.
    for i in range(4096):
        await requester.publish(f"warm.{i}", b"")
    await requester.flush()
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, str(port), attack, str(n))
    wait = asyncio.ensure_future(proc.wait())
    gaps: list[float] = []
    latencies: list[float] = []
    last = time.perf_counter()
    try:
        while not wait.done():
            sent = time.perf_counter()
            await requester.request("canary.svc", b"ping", timeout=30)
            now = time.perf_counter()
            latencies.append(now - sent)
            gaps.append(now - last)
            last = now
            await asyncio.sleep(0.01)
        assert proc.returncode == 0
    finally:
        if not wait.done():
            proc.kill()
            await wait
        await responder.close()
        await requester.close()
    return gaps, latencies


def check(target: str, what: str, gaps: list[float], latencies: list[float]) -> None:
    gap, lat = max(gaps), max(latencies)
    print(f"{target} {what}: {len(gaps)} canary requests, max gap {gap * 1000:.1f} ms, max latency {lat * 1000:.1f} ms")
    assert lat <= MAX_LATENCY, f"canary request waited {lat * 1000:.0f} ms during {what}"
    assert gap <= MAX_GAP, f"canary stalled {gap * 1000:.0f} ms during {what}"


@pytest.mark.parametrize("attack,n", [("stream", 5000), ("churn", 20000)])
async def test_bad_client_does_not_stall_the_canary(server, target, attack, n):
    gaps, latencies = await canary_gaps(server.url, server.port, attack, n)
    check(target, f"{attack} n={n}", gaps, latencies)


@pytest.mark.skiff_only
async def test_closing_a_connection_with_many_subscriptions_does_not_stall_the_canary(server, target):
    # Skiff only: nats-server itself shows 230-300 ms gaps here (while the 100,000 SUBs arrive), so on both
    # targets this would assert something nats-server does not do.  Skiff: 253 ms before (the close removed every
    # subscription in one go), 20-48 ms after.
    gaps, latencies = await canary_gaps(server.url, server.port, "close", 100000)
    check(target, "close n=100000", gaps, latencies)


@pytest.mark.skiff_only
async def test_subscription_changes_do_not_walk_every_push_consumer(target):
    # Push consumers watch their deliver subjects; every SUB/UNSUB used to test itself against all of them
    # (0.4 ms per SUB with 1,000 push consumers: a 16 KB read of SUBs held the loop for 300 ms).
    from skiff.server.core.server import Server

    srv = Server(port=0)
    seen: list[tuple[str, bool]] = []
    for i in range(1000):
        srv.watch_interest(f"deliver.{i}", lambda subject, has: seen.append((subject, has)))
    t = time.process_time()  # this process's CPU: a loaded machine does not move it
    for i in range(5000):
        srv.unsubscribe_internal(srv.subscribe_internal(f"_INBOX.{i}", lambda *a: None))
    assert time.process_time() - t < 1.0
    assert seen == []
    # Literal and wildcard subscriptions still reach the watch they match.
    for subject in ("deliver.7", "deliver.*", ">"):
        srv.unsubscribe_internal(srv.subscribe_internal(subject, lambda *a: None))
    assert seen[:2] == [("deliver.7", True), ("deliver.7", False)]
    assert len(seen) == 2 + 2 * 1000 + 2 * 1000


if __name__ == "__main__":
    bad_client(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
