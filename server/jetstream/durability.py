"""When a PubAck may leave: after the store handed the message to the OS, and after fsync with ``sync_always``.

Theory of operation
-------------------
Publishing never awaits (DESIGN.md).  :meth:`Durability.stored` records that a stream appended a message and, if the
publisher wants an ack, queues ``(stream, seq, reply)``; :meth:`send` queues a ready-made reply (error acks) behind
the acks already waiting, so one client's acks keep their order; :meth:`send_stored` queues a ready-made reply that
reports stored messages (duplicate acks, a fast batch's flow acks and commit), which waits as a PubAck.  All set
``engine.has_pending``; the server calls :meth:`JetStream.flush` -> :meth:`flush` once per read (``flush_pending``
before client output is written), and a ``call_soon`` covers publishes that did not come from a client read (timers,
internal publishes).

``flush``:

1. ``store.flush()`` for every stream written since the last flush: one ``write`` per block file for all the
   appends of this loop turn.  A ``StoreWriteError`` (disk full, EIO) means the store rolled back to what is on
   disk; the publishes it names get the error ack nats-server uses for store failures, 10077
   ``JSStreamStoreFailedF`` with the OS error text (a ``send_stored`` reply too, when it reports one of them), and
   everything stored earlier stays.
2. Without ``sync_always`` the acks are published now: the data survives ``kill -9`` of the process.  A background
   timer fsyncs dirty file stores every ``sync_interval`` in a worker thread.
3. With ``sync_always`` the acks of file streams wait for an fsync run in a worker thread
   (``loop.run_in_executor(None, store.sync)``).  Group commit: while one fsync is running, later acks collect in
   the next batch; when it completes its batch is released and one fsync starts for everything collected since.
   So every ack follows an fsync that began after its message was written, and N concurrent publishers cost about
   one fsync per round trip instead of N.

Consumer acks
-------------
What a confirmed ack (the empty reply to an ack sent with a reply subject: nats-py ``ack_sync``, the clients'
"double ack") guarantees depends on ``sync_interval``:

* ``always``: the reply is a promise like a PubAck - the ack survives ``kill -9`` and power loss.  The ack path
  calls :meth:`consumer_ack` instead of replying; at the next :meth:`flush` the consumer's state is encoded on the
  loop (``FileConsumerStore.snapshot``) and joins the next group commit, whose worker writes it (temp file, fsync,
  rename, directory fsync) next to the stream fsyncs; the reply leaves when that batch is done.  All state writes
  of such consumers (the 100 ms timer of ``ConsumerSet`` too) go this way, so the loop never fsyncs and one
  consumer's writes stay in order (one batch at a time).  A state write that fails holds the replies of its batch
  back (the client's ack times out and it acks again) and marks the consumer dirty for a retry.
  nats-server 2.15.1 does not promise this: measured, it loses confirmed acks of the last ~100 ms on kill -9
  (tests/jetstream/test_kill9_acks.py).
* any other ``sync_interval`` (nats-server's default, 2 minutes): the reply leaves at once and the state is written
  (handed to the OS, no fsync) by the stream's ``ConsumerSet`` timer within ``FLUSH_INTERVAL`` (100 ms) and when the
  server stops.  A ``kill -9`` may lose the acks of that last 100 ms (the messages are redelivered, never lost);
  power loss may lose what the OS had not written back yet.  That is nats-server's behaviour too.
"""
from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.storage.errors import StoreWriteError

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream
    from .stream import Stream


