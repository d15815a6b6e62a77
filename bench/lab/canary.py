"""``python -m bench.lab.canary PORT FILE [--rr] [--every S]``: the innocent client.

Every ``S`` seconds (2 ms by default) it sends a tiny message and waits for it to come back, then appends
``<wall time sent> <latency s>`` to FILE (flushed per line, so the orchestrator can read it while it runs).
By default the message goes to a subject only it subscribes to (one connection, one hop through the server);
with ``--rr`` it is a request to a responder on a second connection of its own, and the latency is the whole
request/reply round trip (admin-stall probe: "a probe client doing request/reply every 10 ms").
A probe waits up to 30 s; one that never returns is written as a 30 s latency.  It runs until killed.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench.lab.wire import Conn


async def main(port: int, path: str, rr: bool, every: float) -> None:
    c = await Conn.connect(port, name="canary")
    subject = "lab.canary." + os.urandom(6).hex()
    if rr:
        responder = await Conn.connect(port, name="canary-responder")
        responder.sub(subject, cb=lambda m: responder.pub(m.reply, m.data))
        await responder.flush()
    else:
        sub = c.sub(subject)
    await c.flush()
    with open(path, "a", buffering=1) as out:
        while not c.closed.is_set():
            t = time.time()
            t0 = time.perf_counter()
            if rr:
                got = await c.request(subject, b"x", timeout=30) is not None
            else:
                c.pub(subject, b"x")
                try:
                    got = bool(await asyncio.wait_for(sub.queue.get(), 30))
                except asyncio.TimeoutError:
                    got = False
            lat = time.perf_counter() - t0 if got else 30.0
            out.write(f"{t:.6f} {lat:.6f}\n")
            await asyncio.sleep(every)


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    ap = argparse.ArgumentParser(prog="python -m bench.lab.canary")
    ap.add_argument("port", type=int)
    ap.add_argument("file")
    ap.add_argument("--rr", action="store_true", help="request/reply through a responder connection")
    ap.add_argument("--every", type=float, default=0.002, help="seconds between probes")
    a = ap.parse_args()
    asyncio.run(main(a.port, a.file, a.rr, a.every))
