"""A stopped consumer is freed by reference counting alone (issue #13).

A consumer is made of parts that each hold it back (``c``): the delivery loop, the push or pull adapter, the ack
timer, the state recorder, the pacer, the inactivity and pause timers, priority groups.  While those cycles stood, a
deleted consumer waited for the cyclic collector, and creating or deleting 10,000 of them cost collector passes over
all their objects (the event-loop stalls of bench ``scale.admin_stalls``); a consumer caught by ``gc.freeze()``
(server/core/gcpolicy.py) would never have been freed at all.  ``Consumer.stop`` now unlinks its parts.

These tests turn the collector off, make consumers of every shape busy (a waiting pull request, an unacknowledged
message, a bound push subscriber with heartbeats and flow control, a paused one, a pinned priority group, replay
pacing, an inactivity timer), end them in every way a consumer ends (API delete, stream delete, inactivity, server
shutdown), and check that no Consumer object is left.
"""
from __future__ import annotations

import asyncio
import gc
import json
import time
import weakref

import nats
import pytest

from skiff.server.core.server import Server
from skiff.server.jetstream import consumer_writes, stream_consumers

pytestmark = pytest.mark.skiff_only

FUTURE = "2099-01-01T00:00:00Z"

CONFIGS = {
    "pull": {"durable_name": "PULL", "ack_policy": "explicit"},
    "push": {"durable_name": "PUSH", "ack_policy": "explicit", "deliver_subject": "dlv.push",
             "idle_heartbeat": 1_000_000_000, "flow_control": True},
    "ephemeral": {"ack_policy": "explicit", "inactive_threshold": 60_000_000_000, "replay_policy": "original",
                  "max_ack_pending": 3},
    "paused": {"durable_name": "PAUSED", "ack_policy": "explicit", "pause_until": FUTURE},
    "pinned": {"durable_name": "PINNED", "ack_policy": "explicit", "priority_policy": "pinned_client",
               "priority_groups": ["g"], "priority_timeout": 60_000_000_000},
    "rate": {"durable_name": "RATE", "ack_policy": "none", "deliver_subject": "dlv.rate",
             "rate_limit_bps": 100},
}


async def _api(nc, subject: str, body: dict | None = None) -> dict:
    r = json.loads((await nc.request(subject, json.dumps(body).encode() if body is not None else b"",
                                     timeout=5)).data)
    assert "error" not in r, r
    return r


async def _busy_consumers(srv: Server, nc) -> list[weakref.ref]:
    """Stream S with messages and one consumer of each shape in CONFIGS, each with something in flight."""
    await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    for i in range(5):
        await nc.request("s.x", b"%d" % i, timeout=5)
    await nc.subscribe("dlv.>")  # push interest: heartbeats, flow control, deliveries
    names = []
    for kind, cfg in CONFIGS.items():
        name = cfg.get("durable_name")
        subject = f"$JS.API.CONSUMER.CREATE.S.{name}" if name else "$JS.API.CONSUMER.CREATE.S"
        r = await _api(nc, subject, {"stream_name": "S", "config": cfg})
        names.append(r["name"])
    # Pull requests: one message delivered and left unacknowledged, and a request left waiting for more.
    for name, extra in (("PULL", {}), ("PINNED", {"group": "g"}), (names[2], {})):
        inbox = nc.new_inbox()
        await nc.subscribe(inbox)
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.S.{name}", json.dumps(
            {"batch": 10, "expires": 60_000_000_000, **extra}).encode(), reply=inbox)
    await nc.flush()
    await asyncio.sleep(0.1)
    consumers = srv.jetstream.streams["S"].consumers
    assert sorted(consumers) == sorted(names)
    return [weakref.ref(c) for c in consumers.values()]


def _left(refs: list[weakref.ref]) -> list[str]:
    return [c.name for c in (r() for r in refs) if c is not None]


@pytest.mark.parametrize("how", ["api_delete", "stream_delete", "stream_delete_sliced", "api_delete_after_freeze"])
async def test_deleted_consumers_are_freed_without_the_collector(tmp_path, no_collector, monkeypatch, how):
    if how == "stream_delete_sliced":  # more consumers than one slice: freed over several loop turns
        monkeypatch.setattr(stream_consumers, "STOP_SLICE", 2)
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        refs = await _busy_consumers(srv, nc)
        if how == "api_delete_after_freeze":
            gc.freeze()  # what the gc policy does after bulk creations: it must not keep deleted consumers
        if how.startswith("stream_delete"):
            await _api(nc, "$JS.API.STREAM.DELETE.S")
        else:
            for name in list(srv.jetstream.streams["S"].consumers):
                await _api(nc, f"$JS.API.CONSUMER.DELETE.S.{name}")
        # Callbacks queued before the stop (a delivery slice, a reply) and, for a sliced stream delete, the later
        # slices run and let go: a few loop turns, longer on a loaded machine.  The collector is off, so whatever is
        # still held at the deadline is held by a reference, not waiting for a collection.
        deadline = time.monotonic() + 5
        while _left(refs) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert _left(refs) == []
        await nc.close()


