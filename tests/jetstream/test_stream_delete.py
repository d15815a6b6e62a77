"""Deleting a stream with many consumers: atomic under kill -9, and no client stalls meanwhile (both servers).

* kill -9 midway: the test watches the stream's consumer directories from outside and SIGKILLs the server as soon
  as the delete has visibly begun (the first consumer directory is gone, or the whole stream directory) or after
  half of them are gone.  After the restart the stream is either entirely there (every consumer) or entirely gone.
* A probe client does request/reply every 10 ms while a stream with 1,000 consumers is deleted: the longest gap
  between two answers must stay under 50 ms on Skiff (the printed figure for nats-server is for comparison).  The
  collector of this (the probe's) process is off meanwhile, so that what is measured is the server.
"""
from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time

import nats
import pytest

CONSUMERS = 200


async def _create_stream_with_consumers(nc, name: str, n: int) -> None:
    r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(
        {"name": name, "subjects": [f"{name}.>"]}).encode(), timeout=5)).data)
    assert "error" not in r, r
    js = nc.jetstream()
    for i in range(20):
        await js.publish(f"{name}.x", b"%d" % i)

    async def create(i: int) -> None:
        r = json.loads((await nc.request(f"$JS.API.CONSUMER.CREATE.{name}.C{i}", json.dumps(
            {"stream_name": name, "config": {"durable_name": f"C{i}", "ack_policy": "explicit"}}).encode(),
            timeout=10)).data)
        assert "error" not in r, r

    for start in range(0, n, 50):
        await asyncio.gather(*(create(i) for i in range(start, min(start + 50, n))))


async def _consumer_names(nc, stream: str) -> list[str]:
    names: list[str] = []
    while True:
        r = json.loads((await nc.request(f"$JS.API.CONSUMER.NAMES.{stream}", json.dumps(
            {"offset": len(names)}).encode(), timeout=5)).data)
        assert "error" not in r, r
        page = r.get("consumers") or []
        names += page
        if not page or len(names) >= r["total"]:
            return names


def _kill_when(server, obs: str, gone: int, fired: threading.Event, stop: threading.Event) -> None:
    """Poll the consumer directories; SIGKILL once ``gone`` of them disappeared (or all, with the stream)."""
    while not stop.is_set():
        try:
            n = sum(1 for e in os.scandir(obs) if not e.name.startswith("."))
        except FileNotFoundError:
            n = 0
        if n <= CONSUMERS - gone:
            server.kill()
            fired.set()
            return
        time.sleep(0.0002)


@pytest.mark.parametrize("gone", [1, CONSUMERS // 2])
async def test_kill9_during_stream_delete_is_all_or_nothing(server_factory, gone):
    server = server_factory()
    nc = await nats.connect(server.url)
    await _create_stream_with_consumers(nc, "DEL", CONSUMERS)
    obs = os.path.join(server.store_dir, "jetstream", "$G", "streams", "DEL", "obs")
    assert len(os.listdir(obs)) == CONSUMERS

    fired, stop = threading.Event(), threading.Event()
    watcher = threading.Thread(target=_kill_when, args=(server, obs, gone, fired, stop), daemon=True)
    watcher.start()
    try:
        await nc.request("$JS.API.STREAM.DELETE.DEL", b"", timeout=5)
    except Exception:
        pass  # killed before it answered
    await asyncio.sleep(0.3)
    stop.set()
    watcher.join(2)
    server.kill()  # a delete that completed before the watcher saw it still ends with a kill -9
    try:
        await nc.close()
    except Exception:
        pass

    server.start()
    nc = await nats.connect(server.url)
    info = json.loads((await nc.request("$JS.API.STREAM.INFO.DEL", b"", timeout=5)).data)
    if "error" in info:
        assert info["error"]["err_code"] == 10059, info  # entirely gone
        assert not os.path.exists(os.path.join(server.store_dir, "jetstream", "$G", "streams", "DEL"))
        aside = os.path.join(server.store_dir, "jetstream", "$G", ".deleted")  # Skiff: removed after the restart
        for _ in range(100):
            if not os.path.isdir(aside) or not os.listdir(aside):
                break
            await asyncio.sleep(0.05)
        assert not os.path.isdir(aside) or not os.listdir(aside)
    else:
        names = await _consumer_names(nc, "DEL")
        assert len(names) == CONSUMERS, f"stream came back with {len(names)} of {CONSUMERS} consumers"
        assert info["state"]["messages"] == 20
    # Either way the name is usable again.
    await nc.close()


async def test_deleting_a_stream_with_1000_consumers_stalls_no_client(server_factory, target):
    server = server_factory()
    nc = await nats.connect(server.url)
    await _create_stream_with_consumers(nc, "BIG", 1000)

    responder = await nats.connect(server.url)
    async def pong(m) -> None:
        await responder.publish(m.reply, b"pong")

    await responder.subscribe("probe", cb=pong)
    await responder.flush()
    probe = await nats.connect(server.url)
    gaps: list[tuple[float, float]] = []  # (gap, when it ended)
    done = asyncio.Event()

    async def probing() -> None:
        last = time.monotonic()
        while not done.is_set():
            await probe.request("probe", b"ping", timeout=5)
            now = time.monotonic()
            gaps.append((now - last, now))
            last = now
            await asyncio.sleep(0.01)

    # The probe, its responder and the admin client live in this process: its own collector must not stall them.
    # pytest's heap makes full collections of 30-150 ms here under load (up to 520 ms measured with gc.callbacks),
    # and those were counted as the server's stall: the test's flakiness under load (issue #13).
    gc.collect()
    gc.disable()
    try:
        task = asyncio.create_task(probing())
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        r = json.loads((await nc.request("$JS.API.STREAM.DELETE.BIG", b"", timeout=30)).data)
        took = time.monotonic() - t0
        assert r == {"type": "io.nats.jetstream.api.v1.stream_delete_response", "success": True}, r
        await asyncio.sleep(0.3)
        done.set()
        await task
    finally:
        gc.enable()
    gap, at = max(gaps)
    worst = gap - 0.01  # the probe's own 10 ms sleep is not a stall
    print(f"{target}: delete of a stream with 1000 consumers answered in {took * 1000:.0f} ms, "
          f"longest probe stall {worst * 1000:.1f} ms, ending {(at - t0) * 1000:.0f} ms after the request")
    for c in (nc, responder, probe):
        await c.close()
    if target == "skiff":
        assert worst <= 0.05, f"a client was stalled {worst * 1000:.0f} ms during the delete"
