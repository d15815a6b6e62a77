"""Protocol fuzzer with a canary: mutated client protocol from many connections at once while an innocent client
(the canary process) measures its round trip.

A case is 1-6 valid operations (CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG), mutated: bytes flipped, inserted,
deleted or repeated, sizes replaced by extremes, CRLF replaced by LF, a subject made huge, or plain garbage.  Each
of 16 workers opens a connection, sends a case split at random points, reads until the server closes or 0.2 s
pass, and starts over.  The first cases are also replayed one connection at a time and the server's answer
(``-ERR`` / ``+OK`` / ``PONG`` lines and whether it closed the connection) compared between the servers.
Reported: cases sent, tracebacks in the server log, whether the server survived, canary p50 / p99 / max.
"""
from __future__ import annotations

import asyncio
import json
import random
import time

from bench.lab.common import Budget, Canary, Result, first_traceback, lab_server, tracebacks

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'
OPS = [b"PUB a.b 5\r\nhello\r\n", b"PUB a.b r.1 0\r\n\r\n", b"HPUB a.b 12 17\r\nNATS/1.0\r\n\r\nhello\r\n",
       b"SUB a.* 1\r\n", b"SUB a.> q 2\r\n", b"UNSUB 1\r\n", b"UNSUB 2 5\r\n", b"PING\r\n", b"PONG\r\n",
       b'CONNECT {"verbose":true,"pedantic":true}\r\n', b"PUB $JS.API.INFO r.2 0\r\n\r\n",
       b"HPUB a.c 22 22\r\nNATS/1.0\r\nA: b\r\n\r\n\r\n"]
EXTREMES = [b"-1", b"0", b"99999999999", b"18446744073709551616", b"1048577", b"x", b""]