async def test_an_inactive_consumer_is_freed_without_the_collector(tmp_path, no_collector):
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
        await nc.request("s.x", b"1", timeout=5)
        # A push ephemeral nobody listens to: deleted after inactive_threshold (no jitter for push consumers).
        r = await _api(nc, "$JS.API.CONSUMER.CREATE.S", {"stream_name": "S", "config": {
            "ack_policy": "explicit", "deliver_subject": "nobody", "inactive_threshold": 100_000_000}})
        ref = weakref.ref(srv.jetstream.streams["S"].consumers[r["name"]])
        for _ in range(100):
            if not srv.jetstream.streams["S"].consumers:
                break
            await asyncio.sleep(0.02)
        assert not srv.jetstream.streams["S"].consumers
        await asyncio.sleep(0.05)
        assert ref() is None
        await nc.close()


async def test_consumers_stopped_by_a_shutdown_are_freed_without_the_collector(tmp_path, no_collector):
    srv = Server(port=0, jetstream=True, store_dir=str(tmp_path))
    await srv.start()
    nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
    refs = await _busy_consumers(srv, nc)
    await nc.close()
    stream = srv.jetstream.streams["S"]
    await srv.shutdown()
    # The stream (which has cycles of its own) still names them; a stopped consumer must not need more than that
    # list going away.
    stream.consumers.clear()
    await asyncio.sleep(0.05)
    assert _left(refs) == []



async def test_a_stream_delete_finishes_many_consumers_a_slice_per_loop_turn(tmp_path, monkeypatch):
    """More consumers than STOP_SLICE: halted in the delete's turn, finished (advisory, 409 to waiting pulls,
    state) and freed over the next turns; every client-visible effect of the delete still happens."""
    monkeypatch.setattr(stream_consumers, "STOP_SLICE", 2)
    n = 7
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
        for i in range(n):
            await _api(nc, f"$JS.API.CONSUMER.CREATE.S.C{i}", {"stream_name": "S", "config": {
                "durable_name": f"C{i}", "ack_policy": "explicit"}})
        advisories = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.*")
        statuses = await nc.subscribe("pull.reply.*")
        for i in range(n):  # a waiting pull request on every consumer
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.S.C{i}", b'{"batch":1,"expires":60000000000}',
                             reply=f"pull.reply.{i}")
        await nc.flush()
        await asyncio.sleep(0.05)
        refs = [weakref.ref(c) for c in srv.jetstream.streams["S"].consumers.values()]
        turns = 0
        loop = asyncio.get_running_loop()
        stream = srv.jetstream.streams["S"]
        done = asyncio.Event()

        def deleted() -> None:  # runs right after the consumers' part of the delete
            def count() -> None:
                nonlocal turns
                if any(r() is not None for r in refs):
                    turns += 1
                    loop.call_soon(count)
                else:
                    done.set()
            assert not stream.consumers  # none reachable any more
            assert all(r().closed for r in refs)  # all halted in this turn, none finished yet: all still here
            loop.call_soon(count)

        stream.on_deleted.append(deleted)
        await _api(nc, "$JS.API.STREAM.DELETE.S")
        await asyncio.wait_for(done.wait(), 5)
        assert turns >= n // 2  # a slice of two per turn
        got = set()
        for _ in range(n):
            m = await advisories.next_msg(timeout=2)
            got.add(json.loads(m.data)["consumer"])
        assert got == {f"C{i}" for i in range(n)}
        codes = set()
        for _ in range(n):
            m = await statuses.next_msg(timeout=2)
            codes.add((m.subject, m.headers.get("Status"), m.headers.get("Description")))
        assert codes == {(f"pull.reply.{i}", "409", "Consumer Deleted") for i in range(n)}
        # Nothing written back under the deleted stream, and the name can be used again at once.
        assert not (tmp_path / "jetstream" / "$G" / "streams" / "S").exists()
        await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
        r = await _api(nc, "$JS.API.STREAM.INFO.S")
        assert r["state"]["consumer_count"] == 0
        await nc.close()


def test_a_failed_state_write_holds_no_consumer(no_collector):
    """The worker's report of a failed state write (a deleted stream's directory is gone) names the consumer and the
    error; it must not keep the consumer alive through the exception's traceback, whose frame holds the batch."""

    class Store:
        closed = False
        durable = False

        def write_snapshot(self, data, durable, seq):
            raise FileNotFoundError(2, "No such file or directory")

    class C:
        store = Store()

    c = C()
    ref = weakref.ref(c)
    failed = consumer_writes._write_states([(c, 1, b"state")])
    assert [(type(x).__name__, e) for x, e in failed] == [("C", "[Errno 2] No such file or directory")]
    del c, failed
    assert ref() is None
