"""Consumer states are written in slices (server/jetstream/consumer_writes.py ``ConsumerWrites.flush``): a turn of the
event loop writes states for at most ``FLUSH_SLICE`` seconds and leaves the rest to the next turn, so creating or
acking on thousands of consumers at once does not stall other clients (issue #13, bench ``scale.admin_stalls``).
Every state still reaches the disk, in the same ``FLUSH_INTERVAL``."""
from __future__ import annotations

import asyncio

import nats

from skiff.server.core.server import Server
from skiff.server.jetstream import consumer_writes, stream_consumers
from skiff.storage.consumer import FileConsumerStore

N = 20


async def test_states_are_written_a_slice_per_turn_and_all_reach_the_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(consumer_writes, "FLUSH_SLICE", 0.0)  # one state per turn: every write is its own slice
    slices = 0
    real = stream_consumers.ConsumerSet._flush_slice

    def counted(self):
        nonlocal slices
        slices += 1
        real(self)

    monkeypatch.setattr(stream_consumers.ConsumerSet, "_flush_slice", counted)
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.publish("s.x", b"one")
        subs = [await js.pull_subscribe("s.x", durable=f"C{i}") for i in range(N)]
        cset = stream_consumers.consumer_set(srv.jetstream.streams["S"])
        for _ in range(200):  # the creations' writes settle first
            if not cset._dirty and cset._flush_timer is None and cset._writing is None:
                break
            await asyncio.sleep(0.01)
        slices = 0
        for sub in subs:
            (msg,) = await sub.fetch(1, timeout=2)
            await msg.ack_sync()
        for _ in range(300):
            if not cset._dirty and cset._flush_timer is None and cset._writing is None:
                break
            await asyncio.sleep(0.01)
        assert not cset._dirty
        assert slices >= N  # one ack state per slice, not all in one turn
        for i in range(N):
            on_disk = FileConsumerStore(tmp_path / "jetstream" / "$G" / "streams" / "S" / "obs" / f"C{i}")
            assert on_disk.as_ == 1, (i, on_disk.as_)  # the ack floor reached the disk before any stop
        await nc.close()


def test_an_older_snapshot_never_replaces_a_newer_one(tmp_path):
    """The timer's batches are written in a worker thread (ConsumerSet._flush_slice) while a stop writes its final
    state on the loop: whichever reaches the lock last, the newest snapshot is what stays on disk."""
    st = FileConsumerStore(tmp_path / "C")
    (tmp_path / "C").mkdir()
    st.update_delivered(1, 1, 1, 0)
    old, old_seq = st.snapshot(), st.snaps
    st.update_acks(1, 1)
    st.stop()  # the final flush: snapshot number 2 written, the store closed
    assert st.written == 2
    assert st.write_snapshot(old, False, old_seq) is False  # the worker's batch, late
    assert FileConsumerStore(tmp_path / "C").as_ == 1
    # A batch holding the newest snapshot of a store stopped meanwhile (nothing changed since) is still written.
    st2 = FileConsumerStore(tmp_path / "C")
    st2.update_delivered(2, 2, 1, 0)
    last, last_seq = st2.snapshot(), st2.snaps
    st2.stop()  # nothing dirty: writes nothing
    assert st2.write_snapshot(last, False, last_seq) is True
    assert FileConsumerStore(tmp_path / "C").ds == 2
