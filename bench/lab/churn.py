"""Connection churn memory: RSS of the server across many connect / CONNECT+PING / PONG / close cycles.

Four clients cycle concurrently; the server's VmRSS is sampled every 5 % of the cycles.  The baseline is the RSS
after the first 5 % (allocator and caches warmed up); growth is end vs baseline, after a 2 s idle.  A server
that keeps anything per closed connection grows linearly here.
"""
from __future__ import annotations

import asyncio
import time

from bench.lab.common import Budget, Result, lab_server, rss_kib, tracebacks


async def cycle(port: int) -> bool:
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        await r.readline()
        w.write(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        ok = (await r.readline()).startswith(b"PONG")
        w.close()
        await w.wait_closed()
        return ok
    except (OSError, ConnectionError):
        return False


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    n = a.cycles or (300 if a.smoke else 2000 if a.quick else 60000)
    for kind in kinds:
        kb = Budget(budget.left() / (len(kinds) - kinds.index(kind)))
        srv = lab_server(kind)
        try:
            srv.start()
            samples: list[tuple[int, int]] = [(0, rss_kib(srv) or 0)]
            done = failed = 0
            step = max(1, n // 20)
            t0 = time.monotonic()

            async def worker() -> None:
                nonlocal done, failed
                while done < n and not kb.over():
                    done += 1
                    if not await cycle(srv.port):
                        failed += 1
                    if done % step == 0:
                        samples.append((done, rss_kib(srv) or 0))

            await asyncio.gather(*(worker() for _ in range(4)))
            el = time.monotonic() - t0
            await asyncio.sleep(2)
            end = rss_kib(srv) or 0
            base = samples[1][1] if len(samples) > 1 else samples[0][1]
            res.row("cycles", kind, done)
            res.row("cycles/s", kind, round(done / el))
            res.row("failed cycles", kind, failed)
            res.row("RSS start MiB", kind, round(samples[0][1] / 1024, 1))
            res.row("RSS after 5% MiB (baseline)", kind, round(base / 1024, 1))
            res.row("RSS max MiB", kind, round(max(s for _, s in samples) / 1024, 1))
            res.row("RSS end MiB", kind, round(end / 1024, 1))
            res.row("growth end vs baseline %", kind, round(100 * (end - base) / base, 1) if base else None)
            res.row("tracebacks", kind, tracebacks(srv))
            res.details[kind] = samples
        finally:
            srv.cleanup()
