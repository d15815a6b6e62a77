"""Admin-operation stalls: while one client does heavy administration, how long does another client wait?

Theory of operation ("longest event-loop stall during admin operations"): a probe process
(``python -m bench.lab.canary --rr --every 0.01``, its own two connections) does a request/reply every 10 ms
through the server for the whole workload.  The operations run from the C load generator one after the other:

* create ``consumers`` durable pull consumers on one stream (10,000 in a full run), 4 threads;
* delete a stream holding ``min(1000, consumers)`` consumers;
* purge a stream of ``restart_msgs`` messages (1,000,000 in a full run).

For each operation the figure is the longest time the probe waited from the start of the operation to 0.3 s
after its end: the slowest request/reply answered in that window, or the time since the last answer if a
request was still in flight at the end of it, less the 10 ms the probe idles between requests.  nats-server
serves each client from its own goroutine; Skiff is one event loop, so admin work must be sliced to keep
this low (target <= 50 ms, an absolute bound rather than a ratio).
"""
from __future__ import annotations

import subprocess
import time

from bench import commands
from bench.lab.common import Canary
from bench.scale import ScaleError
from bench.servers import BenchServer
from bench.workloads import Context, Row, Target, Workload

EVERY = 0.01  # the probe's pause between requests (s)
AFTER = 0.3  # how long after an operation its effects are still counted (s)


def _run(argv: list[str], timeout: float) -> dict:
    out = commands.run(argv, timeout)
    if not out.ok:
        raise ScaleError(out.error)
    return out.result


def longest_wait_ms(samples: list[tuple[float, float]], since: float, until: float) -> float:
    """The probe's longest wait in [since, until] (ms).  ``samples`` are (wall time sent, latency s) of every
    probe; a probe sent before ``since`` but answered after it counts too (it was waiting through the start)."""
    worst = 0.0
    for sent, lat in samples:
        if sent + lat >= since and sent <= until:
            worst = max(worst, lat)
    answered = [sent + lat for sent, lat in samples if sent <= until]
    if answered:  # a request still in flight at `until`: it has waited at least since the last answer + pause
        worst = max(worst, until - max(answered) - EVERY)
    return round(worst * 1000, 1)


def admin_stalls(ctx: Context, server: BenchServer) -> dict:
    n_create, n_delete, n_purge = ctx.consumers, min(1000, ctx.consumers), ctx.restart_msgs
    limit = 3 * ctx.slack + n_create / 10 + n_purge / 2000
    out = {"consumers": n_create, "delete_consumers": n_delete, "purge_msgs": n_purge}
    canary = Canary(server, rr=True, every=EVERY)
    try:
        def timed(key: str, argv: list[str]) -> None:
            t0 = time.time()
            _run(argv, limit)
            t1 = time.time() + AFTER
            time.sleep(AFTER)
            out[key] = longest_wait_ms(canary.samples(t0 - 1.0), t0, t1)
            out[key.replace("_ms", "_s")] = round(t1 - AFTER - t0, 3)

        _run(ctx.c("js", "create", server, "--stream", "STALLC", "--count", n_create), limit)
        timed("create_ms", ctx.c("js", "consumers", server, "--stream", "STALLC", "--count", n_create,
                                 "--threads", 4, "--timeout", limit))
        _run(ctx.c("js", "delete", server, "--stream", "STALLC", "--timeout", limit), limit)

        _run(ctx.c("js", "create", server, "--stream", "STALLD", "--count", n_delete), limit)
        _run(ctx.c("js", "consumers", server, "--stream", "STALLD", "--count", n_delete, "--threads", 4,
                   "--timeout", limit), limit)
        time.sleep(AFTER)
        timed("delete_ms", ctx.c("js", "delete", server, "--stream", "STALLD", "--timeout", limit))

        _run(ctx.c("js", "create", server, "--stream", "STALLP"), limit)
        _run(ctx.c("js", "apub", server, "--stream", "STALLP", "--count", n_purge, "--window", 1000,
                   "--timeout", limit), limit)
        time.sleep(AFTER)
        timed("purge_ms", ctx.c("js", "purge", server, "--stream", "STALLP", "--timeout", limit))
        _run(ctx.c("js", "delete", server, "--stream", "STALLP", "--timeout", limit), limit)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        if isinstance(e, ScaleError):
            raise
        raise ScaleError(f"probe: {e}") from e
    finally:
        canary.stop()
    return out


def admin_stall_workloads() -> list[Workload]:
    bound = Target("<=", 50.0, unit="ms")
    return [
        Workload("scale.admin_stalls", "scale", "longest wait of a request/reply probe (every 10 ms) while another "
                 "client creates many consumers, deletes a stream with 1,000 consumers, purges a big stream",
                 (Row("probe's longest wait: create {consumers} consumers", "create_ms", "ms", False, bound),
                  Row("probe's longest wait: delete a stream with its consumers (up to 1k)", "delete_ms", "ms", False, bound),
                  Row("probe's longest wait: purge {restart_msgs} msgs", "purge_ms", "ms", False, bound)),
                 procedure=admin_stalls, single_run=True, fresh=True),
    ]
