"""Consumers at scale: 10,000 durable consumers on one stream, Skiff and nats-server side by side.

    python bench/consumers_scale.py                    10,000 consumers, 20,000 publishes per rate phase
    python bench/consumers_scale.py --quick            1,000 consumers, 5,000 publishes
    python bench/consumers_scale.py --targets skiff --consumers 5000 --json out.json

For each target (a fresh server process with a file store):

    create       two file streams, SCALE and BASE; create C durable pull consumers (explicit ack) on SCALE,
                 64 requests in flight: seconds, creates/s
    memory       server RSS growth over the creation, per consumer (KiB)
    publish      N messages to each stream with a window of outstanding PubAcks, in alternating rounds
                 (BASE, SCALE, BASE, ...) so that the load of the machine hits both alike: the median msgs/s
                 of each and their ratio - idle consumers (no pull request waiting) must not slow publishing
    delivery     one more pull consumer on SCALE fetches everything: msgs/s (the consumers still work)

Issue 4's requirement: 10,000 durables creatable, little memory each, idle ones do not slow publishing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import nats  # noqa: E402

from bench.servers import BenchServer  # noqa: E402

WINDOW = 512  # publishes in flight
CREATE_WINDOW = 64
ROUNDS = 6


async def publish_rate(nc, subject: str, n: int, payload: bytes) -> float:
    inbox = nc.new_inbox()
    done = asyncio.Event()
    state = {"acked": 0, "errors": 0}
    sem = asyncio.Semaphore(WINDOW)

    async def on_ack(msg):
        state["acked"] += 1
        if b'"error"' in msg.data:
            state["errors"] += 1
        sem.release()
        if state["acked"] == n:
            done.set()

    sub = await nc.subscribe(inbox, cb=on_ack)
    t0 = time.perf_counter()
    for _ in range(n):
        await sem.acquire()
        await nc.publish(subject, payload, reply=inbox)
    await asyncio.wait_for(done.wait(), 120)
    dt = time.perf_counter() - t0
    await sub.unsubscribe()
    if state["errors"]:
        raise RuntimeError(f"{state['errors']} publishes failed")
    return n / dt


async def create_consumers(nc, stream: str, count: int) -> float:
    sem = asyncio.Semaphore(CREATE_WINDOW)
    failures = []

    async def one(i: int) -> None:
        async with sem:
            name = f"c{i:05d}"
            body = json.dumps({"stream_name": stream, "config": {"durable_name": name, "ack_policy": "explicit"}})
            r = await nc.request(f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body.encode(), timeout=30)
            if b'"error"' in r.data:
                failures.append(r.data)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    dt = time.perf_counter() - t0
    if failures:
        raise RuntimeError(f"{len(failures)} creates failed, first: {failures[0][:200]!r}")
    return dt


async def fetch_rate(nc, stream: str, n: int) -> float:
    from nats.js.api import AckPolicy, ConsumerConfig

    js = nc.jetstream()
    psub = await js.pull_subscribe(f"{stream}.>", durable="reader", config=ConsumerConfig(ack_policy=AckPolicy.ALL))
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = await psub.fetch(min(256, n - got), timeout=10)
        got += len(msgs)
        await msgs[-1].ack()  # ack all: one ack per batch keeps max_ack_pending from stopping the reader
    return n / (time.perf_counter() - t0)


async def run_target(kind: str, consumers: int, n: int, size: int) -> dict:
    srv = BenchServer(kind)
    if not srv.start():
        return {"target": kind, "error": srv.error}
    out: dict = {"target": kind, "consumers": consumers, "msgs": n, "size": size}
    try:
        nc = await nats.connect(srv.url, pending_size=1 << 26)
        for stream in ("SCALE", "BASE"):
            r = await nc.request(f"$JS.API.STREAM.CREATE.{stream}",
                                 json.dumps({"name": stream, "subjects": [f"{stream}.>"],
                                             # nats-server 2.15 allows 1000 consumers per stream unless told more
                                             "max_consumers": consumers + 10}).encode(), timeout=10)
            assert b'"error"' not in r.data, r.data
        payload = b"x" * size
        await publish_rate(nc, "BASE.warm", 1000, payload)
        await publish_rate(nc, "SCALE.warm", 1000, payload)
        await asyncio.sleep(0.5)
        rss0 = srv.rss_kib() or 0
        dt = await create_consumers(nc, "SCALE", consumers)
        out["create_seconds"] = dt
        out["creates_per_s"] = consumers / dt
        await asyncio.sleep(1.0)
        rss1 = srv.rss_kib() or 0
        out["rss_before_kib"], out["rss_after_kib"] = rss0, rss1
        out["kib_per_consumer"] = (rss1 - rss0) / consumers if consumers else 0.0
        base, idle = [], []
        per_round = max(n // ROUNDS, 500)
        for _ in range(ROUNDS):
            base.append(await publish_rate(nc, "BASE.a", per_round, payload))
            idle.append(await publish_rate(nc, "SCALE.a", per_round, payload))
        out["baseline_msgs_per_s"] = statistics.median(base)
        out["idle_msgs_per_s"] = statistics.median(idle)
        out["idle_vs_baseline"] = out["idle_msgs_per_s"] / out["baseline_msgs_per_s"]
        out["rounds"] = {"base": base, "idle": idle}
        r = await nc.request("$JS.API.STREAM.INFO.SCALE", b"", timeout=10)
        out["consumer_count"] = json.loads(r.data)["state"]["consumer_count"]
        out["fetch_msgs_per_s"] = await fetch_rate(nc, "SCALE", per_round * ROUNDS + 1000)
        await nc.close()
    except Exception as e:  # noqa: BLE001 - report and move on to the next target
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        srv.stop()
        srv.cleanup()
    return out


def report(results: list[dict]) -> str:
    lines = []
    rows = [
        ("consumers created", "consumers", "{:,}"),
        ("create time (s)", "create_seconds", "{:.2f}"),
        ("creates/s", "creates_per_s", "{:,.0f}"),
        ("RSS per consumer (KiB)", "kib_per_consumer", "{:.2f}"),
        ("publish, no consumers (msg/s)", "baseline_msgs_per_s", "{:,.0f}"),
        ("publish, consumers idle (msg/s)", "idle_msgs_per_s", "{:,.0f}"),
        ("idle / no consumers", "idle_vs_baseline", "{:.2f}"),
        ("fetch (msg/s)", "fetch_msgs_per_s", "{:,.0f}"),
    ]
    head = f"{'':34}" + "".join(f"{r['target']:>16}" for r in results)
    lines.append(head)
    for label, key, fmt in rows:
        cells = []
        for r in results:
            v = r.get(key)
            cells.append(f"{(fmt.format(v) if v is not None else '-'):>16}")
        lines.append(f"{label:34}" + "".join(cells))
    for r in results:
        if r.get("error"):
            lines.append(f"{r['target']}: ERROR {r['error']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="skiff,nats-server")
    ap.add_argument("--consumers", type=int, default=10_000)
    ap.add_argument("--msgs", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.quick:
        a.consumers, a.msgs = 1000, 5000
    results = [asyncio.run(run_target(t.strip(), a.consumers, a.msgs, a.size)) for t in a.targets.split(",") if t]
    print(report(results))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
