"""Single-client stall probes: one client sends one heavy (legal) request; does another client stall?

For every probe a fresh server and the canary (a separate process round-tripping a message every 2 ms) run;
the canary's worst latency while the probe runs (from just before the request to 0.3 s after its answer) is
the figure, beside the probe's own duration.  nats-server runs every client in its own goroutine, so one
client's heavy request costs the others little; a single-threaded server must cut such work into slices.

Probes (full size; ``--quick`` divides them):
* ``STREAM.CREATE`` with 5,000 subjects;
* wildcard churn: 20,000 ``SUB w.<i>.*.>`` then their ``UNSUB`` in one write;
* slow subscribers: 200 connections subscribe to ``flood.>`` and never read while one publisher floods
  1 KiB messages for 2 s;
* ``STREAM.DELETE`` of a stream with 1,000 consumers;
* ``STREAM.PURGE`` of 1,000,000 messages.
"""
from __future__ import annotations

import asyncio
import json
import socket
import time

from bench.lab.common import Budget, Canary, Result, lab_server, tracebacks
from bench.lab.jsutil import fill
from bench.lab.wire import Conn, js_api


async def p_subjects(srv, c: Conn, size: dict) -> str:
    n = size["subjects"]
    body = {"name": "MANY", "subjects": [f"st.{i}.>" for i in range(n)], "storage": "file"}
    t0 = time.time()
    r = await js_api(c, "STREAM.CREATE.MANY", body, timeout=120)
    return t0, ("ok" if r and "error" not in r else f"{(r or {}).get('error', 'no reply')}")


async def p_churn(srv, c: Conn, size: dict):
    n = size["churn"]
    w = await Conn.connect(srv.port, name="churn")
    buf = b"".join(b"SUB w.%d.*.> %d\r\n" % (i, i + 1) for i in range(n))
    buf += b"".join(b"UNSUB %d\r\n" % (i + 1) for i in range(n))
    t0 = time.time()
    w.write(buf)
    ok = await w.flush(120)
    await w.close()
    return t0, "ok" if ok else "no PONG"


async def p_slow(srv, c: Conn, size: dict):
    socks = []
    for _ in range(size["slow"]):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port))
        s.recv(4096)
        s.sendall(b'CONNECT {"verbose":false}\r\nSUB flood.> 1\r\nPING\r\n')
        socks.append(s)
    await asyncio.sleep(0.3)
    pub = await Conn.connect(srv.port, name="flood")
    msg = b"PUB flood.x 1024\r\n" + b"f" * 1024 + b"\r\n"
    t0 = time.time()
    end = time.monotonic() + size["flood_s"]
    while time.monotonic() < end and not pub.closed.is_set():
        pub.write(msg * 64)
        await pub.drain()
    ok = await pub.flush(30)
    await pub.close()
    for s in socks:
        s.close()
    return t0, "ok" if ok else "publisher got no PONG"


async def p_delete(srv, c: Conn, size: dict):
    n = size["consumers"]
    await js_api(c, "STREAM.CREATE.DEL", {"name": "DEL", "subjects": ["del.>"], "storage": "file"})
    await fill(c, "del.x", 1000)
    sem = asyncio.Semaphore(64)

    async def mk(i: int) -> None:
        async with sem:
            await js_api(c, f"CONSUMER.DURABLE.CREATE.DEL.C{i}", {"stream_name": "DEL", "config": {
                "durable_name": f"C{i}", "ack_policy": "explicit"}}, timeout=30)

    await asyncio.gather(*(mk(i) for i in range(n)))
    await asyncio.sleep(0.5)
    t0 = time.time()
    r = await js_api(c, "STREAM.DELETE.DEL", timeout=120)
    return t0, "ok" if r and r.get("success") else f"{r}"[:80]


async def p_purge(srv, c: Conn, size: dict):
    n = size["purge"]
    await js_api(c, "STREAM.CREATE.PUR", {"name": "PUR", "subjects": ["pur.>"], "storage": "file"})
    acked = await fill(c, "pur.x", n, size=16, window=4096)
    await asyncio.sleep(0.5)
    t0 = time.time()
    r = await js_api(c, "STREAM.PURGE.PUR", timeout=300)
    return t0, (f"ok ({acked} msgs)" if r and r.get("success") else f"{r}"[:80])


PROBES = [("STREAM.CREATE, {subjects} subjects", p_subjects), ("wildcard SUB/UNSUB churn x{churn}", p_churn),
          ("{slow} slow subscribers + flood", p_slow), ("delete stream with {consumers} consumers", p_delete),
          ("purge {purge} messages", p_purge)]


def sizes(a) -> dict:
    q, s = a.quick, a.smoke
    return {"subjects": a.subjects or (100 if s else 500 if q else 5000), "churn": 2000 if q else 20000,
            "slow": 10 if s else 30 if q else 200, "flood_s": 0.2 if s else 0.5 if q else 2.0,
            "consumers": a.consumers or (10 if s else 50 if q else 1000),
            "purge": a.purge_msgs or (2000 if s else 10_000 if q else 1_000_000)}


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    size = sizes(a)
    for title, probe in PROBES:
        label = title.format(**size)
        for kind in kinds:
            if budget.over():
                res.row(f"{label}: canary max ms", kind, "skipped (time)")
                continue
            srv = lab_server(kind)
            canary = None
            try:
                srv.start()
                canary = Canary(srv)
                c = await Conn.connect(srv.port, name="stall-probe")
                try:
                    t0, outcome = await asyncio.wait_for(probe(srv, c, size), max(30.0, budget.left()))
                except asyncio.TimeoutError:
                    t0, outcome = time.time(), "timeout"
                t1 = time.time()
                await asyncio.sleep(0.3)
                st = Canary.stats(canary.samples(t0, t1 + 0.3), t0, t1 + 0.3)
                res.row(f"{label}: canary max ms", kind, st["max_ms"])
                res.row(f"{label}: request s", kind, round(t1 - t0, 3))
                if not outcome.startswith("ok"):
                    res.row(f"{label}: outcome", kind, outcome)
                tb = tracebacks(srv)
                if tb:
                    res.row(f"{label}: tracebacks", kind, tb)
                res.details.setdefault(label, {})[kind] = st
                await c.close()
            finally:
                if canary:
                    canary.stop()
                srv.cleanup()
    res.note("sizes: " + json.dumps(size))