def make_case(rng: random.Random) -> bytes:
    data = bytearray(CONNECT if rng.random() < 0.8 else b"")
    for _ in range(rng.randint(1, 6)):
        data += rng.choice(OPS)
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if not data:
            break
        i = rng.randrange(len(data))
        if r < 0.25:
            data[i] ^= 1 << rng.randrange(8)
        elif r < 0.4:
            data[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8)))
        elif r < 0.5:
            del data[i:i + rng.randint(1, 10)]
        elif r < 0.6:
            j = min(len(data), i + rng.randint(1, 20))
            data[i:i] = data[i:j] * rng.randint(2, 50)
        elif r < 0.75:
            digits = [k for k in range(len(data)) if 48 <= data[k] <= 57]
            if digits:
                k = rng.choice(digits)
                data[k:k + 1] = rng.choice(EXTREMES)
        elif r < 0.82:
            data = bytearray(bytes(data).replace(b"\r\n", b"\n"))
        elif r < 0.88:
            data = bytearray(bytes(data).replace(b"a.b", b"a." * rng.randint(100, 5000) + b"b", 1))
        else:
            data = bytearray(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
    return bytes(data)


async def send_case(port: int, case: bytes, rng: random.Random, wait: float = 0.2) -> tuple[list[str], bool]:
    """(server answer lines that are -ERR / +OK / PONG, closed by the server)."""
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, asyncio.TimeoutError):
        return ["connect failed"], True
    lines: list[str] = []
    closed = False
    try:
        await asyncio.wait_for(r.readline(), 5)  # INFO
        pos = 0
        while pos < len(case):
            if w.transport.is_closing():  # the server closed on an earlier part
                closed = True
                break
            step = rng.randint(1, max(1, len(case) - pos))
            w.write(case[pos:pos + step])
            pos += step
            if rng.random() < 0.3:
                await w.drain()
        await w.drain()
        deadline = time.monotonic() + wait
        buf = b""
        while time.monotonic() < deadline:
            try:
                chunk = await asyncio.wait_for(r.read(65536), max(0.01, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                break
            if not chunk:
                closed = True
                break
            buf += chunk
        for line in buf.split(b"\r\n"):
            if line.startswith((b"-ERR", b"+OK", b"PONG")):
                lines.append(line.decode(errors="replace"))
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
        closed = True
    finally:
        w.close()
    return lines, closed


async def hammer(port: int, seconds: float, seed: int, workers: int = 16) -> int:
    sent = 0
    deadline = time.monotonic() + seconds

    async def worker(k: int) -> None:
        nonlocal sent
        rng = random.Random(seed * 1000 + k)
        while time.monotonic() < deadline:
            await send_case(port, make_case(rng), rng, wait=0.05)
            sent += 1

    await asyncio.gather(*(worker(k) for k in range(workers)))
    return sent


async def differential(port: int, n: int, seed: int) -> list[tuple[list[str], bool]]:
    rng = random.Random(seed)
    todo = [make_case(rng) for _ in range(n)]
    sem = asyncio.Semaphore(16)

    async def one(i: int, case: bytes):
        async with sem:
            # no random splits here: the same bytes in one write on both servers
            return await send_case(port, case, random.Random(i), wait=0.3)

    return await asyncio.gather(*(one(i, c) for i, c in enumerate(todo))), todo


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    per = budget.left() / len(kinds)
    n_diff = 30 if a.smoke else 100 if a.quick else 600
    answers: dict[str, list] = {}
    cases_ = []
    for kind in kinds:
        srv = lab_server(kind, jetstream=True)
        canary = None
        try:
            srv.start()
            canary = Canary(srv)
            t0 = time.time()
            sent = await hammer(srv.port, max(1.0, per * 0.6), a.seed)
            t1 = time.time()
            st = Canary.stats(canary.samples(t0, t1), t0, t1)
            res.row("fuzz cases sent (16 connections)", kind, sent)
            res.row("canary probes", kind, st["probes"])
            res.row("canary p50 ms", kind, st["p50_ms"])
            res.row("canary p99 ms", kind, st["p99_ms"])
            res.row("canary max ms", kind, st["max_ms"])
            found, cases_ = await differential(srv.port, n_diff, a.seed + 1)
            answers[kind] = found
            res.row("server alive after", kind, srv.proc.poll() is None)
            res.row("tracebacks in log", kind, tracebacks(srv))
            if tracebacks(srv):
                res.details.setdefault("traceback", {})[kind] = first_traceback(srv)
        finally:
            if canary:
                canary.stop()
            srv.cleanup()
    if len(answers) == 2:
        # A server that closes right after its -ERR while unread input is still queued sends a TCP reset, and
        # the reset can discard the -ERR before the client reads it (both servers do this): so a missing -ERR
        # on one side is counted apart from a different close decision or a different -ERR text.
        same = lost = 0
        diffs = []
        for case, x, y in zip(cases_, answers["skiff"], answers["nats-server"]):
            if x == y:
                same += 1
                continue
            ex = [e for e in x[0] if e.startswith("-ERR")][:1]
            ey = [e for e in y[0] if e.startswith("-ERR")][:1]
            if x[1] == y[1] and x[1] and (not ex or not ey or ex == ey):
                lost += 1
                continue
            what = "close decision" if x[1] != y[1] else "-ERR text"
            diffs.append({"differs_in": what, "case": case[:200].decode(errors="replace"), "skiff": x,
                          "nats-server": y})
        res.row(f"single cases (of {len(cases_)}): identical", "skiff", same)
        res.row("single cases: both closed, one -ERR lost to the reset", "skiff", lost)
        res.row("single cases: close decision differs", "skiff",
                sum(1 for d in diffs if d["differs_in"] == "close decision"))
        res.row("single cases: -ERR text differs", "skiff", sum(1 for d in diffs if d["differs_in"] == "-ERR text"))
        res.details["differences"] = diffs[:60]
        for d in diffs[:6]:
            res.note("differs: " + json.dumps(d)[:300])
