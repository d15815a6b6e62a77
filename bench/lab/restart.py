"""Restart after ``kill -9``: how long until a server with a ~60 MB store is back and serving it.

Each server gets a stream of 1 KiB messages (``--store-mb``, full 60 MB), is killed with SIGKILL and started
again, three times (one with ``--quick``).  Two times are measured from the exec: the client port accepting
(``ready``) and ``STREAM.INFO`` answering with every message (``serving``).  Medians are reported.
"""
from __future__ import annotations

import asyncio
import statistics
import time

from bench.lab.common import Budget, Result, lab_server, tracebacks
from bench.lab.jsutil import create_stream, fill, stream_state
from bench.lab.wire import Conn


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    mb = a.store_mb or (1 if a.smoke else 2 if a.quick else 60)
    n = int(mb * 1024 * 1024 / 1024)
    reps = 1 if a.quick else 3
    for kind in kinds:
        srv = lab_server(kind)
        try:
            srv.start()
            c = await Conn.connect(srv.port)
            await create_stream(c, "R", ["r.>"])
            t0 = time.monotonic()
            acked = await fill(c, "r.x", n, size=1024, window=1024)
            fill_s = time.monotonic() - t0
            await c.close()
            ready, serving = [], []
            for _ in range(reps):
                srv.kill()
                t0 = time.monotonic()
                srv.start(timeout=300)
                ready.append(time.monotonic() - t0)
                c = await Conn.connect(srv.port, timeout=60)
                while time.monotonic() - t0 < 300:
                    st = await stream_state(c, "R") or {}
                    if st.get("messages") == acked:
                        break
                    await asyncio.sleep(0.02)
                serving.append(time.monotonic() - t0)
                await c.close()
            res.row("store MB (1 KiB msgs)", kind, mb)
            res.row("messages", kind, acked)
            res.row("fill s", kind, round(fill_s, 1))
            res.row("restart: port ready s (median)", kind, round(statistics.median(ready), 2))
            res.row("restart: serving all msgs s (median)", kind, round(statistics.median(serving), 2))
            res.row("tracebacks", kind, tracebacks(srv))
        finally:
            srv.cleanup()
    vals = dict(res.rows).get("restart: serving all msgs s (median)", {})
    if vals.get("skiff") and vals.get("nats-server"):
        res.note(f"Skiff / nats-server restart time: {vals['skiff'] / vals['nats-server']:.1f}x (target <= 2x)")

