"""``python -m bench.lab.canary PORT FILE``: the innocent client.

Every 2 ms it publishes a tiny message to a subject only it subscribes to and waits for it to come back,
then appends ``<wall time sent> <latency s>`` to FILE (flushed per line, so the orchestrator can read it while it
runs).  A probe waits up to 30 s; one that never returns is written as a 30 s latency.  It runs until killed.
"""
from __future__ import annotations

import asyncio
import os
import sys
import time

from bench.lab.wire import Conn


async def main(port: int, path: str) -> None:
    c = await Conn.connect(port, name="canary")
    subject = "lab.canary." + os.urandom(6).hex()
    sub = c.sub(subject)
    await c.flush()
    with open(path, "a", buffering=1) as out:
        while not c.closed.is_set():
            t = time.time()
            t0 = time.perf_counter()
            c.pub(subject, b"x")
            try:
                await asyncio.wait_for(sub.queue.get(), 30)
                lat = time.perf_counter() - t0
            except asyncio.TimeoutError:
                lat = 30.0
            out.write(f"{t:.6f} {lat:.6f}\n")
            await asyncio.sleep(0.002)


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