class Durability:
    # How many flush() calls are running, in any engine of any server of this process (see stored()).
    flushing = 0

    def __init__(self, js: "JetStream", *, sync_always: bool, sync_interval: float) -> None:
        self.js = js
        self.server = js.server
        self.sync_always = sync_always
        self.sync_interval = sync_interval
        # (stream, seq, reply, ack tail): "ack seq of stream once durable"; (None, 0, reply, payload): send as is;
        # (stream, -1 - seq, reply, payload): send_stored's reply, reporting stream's messages up to seq.
        self._acks: list[tuple] = []
        self._dirty: dict["Stream", None] = {}
        self._unsynced: dict["Stream", None] = {}
        # (reply, payload, consumer store the reply waits for or None, stream whose fsync the PubAck waits for or None)
        self._sync_wait: list[tuple] = []
        self._syncing = False
        self._sync_task: asyncio.Future | None = None
        self._bg_timer = None
        self._bg_running = False
        self._soon = False
        self.stopped = False
        self.fsyncs = 0
        # sync_always consumer state: stores to encode at the next flush, then their encoded states waiting for
        # the next group commit (the latest one per store).
        self._cwrites: dict = {}
        self._csnap: dict = {}
        # A test's one-shot crash between store and ack (skiff.testing.faults.crash_before_ack): called with a
        # flush's acks once their messages were handed to the OS; True means the server "died" there and the acks
        # never leave.  None (always, outside such a test) costs one attribute check per flush with acks.
        self.before_ack = None

    # ------------------------------------------------------------------ producers
    def stored(self, stream: "Stream", seq: int, reply: str, tail: bytes = b"}") -> None:
        """``tail`` ends the ack JSON after the sequence (counter streams add ``,"val":".."``)."""
        self._dirty[stream] = None
        if reply:
            self._acks.append((stream, seq, reply, tail))
        # _pending() in-line: this runs once per stored message.
        js = self.js
        if not js.has_pending:
            js.has_pending = True
        if not self._soon and not (self.server._flush_scheduled and not Durability.flushing):
            # No loop callback when the server's flush_pending is due anyway (a client's read, begun with
            # Server.begin_read, ends with it; or one is scheduled): it runs JetStream.flush first.  Not while any
            # flush runs: an ack routed by one may store a message whose engine that pass has already flushed.
            self._pending()

    def dirty(self, stream: "Stream") -> None:
        self._dirty[stream] = None
        self._pending()

    def send(self, reply: str, payload: bytes) -> None:
        """A reply that reports nothing stored (an error ack), kept in order with the queued acks."""
        if not self._acks and not self.js.has_pending:
            self.server.publish(reply, payload)
            return
        self._acks.append((None, 0, reply, payload))
        self._pending()

    def send_stored(self, stream: "Stream", reply: str, payload: bytes, seq: int) -> None:
        """A ready-made reply that reports messages of ``stream`` up to sequence ``seq`` as stored (a duplicate's
        ack, a fast batch's flow-control ack or commit): it leaves when a PubAck for them would, after the write,
        and after an fsync that began after it with ``sync_always`` (nats-server fsyncs every write then, before it
        answers; a duplicate may come while the original's fsync still runs).  If the write of one of them fails
        in that flush, it becomes the store-failure error ack, as their PubAcks do."""
        self._acks.append((stream, -1 - seq, reply, payload))
        self.dirty(stream)

    def consumer_write(self, store) -> None:
        """Write a (file) consumer store's state with the next group commit (``sync_always`` only)."""
        self._cwrites[store] = None
        self._pending()

    def consumer_ack(self, store, reply: str) -> None:
        """Answer a confirmed ack once the consumer's state, with that ack, is on disk and fsynced."""
        self._cwrites[store] = None
        self._acks.append((None, -1, reply, store))
        self._pending()

    def _pending(self) -> None:
        js = self.js
        if not js.has_pending:
            js.has_pending = True
        if not self._soon:
            self._soon = True
            try:
                asyncio.get_running_loop().call_soon(self._flush_soon)
            except RuntimeError:  # no loop (a synchronous unit test): the caller flushes
                self._soon = False

    def _flush_soon(self) -> None:
        self._soon = False
        if self.js.has_pending:
            self.server.flush_pending()

    # ------------------------------------------------------------------ flush
    def flush(self) -> None:
        Durability.flushing += 1
        try:
            self._flush()
        finally:
            Durability.flushing -= 1

    def _flush(self) -> None:
        self.js.has_pending = False
        # stream -> (lost sequences, None: every ack of that stream failed; the error ack; the first lost sequence)
        failed: dict["Stream", tuple[set[int] | None, bytes, int]] = {}
        if self._dirty:
            dirty, self._dirty = self._dirty, {}
            for stream in dirty:
                if stream.closed:
                    continue
                try:
                    stream.store.flush()
                except StoreWriteError as e:
                    self.server.log_error("JetStream write failed, publishes rejected", stream=stream.name,
                                          error=str(e), lost=len(e.seqs))
                    stream.write_failed(e)
                    err = ApiError.of("JSStreamStoreFailedF", err=_os_text(e.cause))
                    lost = set(e.seqs)
                    failed[stream] = (lost, stream.error_ack(err), min(lost, default=0))
                except Exception as e:  # a store bug must not take the server down; nothing of it is acked
                    self.server.log_error("JetStream flush failed", stream=stream.name, error=repr(e))
                    failed[stream] = (None, stream.error_ack(ApiError.of("JSStreamStoreFailedF", err=str(e))), 0)
                if stream.path is not None:
                    self._unsynced[stream] = None
        if self._cwrites:
            cwrites, self._cwrites = self._cwrites, {}
            for store in cwrites:
                data = store.snapshot()
                if data is not None:
                    self._csnap[store] = data
        if not self._acks:
            if self._csnap:
                self._start_group_commit()
            return
        acks, self._acks = self._acks, []
        if self.before_ack is not None and self.before_ack(acks):
            return
        # Server.publish in-line (one PubAck per stored message): route from the server.
        route = self.server.route
        wait = self.sync_always
        for stream, seq, reply, payload in acks:
            if stream is None:
                if seq < 0:  # a confirmed consumer ack: waits for the batch that writes its state
                    self._sync_wait.append((reply, b"", payload, None))
                elif self._sync_wait:
                    self._sync_wait.append((reply, payload, None, None))
                else:
                    route(None, reply, "", 0, payload)
                continue
            f = failed.get(stream) if failed else None
            if seq < 0:  # send_stored: the reply is made; it reports sequences up to -1 - seq
                out = payload
                if f is not None and (f[0] is None or 0 < f[2] <= -1 - seq):  # one of them was lost
                    out = f[1]
            elif f is not None and (f[0] is None or seq in f[0]):
                out = f[1]
            else:
                out = stream._pub_ack_prefix + b"%d" % seq + payload  # Stream.ack_payload in-line
            if wait and stream.path is not None:
                self._sync_wait.append((reply, out, None, stream))
            elif self._sync_wait:
                self._sync_wait.append((reply, out, None, None))
            else:
                route(None, reply, "", 0, out)
        if self._sync_wait or self._csnap:
            self._start_group_commit()

    # ------------------------------------------------------------------ group commit (sync_always)
    def _start_group_commit(self) -> None:
        if self._syncing or not (self._sync_wait or self._csnap):
            return
        batch, self._sync_wait = self._sync_wait, []
        writes, self._csnap = self._csnap, {}
        streams = [s for s in self._unsynced if not s.closed]
        self._unsynced = {}
        self._syncing = True
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, _commit, [s.store for s in streams], writes)
        self._sync_task = fut
        fut.add_done_callback(lambda f: self._group_done(batch, f))

    def _group_done(self, batch: list[tuple], fut: asyncio.Future) -> None:
        self._syncing = False
        self._sync_task = None
        self.fsyncs += 1
        failed: dict = {}
        if fut.cancelled():
            err: BaseException | None = asyncio.CancelledError()
        else:
            err = fut.exception()
            if err is None:
                err, failed = fut.result()
        self._release(batch, err, failed)
        self.server.flush_pending()
        if (self._sync_wait or self._csnap) and not self.stopped:
            self._start_group_commit()

    def _release(self, batch: list[tuple], err: BaseException | None, failed: dict) -> None:
        """Send the replies a group commit held: PubAcks once their fsync is done, confirmed acks once their
        consumer's state is written."""
        if err is not None:
            self.server.log_error("JetStream fsync failed", error=str(err))
        for store, e in failed.items():
            self.server.log_error("JetStream consumer state write failed, confirmed acks held back",
                                  path=str(store.dir), error=str(e))
            store.dirty = True  # retried with the next change or the server's stop
        publish = self.server.publish
        fsync_failed = ApiError.of("JSStreamStoreFailedF", err=_os_text(err)) if err is not None else None
        for reply, payload, store, stream in batch:
            if store is not None and store in failed:
                continue  # not durable: no confirmation (the client acks again after its timeout)
            if fsync_failed is not None and stream is not None and not payload.startswith(b'{"error"'):
                # Under sync_always a PubAck promises an fsync: when it failed, the publisher is told (10077 with
                # the OS error, as for a failed write) instead of getting a success it cannot count on.
                payload = stream.error_ack(fsync_failed)
            publish(reply, payload)

    # ------------------------------------------------------------------ background sync
    def start(self) -> None:
        if not self.sync_always and self.sync_interval > 0:
            self._bg_timer = self.server.clock.call_later(self.sync_interval, self._bg_tick)

    def _bg_tick(self) -> None:
        self._bg_timer = None
        if self.stopped:
            return
        streams = [s for s in self._unsynced if not s.closed]
        self._unsynced = {}
        if streams and not self._bg_running:
            self._bg_running = True
            fut = asyncio.get_running_loop().run_in_executor(None, _sync_all, [s.store for s in streams])

            def done(f: asyncio.Future) -> None:
                self._bg_running = False
                self.fsyncs += 1
                if not f.cancelled() and f.exception() is not None:
                    self.server.log_error("JetStream background fsync failed", error=str(f.exception()))

            fut.add_done_callback(done)
        self._bg_timer = self.server.clock.call_later(self.sync_interval, self._bg_tick)

    async def stop(self) -> None:
        """Flush, let an in-flight fsync finish and release its acks; write what is left here; stop the timer."""
        self.flush()
        if self._sync_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._sync_task), 10)
            except Exception as e:  # noqa: BLE001 - shutting down: the rest is written synchronously below
                self.server.log_error("JetStream fsync did not finish at shutdown", error=repr(e))
        self.stopped = True
        if self._sync_wait or self._csnap:
            batch, self._sync_wait = self._sync_wait, []
            writes, self._csnap = self._csnap, {}
            err, failed = _commit([s.store for s in self._unsynced if not s.closed], writes)
            self._unsynced = {}
            self._release(batch, err, failed)
        if self._bg_timer is not None:
            self._bg_timer.cancel()
            self._bg_timer = None

    def forget(self, stream: "Stream") -> None:
        self._dirty.pop(stream, None)
        self._unsynced.pop(stream, None)

    def release(self) -> None:
        """After :meth:`stop` and the streams' stops (JetStream.stop): drop every reference to a stream or a
        consumer store.  Nothing is left to write: stop flushed, committed and released what was queued."""
        self._dirty.clear()
        self._unsynced.clear()
        self._acks.clear()
        self._sync_wait.clear()
        self._cwrites.clear()
        self._csnap.clear()


