"""Mirror lag under a steady publish rate, Skiff and nats-server side by side.

    python -m bench.mirror_lag [--rates 1000,5000,10000,20000] [--duration 5] [--servers skiff,nats-server]

For each server and rate: a file stream ``O`` and a mirror ``M`` of it; a publisher sends to ``O`` at the rate (plain
publishes in 10 ms slices, no acks waited for) for ``--duration`` seconds.  Each message carries its publish time and
a push consumer on the mirror receives every mirrored message, so the table gives how long a message took from the
publisher through the origin and the mirror to a consumer of the mirror (median, 99th percentile, maximum; one client
process, one monotonic clock), the rate the publisher achieved, and how long after the last publish the mirror held
the origin's last sequence.  Same command line for both servers (tests/harness.py).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import nats

from tests.harness import ServerProcess


async def _info(nc, name: str) -> dict:
    return json.loads((await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=5)).data)


async def one(kind: str, rate: int, duration: float) -> dict:
    srv = ServerProcess(kind=kind).start()
    try:
        nc = await nats.connect(srv.url)
        pub = await nats.connect(srv.url)
        for body in ({"name": "O", "subjects": ["o.>"]}, {"name": "M", "mirror": {"name": "O"}}):
            r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{body['name']}", json.dumps(body).encode(),
                                              timeout=5)).data)
            assert "error" not in r, r
        # Let the mirror's consumer be set up (100-200 ms after the create on both servers).
        await pub.publish("o.warm", b"w")
        t_end = time.monotonic() + 10
        while (await _info(nc, "M"))["state"]["last_seq"] < 1 and time.monotonic() < t_end:
            await asyncio.sleep(0.02)
        lat: list[float] = []
        stop = asyncio.Event()
        sub_nc = await nats.connect(srv.url)
        sub = await sub_nc.subscribe("watch.m", cb=None)
        # A push consumer on the mirror: each message carries its publish time, so a delivery gives how long the
        # message took from the publisher through the origin and the mirror to a consumer of the mirror.
        r = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.M", json.dumps({"stream_name": "M", "config": {
            "deliver_subject": "watch.m", "ack_policy": "none", "deliver_policy": "new"}}).encode(), timeout=5)).data)
        assert "error" not in r, r
        pad = b"x" * 112

        async def publisher() -> int:
            t0 = time.monotonic()
            sent = 0
            while time.monotonic() - t0 < duration:
                due = int((time.monotonic() - t0) * rate)
                while sent < due:
                    await pub.publish(f"o.{sent % 16}", b"%016d" % time.monotonic_ns() + pad)
                    sent += 1
                await pub.flush()
                await asyncio.sleep(0.01)
            stop.set()
            return sent

        async def receiver() -> None:
            while True:
                try:
                    msg = await sub.next_msg(timeout=2 if stop.is_set() else 30)
                except Exception:
                    return
                lat.append((time.monotonic_ns() - int(msg.data[:16])) / 1e6)

        recv = asyncio.ensure_future(receiver())
        t0 = time.monotonic()
        sent = await publisher()
        t_stop = time.monotonic()
        await pub.flush()  # everything published has been processed by the server
        last = (await _info(nc, "O"))["state"]["last_seq"]
        while (await _info(nc, "M"))["state"]["last_seq"] < last:
            if time.monotonic() - t_stop > 60:
                break
            await asyncio.sleep(0.005)
        catch_up = time.monotonic() - t_stop
        await recv
        m = await _info(nc, "M")
        for c in (nc, pub, sub_nc):
            await c.close()
        lat.sort()
        q = lambda f: lat[min(len(lat) - 1, int(len(lat) * f))] if lat else float("nan")  # noqa: E731
        return {"server": kind, "rate": rate, "achieved": round(sent / (t_stop - t0)), "stored": last,
                "mirrored": m["state"]["last_seq"], "received": len(lat), "lat_p50_ms": q(0.5), "lat_p99_ms": q(0.99),
                "lat_max_ms": lat[-1] if lat else float("nan"), "catch_up_ms": catch_up * 1000}
    finally:
        srv.cleanup()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1000,5000,10000,20000")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--servers", default="skiff,nats-server")
    a = ap.parse_args()
    rows = []
    for rate in [int(x) for x in a.rates.split(",")]:
        for kind in a.servers.split(","):
            r = await one(kind, rate, a.duration)
            rows.append(r)
            print(json.dumps(r), flush=True)
    print()
    print("| target rate (msg/s) | server | achieved (msg/s) | mirrored | publish -> mirror consumer p50 / p99 / max "
          "(ms) | mirror caught up after the last publish |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rate']:,} | {r['server']} | {r['achieved']:,} | {r['mirrored']:,} of {r['stored']:,} | "
              f"{r['lat_p50_ms']:,.1f} / {r['lat_p99_ms']:,.1f} / {r['lat_max_ms']:,.1f} | {r['catch_up_ms']:,.0f} ms |")

if __name__ == "__main__":
    asyncio.run(main())
