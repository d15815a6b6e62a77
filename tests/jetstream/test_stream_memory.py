"""A deleted or stopped stream is freed by reference counting alone (issue #13 follow-up).

A stream's parts held it back: its batches (``Batching.stream``, ``FastBatches.stream``), the consumer set whose
bound methods sit in the stream's hook lists (``on_new_message``, ``interest``...), sourcing, message schedules, and
the store's ``on_remove`` callback (a bound method of the stream).  A stream in such cycles waits for the cyclic
collector, and one caught by ``gc.freeze()`` (server/core/gcpolicy.py freezes after start-up and bulk consumer
creations) was never freed at all, with its memory store's messages: a leak for a long-running server whose
clients create and delete streams.  ``Stream.stop`` now unlinks its parts.

These tests turn the collector off (and freeze what exists before the delete, as the policy does), make streams of
every shape (memory and file, busy consumers, sources, a mirror, KV-style with direct get and per-subject limits,
an open batch, a message schedule),
end them by an API delete or a server shutdown, and check that neither the Stream nor its store is left.
"""
from __future__ import annotations

import asyncio
import gc
import json
import weakref

import nats
import pytest

from skiff.server.core.server import Server

pytestmark = pytest.mark.skiff_only


async def _api(nc, subject: str, body: dict | None = None) -> dict:
    r = json.loads((await nc.request(subject, json.dumps(body).encode() if body is not None else b"",
                                     timeout=5)).data)
    assert "error" not in r, r
    return r


async def _origin(nc, storage: str) -> None:
    await _api(nc, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "storage": storage})
    for i in range(5):
        await nc.request(f"o.{i}", b"x" * 100, timeout=5)


async def _busy_consumers(nc) -> None:
    """A pull consumer with a delivered, unacknowledged message and a waiting request; a push consumer with
    heartbeats and flow control and a subscriber."""
    await _api(nc, "$JS.API.CONSUMER.CREATE.S.PULL", {"stream_name": "S", "config": {
        "durable_name": "PULL", "ack_policy": "explicit"}})
    await nc.subscribe("dlv.>")
    await _api(nc, "$JS.API.CONSUMER.CREATE.S.PUSH", {"stream_name": "S", "config": {
        "durable_name": "PUSH", "ack_policy": "explicit", "deliver_subject": "dlv.push",
        "idle_heartbeat": 1_000_000_000, "flow_control": True}})
    inbox = nc.new_inbox()
    await nc.subscribe(inbox)
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.PULL", b'{"batch":10,"expires":60000000000}', reply=inbox)


async def _make(nc, shape: str, storage: str) -> None:
    """Stream S of the given shape, with messages in it."""
    cfg: dict = {"name": "S", "subjects": ["s.>"], "storage": storage}
    if shape == "kv":  # what nats.py / nats.go key_value() creates
        cfg = {"name": "S", "subjects": ["$KV.S.>"], "storage": storage, "allow_direct": True,
               "max_msgs_per_subject": 1, "allow_rollup_hdrs": True, "deny_delete": True, "discard": "new",
               "max_age": 60_000_000_000, "subject_delete_marker_ttl": 1_000_000_000, "allow_msg_ttl": True}
    elif shape == "sources":
        await _origin(nc, storage)
        cfg = {"name": "S", "subjects": ["s.>"], "storage": storage, "sources": [{"name": "O"}]}
    elif shape == "mirror":
        await _origin(nc, storage)
        cfg = {"name": "S", "storage": storage, "mirror": {"name": "O"}}
    elif shape == "batches":
        cfg.update(allow_atomic=True, allow_batched=True)
    elif shape == "schedules":  # ADR-51: a schedule firing every second, its timer armed
        cfg.update(allow_msg_schedules=True)
    await _api(nc, "$JS.API.STREAM.CREATE.S", cfg)
    if shape != "mirror":
        subject = "$KV.S.k{}" if shape == "kv" else "s.{}"
        for i in range(10):
            await nc.request(subject.format(i % 3), b"x" * 100, timeout=5)
    if shape == "consumers":
        await _busy_consumers(nc)
    if shape == "schedules":
        await nc.request("s.sched", b"tick", timeout=5,
                         headers={"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "s.target"})
    if shape == "batches":  # an open atomic batch, left uncommitted
        await nc.publish("s.b", b"1", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"})
    await nc.flush()
    await asyncio.sleep(0.2)  # sourcing has copied what it can, consumers delivered


def _alive(srv: Server, name: str = "S") -> tuple[weakref.ref, weakref.ref]:
    stream = srv.jetstream.streams[name]
    return weakref.ref(stream), weakref.ref(stream.store)


@pytest.mark.parametrize("storage", ["memory", "file"])
@pytest.mark.parametrize("shape", ["plain", "consumers", "sources", "mirror", "kv", "batches", "schedules"])
async def test_a_deleted_stream_is_freed_without_the_collector(tmp_path, no_collector, shape, storage):
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _make(nc, shape, storage)
        stream, store = _alive(srv)
        await _api(nc, "$JS.API.STREAM.DELETE.S")
        await asyncio.sleep(0.05)  # callbacks queued before the delete (a delivery, a reply) run and let go
        assert (stream(), store()) == (None, None)
        await nc.close()


@pytest.mark.parametrize("shape", ["plain", "consumers", "sources", "kv"])
async def test_a_stream_deleted_after_a_freeze_is_freed(tmp_path, no_collector, shape):
    # What the gc policy does after start-up and bulk consumer creations: a frozen object in a cycle is never freed.
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _make(nc, shape, "memory")
        stream, store = _alive(srv)
        gc.freeze()
        await _api(nc, "$JS.API.STREAM.DELETE.S")
        await asyncio.sleep(0.05)
        assert (stream(), store()) == (None, None)
        # The server goes on: the name is free, a new stream of it works.
        await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "storage": "memory"})
        r = json.loads((await nc.request("s.x", b"1", timeout=5)).data)
        assert r == {"stream": "S", "seq": 1}
        await nc.close()


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_streams_stopped_by_a_shutdown_are_freed_without_the_collector(tmp_path, no_collector, storage):
    srv = Server(port=0, jetstream=True, store_dir=str(tmp_path))
    await srv.start()
    nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
    await _make(nc, "consumers", storage)
    await _api(nc, "$JS.API.STREAM.CREATE.M", {"name": "M", "storage": storage, "mirror": {"name": "S"}})
    await asyncio.sleep(0.2)
    refs = [*_alive(srv, "S"), *_alive(srv, "M")]
    await nc.close()
    js = srv.jetstream
    await srv.shutdown()
    # The stopped engine let go of its streams (JetStream.stop); the test holds the engine and the server, as an
    # embedding application does, and nothing of the streams may stay behind with them.
    assert js.streams == {}
    await asyncio.sleep(0.05)
    assert [r() for r in refs] == [None] * 4


@pytest.mark.parametrize("shape", ["consumers", "sources", "kv", "schedules"])
async def test_a_recovered_stream_deleted_after_a_freeze_is_freed(tmp_path, no_collector, shape):
    # install() freezes everything recovery made: a recovered stream (its consumers, its file store, its dedupe
    # window's lazy loader) is frozen.
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _make(nc, shape, "file")
        await nc.close()
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        assert srv.jetstream.streams["S"].store.msgs > 0
        stream, store = _alive(srv)
        gc.freeze()
        await _api(nc, "$JS.API.STREAM.DELETE.S")
        await asyncio.sleep(0.05)
        assert (stream(), store()) == (None, None)
        await nc.close()