def _sync_all(stores: list) -> None:
    """Runs in a worker thread.  A store deleted meanwhile must not stop the others; the first error is raised."""
    first: BaseException | None = None
    for store in stores:
        try:
            store.sync()
        except Exception as e:
            first = first or e
    if first is not None:
        raise first


def _commit(stores: list, writes: dict) -> tuple[BaseException | None, dict]:
    """One group commit, in a worker thread: fsync the streams, write + fsync the consumer states.

    Returns (the first stream fsync error, {consumer store: error} for the states that could not be written).  A
    store closed meanwhile (consumer or stream deleted, its directory renamed aside) is skipped, not an error."""
    err: BaseException | None = None
    try:
        _sync_all(stores)
    except Exception as e:  # noqa: BLE001 - reported by the caller
        err = e
    failed: dict = {}
    for store, data in writes.items():
        if store.closed:
            continue
        try:
            store.write_snapshot(data, True)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            if not store.closed:
                failed[store] = e
    return err, failed


def _os_text(err: OSError | BaseException) -> str:
    """The OS error as Go prints it (``no space left on device``), not Python's ``[Errno 28] ...``."""
    if isinstance(err, OSError) and err.errno:
        text = os.strerror(err.errno)
        return text[:1].lower() + text[1:]
    return str(err)
