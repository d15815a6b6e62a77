"""What a nats-py user sees: the same workloads with nats-py as the client, one JSON line of figures.

    python bench/natspy_client.py MODE --url U [--size N] [--duration S] [--count N] ...

Modes: ``pub`` (publish only), ``pubsub`` (1 publisher + 1 subscriber, two connections, the publisher at most
--window x 40 messages ahead of the subscriber), ``reqrep`` (one client, back-to-back requests, latency),
``jspub`` (JetStream publish, waiting for each ack), ``jsapub`` (publish_async, at most --window acks
outstanding), ``fetch`` (pull consumer, fetch --batch + ack each, over a prefilled stream), ``kvput`` / ``kvget``
(random keys of a bucket set up beforehand), ``fastbatch`` (one ADR-50 fast batch, flow --window, following the
server's flow-control acks), ``atomicbatch`` (atomic batches of --batch messages, the commit a request).
nats-py cannot saturate a server: these figures say what a Python application gets, and the ratio says whether
the server is what holds it back.
Run as a plain script (not a package module) so its start-up cost is the same as any nats-py program.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time

import nats
import nats.errors


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * (len(values) - 1) + 0.5))]


async def run(a: argparse.Namespace) -> dict:
    data = b"x" * a.size
    nc = await nats.connect(a.url, allow_reconnect=False, connect_timeout=10, max_reconnect_attempts=0)
    try:
        return await MODES[a.mode](nc, a, data)
    finally:
        await nc.close()


async def pub(nc, a, data):
    n, t0 = 0, time.perf_counter()
    deadline = t0 + a.duration
    while True:
        await nc.publish("bench.py.pub", data)
        n += 1
        if n % 1000 == 0 and time.perf_counter() >= deadline:
            break
    await nc.flush(timeout=60)
    el = time.perf_counter() - t0
    return {"msgs": n, "elapsed": el, "rate": n / el}


async def pubsub(nc, a, data):
    sc = await nats.connect(a.url, allow_reconnect=False, pending_size=1 << 30)
    got = 0
    last = 0.0

    async def cb(msg):
        nonlocal got, last
        got += 1
        last = time.perf_counter()

    await sc.subscribe("bench.py.ps", cb=cb, pending_msgs_limit=-1, pending_bytes_limit=-1)
    await sc.flush()
    n, t0 = 0, time.perf_counter()
    deadline = t0 + a.duration
    while True:
        await nc.publish("bench.py.ps", data)
        n += 1
        if n % 1000 == 0:
            if time.perf_counter() >= deadline:
                break
            # A nats-py subscriber is slower than a nats-py publisher: unpaced, the server's buffer for the
            # subscriber overflows and it is cut off as a slow consumer (both servers do it).  Keep the
            # publisher at most `window` messages ahead, as an application that wants every message must.
            while n - got > a.window * 40:
                await asyncio.sleep(0.001)
    await nc.flush(timeout=60)
    seen, idle_since, cap = -1, time.perf_counter(), time.perf_counter() + 10 + 2 * a.duration
    while got < n:
        t = time.perf_counter()
        if got != seen:
            seen, idle_since = got, t
        if t - idle_since > 2 or t > cap:
            break
        await asyncio.sleep(0.005)
    await sc.close()
    el = last - t0 if last else 0.0
    return {"published": n, "received": got, "lost": n - got, "elapsed": el, "rate": got / el if el else 0.0}


async def reqrep(nc, a, data):
    rc = await nats.connect(a.url, allow_reconnect=False)

    async def respond(msg):
        await msg.respond(msg.data)

    await rc.subscribe("bench.py.rr", cb=respond)
    await rc.flush()
    # nats-py 2.16's flush() writes its PING ahead of the queued SUB (tests/natspy_flush.py), so nats-server may
    # answer the first request with no responders (seen in a CI run's smoke test): wait until the responder is known.
    for _ in range(500):
        try:
            await nc.request("bench.py.rr", data, timeout=5)
            break
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.01)
    for _ in range(20):  # warm-up: the first request sets up the response inbox
        await nc.request("bench.py.rr", data, timeout=5)
    lat: list[float] = []
    t0 = time.perf_counter()
    deadline = t0 + a.duration
    while True:
        t = time.perf_counter()
        await nc.request("bench.py.rr", data, timeout=5)
        t1 = time.perf_counter()
        lat.append((t1 - t) * 1e6)
        if t1 >= deadline:
            break
    await rc.close()
    el = time.perf_counter() - t0
    return {"requests": len(lat), "rate": len(lat) / el, "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}


async def fresh_stream(js, name: str) -> None:
    try:
        await js.delete_stream(name)
    except nats.js.errors.NotFoundError:
        pass
    await js.add_stream(name=name, subjects=[f"{name}.>"], storage="file")


async def jspub(nc, a, data):
    js = nc.jetstream(timeout=30)
    await fresh_stream(js, a.stream)
    lat: list[float] = []
    t0 = time.perf_counter()
    deadline = t0 + a.duration
    subject = f"{a.stream}.x"
    while True:
        t = time.perf_counter()
        await js.publish(subject, data)
        t1 = time.perf_counter()
        lat.append((t1 - t) * 1e6)
        if t1 >= deadline:
            break
    el = time.perf_counter() - t0
    return {"msgs": len(lat), "elapsed": el, "rate": len(lat) / el, "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}


async def jsapub(nc, a, data):
    js = nc.jetstream(timeout=30, publish_async_max_pending=a.window)
    await fresh_stream(js, a.stream)
    subject = f"{a.stream}.x"
    n, t0 = 0, time.perf_counter()
    deadline = t0 + a.duration
    while True:
        await js.publish_async(subject, data)
        n += 1
        if n % 64 == 0 and time.perf_counter() >= deadline:
            break
    await js.publish_async_completed()
    el = time.perf_counter() - t0
    return {"msgs": n, "elapsed": el, "rate": n / el}


async def fetch(nc, a, data):
    js = nc.jetstream(timeout=30)
    info = await js.stream_info(a.stream)
    target = info.state.messages if not a.count else min(a.count, info.state.messages)
    durable = f"PYPULL{os.getpid()}"
    t0 = time.perf_counter()
    sub = await js.pull_subscribe(f"{a.stream}.>", durable=durable, stream=a.stream)
    n = 0
    cap = t0 + a.duration * 4 + 10
    while n < target and time.perf_counter() < cap:
        try:
            msgs = await sub.fetch(min(a.batch, target - n), timeout=5)
        except nats.errors.TimeoutError:
            break
        for m in msgs:
            await m.ack()
        n += len(msgs)
    await nc.flush()
    el = time.perf_counter() - t0
    await js.delete_consumer(a.stream, durable)
    return {"target": target, "msgs": n, "elapsed": el, "rate": n / el}


async def kv(nc, a, data, put: bool):
    js = nc.jetstream(timeout=30)
    bucket = await js.key_value(a.bucket)
    rnd = random.Random(12345)
    lat: list[float] = []
    t0 = time.perf_counter()
    deadline = t0 + a.duration
    while True:
        key = f"k{rnd.randrange(a.keys)}"
        t = time.perf_counter()
        if put:
            await bucket.put(key, data)
        else:
            await bucket.get(key)
        t1 = time.perf_counter()
        lat.append((t1 - t) * 1e6)
        if t1 >= deadline:
            break
    el = time.perf_counter() - t0
    return {"ops": len(lat), "elapsed": el, "rate": len(lat) / el, "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}


async def kvput(nc, a, data):
    return await kv(nc, a, data, True)


async def kvget(nc, a, data):
    return await kv(nc, a, data, False)


async def batch_stream(js, name: str, **flags) -> None:
    try:
        await js.delete_stream(name)
    except nats.js.errors.NotFoundError:
        pass
    await js.add_stream(name=name, subjects=[f"{name}.>"], storage="file", **flags)


async def fastbatch(nc, a, data):
    """One fast batch (ADR-50, allow_batched) for --duration: publish as the flow-control acks allow (at most
    two ack intervals ahead), then commit and wait for the PubAck."""
    js = nc.jetstream(timeout=30)
    await batch_stream(js, a.stream, allow_batched=True)
    subject, prefix = f"{a.stream}.x", nc.new_inbox()
    acked, every = [0], [1]
    advanced = asyncio.Event()
    final: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_reply(msg):
        body = json.loads(msg.data)
        if body.get("type") == "ack":
            acked[0], every[0] = max(acked[0], body["seq"]), body["msgs"]
            advanced.set()
        elif "type" not in body and not final.done():
            final.set_result(body)

    await nc.subscribe(f"{prefix}.>", cb=on_reply)
    n, t0 = 0, time.perf_counter()
    deadline = t0 + a.duration
    while True:
        n += 1
        op = 0 if n == 1 else 1
        await nc.publish(subject, data, reply=f"{prefix}.b.{a.window}.fail.{n}.{op}.$FI")
        while n - acked[0] >= 2 * every[0]:
            advanced.clear()
            await asyncio.wait_for(advanced.wait(), 30)
        if n % 100 == 0 and time.perf_counter() >= deadline:
            break
    n += 1
    await nc.publish(subject, data, reply=f"{prefix}.b.{a.window}.fail.{n}.2.$FI")
    ack = await asyncio.wait_for(final, 30)
    el = time.perf_counter() - t0
    assert ack.get("count") == n, ack
    return {"msgs": n, "elapsed": el, "rate": n / el}


async def atomicbatch(nc, a, data):
    """Atomic batches (ADR-50, allow_atomic) of --batch messages: all but the last published, the commit a
    request; batches back to back for --duration."""
    js = nc.jetstream(timeout=30)
    await batch_stream(js, a.stream, allow_atomic=True)
    subject = f"{a.stream}.x"
    n, b, t0 = 0, 0, time.perf_counter()
    deadline = t0 + a.duration
    while True:
        b += 1
        bid = f"b{b}"
        for i in range(1, a.batch):
            await nc.publish(subject, data, headers={"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(i)})
        reply = await nc.request(subject, data, timeout=30, headers={
            "Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(a.batch), "Nats-Batch-Commit": "1"})
        ack = json.loads(reply.data)
        assert ack.get("count") == a.batch, ack
        n += a.batch
        if time.perf_counter() >= deadline:
            break
    el = time.perf_counter() - t0
    return {"msgs": n, "elapsed": el, "rate": n / el}


MODES = {f.__name__: f for f in (pub, pubsub, reqrep, jspub, jsapub, fetch, kvput, kvget, fastbatch, atomicbatch)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--url", default="nats://127.0.0.1:4222")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--stream", default="BENCHPY")
    p.add_argument("--bucket", default="BENCHKV")
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--batch", type=int, default=100)
    a = p.parse_args()
    try:
        out = {"ok": True, "mode": a.mode, **asyncio.run(run(a))}
    except Exception as e:  # noqa: BLE001 - any failure becomes the cell's "error: ..." text
        out = {"ok": False, "mode": a.mode, "error": f"{type(e).__name__}: {e}"[:300]}
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
