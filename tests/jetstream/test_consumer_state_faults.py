"""Consumer state store faults and confirmed-ack durability (Skiff only: embedded server, injected faults).

* A state store that refuses an update (ack, delivery) is logged and rewritten from the consumer's own view: what
  consumer info and a restart report never drifts from what clients saw.
* ``sync_interval: always``: an ``ack_sync`` reply leaves only after the consumer state holding the ack was written
  and fsynced; a state write that fails holds the reply back.
"""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from skiff.server.core.server import Server
from skiff.storage.consumer import FileConsumerStore
from skiff.storage.records import SequencePair

pytestmark = pytest.mark.skiff_only


async def _setup(nc, stream: str = "F", n: int = 5) -> None:
    r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{stream}", json.dumps(
        {"name": stream, "subjects": [f"{stream}.>"]}).encode(), timeout=3)).data)
    assert "error" not in r, r
    r = json.loads((await nc.request(f"$JS.API.CONSUMER.CREATE.{stream}.D", json.dumps(
        {"stream_name": stream, "config": {"durable_name": "D", "ack_policy": "explicit"}}).encode(), timeout=3)).data)
    assert "error" not in r, r
    js = nc.jetstream()
    for i in range(n):
        await js.publish(f"{stream}.x", b"%d" % i)


class _Faulty(FileConsumerStore):
    """A consumer store with injected faults (``__slots__`` forbid patching the instance: swap its class)."""

    __slots__ = ()
    refuse: set[str] = set()  # operations that raise once
    write_delay = 0.0
    write_error: OSError | None = None
    written: list[bytes] = []

    def update_acks(self, dseq: int, sseq: int) -> bool:
        if "ack" in _Faulty.refuse:
            _Faulty.refuse.discard("ack")
            raise RuntimeError("injected state store failure")
        return super().update_acks(dseq, sseq)

    def update_delivered(self, dseq: int, sseq: int, dc: int, ts: int) -> None:
        if "deliver" in _Faulty.refuse:
            _Faulty.refuse.discard("deliver")
            raise RuntimeError("injected state store failure")
        super().update_delivered(dseq, sseq, dc, ts)

    def update_delivered_run(self, dseq: int, msgs) -> None:  # a run of deliveries (delivery.py _send_run)
        if "deliver" in _Faulty.refuse:
            _Faulty.refuse.discard("deliver")
            raise RuntimeError("injected state store failure")
        super().update_delivered_run(dseq, msgs)

    def write_snapshot(self, data: bytes, durable: bool) -> None:  # the group-commit worker thread
        import time
        if _Faulty.write_error is not None:
            raise _Faulty.write_error
        time.sleep(_Faulty.write_delay)
        super().write_snapshot(data, durable)
        _Faulty.written.append(data)


def _inject(store: FileConsumerStore) -> None:
    _Faulty.refuse = set()
    _Faulty.write_delay = 0.0
    _Faulty.write_error = None
    _Faulty.written = []
    store.__class__ = _Faulty


class _Errors:
    def __init__(self, srv: Server) -> None:
        self.events: list[tuple[str, dict]] = []
        real = srv.log_error

        def log_error(event: str, **kw) -> None:
            self.events.append((event, kw))
            real(event, **kw)

        srv.log_error = log_error  # type: ignore[method-assign]


async def test_refused_ack_update_is_logged_and_state_rewritten(tmp_path):
    srv = await Server(jetstream=True, store_dir=str(tmp_path)).start()
    errors = _Errors(srv)
    nc = await nats.connect(srv.client_url)
    try:
        await _setup(nc)
        c = srv.jetstream.streams["F"].consumers["D"]
        store = c.store
        psub = await nc.jetstream().pull_subscribe_bind("D", "F")
        msgs = await psub.fetch(5, timeout=2)
        _inject(store)
        _Faulty.refuse.add("ack")
        await msgs[0].ack_sync(timeout=2)
        await asyncio.sleep(0.05)
        assert any("state update failed" in e and kw.get("op") == "ack" for e, kw in errors.events), errors.events
        # The store holds the ack nevertheless: info (read from the store) moved the floor.
        info = json.loads((await nc.request("$JS.API.CONSUMER.INFO.F.D", b"", timeout=2)).data)
        assert info["ack_floor"] == {"consumer_seq": 1, "stream_seq": 1, "last_active": info["ack_floor"]["last_active"]}
        assert store.ack_floor == SequencePair(1, 1) and 1 not in store.pending
    finally:
        await nc.close()
        await srv.shutdown()


@pytest.mark.parametrize("batch", [1, 3])  # 1: the one-message path; 3: a run (delivery.py _send_run)
async def test_refused_delivery_update_is_logged_and_state_rewritten(tmp_path, batch):
    srv = await Server(jetstream=True, store_dir=str(tmp_path)).start()
    errors = _Errors(srv)
    nc = await nats.connect(srv.client_url)
    try:
        await _setup(nc)
        store = srv.jetstream.streams["F"].consumers["D"].store
        _inject(store)
        _Faulty.refuse.add("deliver")
        psub = await nc.jetstream().pull_subscribe_bind("D", "F")
        msgs = await psub.fetch(batch, timeout=2)
        assert len(msgs) == batch
        await asyncio.sleep(0.05)
        assert any(kw.get("op") == "deliver" for _, kw in errors.events), errors.events
        assert store.delivered == SequencePair(batch, batch)
        assert sorted(store.pending) == list(range(1, batch + 1))
    finally:
        await nc.close()
        await srv.shutdown()


async def test_sync_always_ack_reply_waits_for_the_state_fsync(tmp_path):
    srv = await Server(jetstream=True, store_dir=str(tmp_path), sync_always=True).start()
    nc = await nats.connect(srv.client_url)
    try:
        await _setup(nc)
        store = srv.jetstream.streams["F"].consumers["D"].store
        assert isinstance(store, FileConsumerStore) and store.durable
        _inject(store)
        _Faulty.write_delay = 0.1
        psub = await nc.jetstream().pull_subscribe_bind("D", "F")
        msgs = await psub.fetch(3, timeout=2)
        await asyncio.sleep(0.3)  # the deliveries' state write is done
        _Faulty.written.clear()
        await msgs[0].ack_sync(timeout=3)
        # Confirmed only after a write that holds the ack (ack floor 1) completed.
        assert _Faulty.written
        on_disk = FileConsumerStore(store.dir)
        assert on_disk.ack_floor == SequencePair(1, 1) and 1 not in on_disk.pending

        _Faulty.write_error = OSError(28, "No space left on device")
        with pytest.raises(nats.errors.TimeoutError):
            await msgs[1].ack_sync(timeout=0.5)  # not durable: no confirmation
        assert FileConsumerStore(store.dir).ack_floor == SequencePair(1, 1)
        _Faulty.write_error = None
        await msgs[1].ack_sync(timeout=3)  # acked again once the disk works: confirmed
        on_disk = FileConsumerStore(store.dir)
        assert on_disk.ack_floor == SequencePair(2, 2)
    finally:
        await nc.close()
        await srv.shutdown()
