"""When a PubAck may leave: after the store handed the message to the OS, and after fsync with ``sync_always``.

Theory of operation
-------------------
Publishing never awaits (DESIGN.md).  :meth:`Durability.stored` records that a stream appended a message and, if
the publisher wants an ack, queues ``(stream, seq, reply)``; :meth:`send` queues a ready-made reply (error acks,
duplicate acks) behind the acks already waiting, so one client's acks keep their order.  Both set
``engine.has_pending``; the server calls :meth:`JetStream.flush` -> :meth:`flush` once per read (``flush_pending``
before client output is written), and a ``call_soon`` covers publishes that did not come from a client read
(timers, internal publishes).

``flush``:

1. ``store.flush()`` for every stream written since the last flush: one ``write`` per block file for all the
   appends of this loop turn.  A ``StoreWriteError`` (disk full, EIO) means the store rolled back to what is on
   disk; the publishes it names get the error ack nats-server uses for store failures, 10077
   ``JSStreamStoreFailedF`` with the OS error text, and everything stored earlier stays.
2. Without ``sync_always`` the acks are published now: the data survives ``kill -9`` of the process.  A background
   timer fsyncs dirty file stores every ``sync_interval`` in a worker thread.
3. With ``sync_always`` the acks of file streams wait for an fsync run in a worker thread
   (``loop.run_in_executor(None, store.sync)``).  Group commit: while one fsync is running, later acks collect in
   the next batch; when it completes its batch is released and one fsync starts for everything collected since.
   So every ack follows an fsync that began after its message was written, and N concurrent publishers cost about
   one fsync per round trip instead of N.
"""
from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from protocol.errors import ApiError
from storage.errors import StoreWriteError

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream
    from .stream import Stream


class Durability:
    def __init__(self, js: "JetStream", *, sync_always: bool, sync_interval: float) -> None:
        self.js = js
        self.server = js.server
        self.sync_always = sync_always
        self.sync_interval = sync_interval
        # (stream, seq, reply, ack tail): "ack seq of stream once durable"; (None, 0, reply, payload): send as is.
        self._acks: list[tuple] = []
        self._dirty: dict["Stream", None] = {}
        self._unsynced: dict["Stream", None] = {}
        self._sync_wait: list[tuple[str, bytes]] = []
        self._syncing = False
        self._sync_task: asyncio.Future | None = None
        self._bg_timer = None
        self._bg_running = False
        self._soon = False
        self.stopped = False
        self.fsyncs = 0

    # ------------------------------------------------------------------ producers
    def stored(self, stream: "Stream", seq: int, reply: str, tail: bytes = b"}") -> None:
        """``tail`` ends the ack JSON after the sequence (counter streams add ``,"val":".."``)."""
        self._dirty[stream] = None
        if reply:
            self._acks.append((stream, seq, reply, tail))
        self._pending()

    def dirty(self, stream: "Stream") -> None:
        self._dirty[stream] = None
        self._pending()

    def send(self, reply: str, payload: bytes) -> None:
        """A reply that needs no durability (error or duplicate ack), kept in order with the queued acks."""
        if not self._acks and not self.js.has_pending:
            self.server.publish(reply, payload)
            return
        self._acks.append((None, 0, reply, payload))
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
        self.js.has_pending = False
        failed: dict["Stream", tuple[set[int] | None, bytes]] = {}  # None: every ack of that stream failed
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
                    failed[stream] = (set(e.seqs), stream.error_ack(err))
                except Exception as e:  # a store bug must not take the server down; nothing of it is acked
                    self.server.log_error("JetStream flush failed", stream=stream.name, error=repr(e))
                    failed[stream] = (None, stream.error_ack(ApiError.of("JSStreamStoreFailedF", err=str(e))))
                if stream.path is not None:
                    self._unsynced[stream] = None
        if not self._acks:
            return
        acks, self._acks = self._acks, []
        publish = self.server.publish
        wait = self.sync_always
        for stream, seq, reply, payload in acks:
            if stream is None:
                if self._sync_wait:
                    self._sync_wait.append((reply, payload))
                else:
                    publish(reply, payload)
                continue
            f = failed.get(stream)
            if f is not None and (f[0] is None or seq in f[0]):
                out = f[1]
            else:
                out = stream.ack_payload(seq, payload)
            if wait and stream.path is not None:
                self._sync_wait.append((reply, out))
            elif self._sync_wait:
                self._sync_wait.append((reply, out))
            else:
                publish(reply, out)
        if self._sync_wait:
            self._start_group_commit()

    # ------------------------------------------------------------------ group commit (sync_always)
    def _start_group_commit(self) -> None:
        if self._syncing or not self._sync_wait:
            return
        batch, self._sync_wait = self._sync_wait, []
        streams = [s for s in self._unsynced if not s.closed]
        self._unsynced = {}
        self._syncing = True
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, _sync_all, [s.store for s in streams])
        self._sync_task = fut
        fut.add_done_callback(lambda f: self._group_done(batch, f))

    def _group_done(self, batch: list[tuple[str, bytes]], fut: asyncio.Future) -> None:
        self._syncing = False
        self._sync_task = None
        self.fsyncs += 1
        err = None if fut.cancelled() else fut.exception()
        if err is not None:
            self.server.log_error("JetStream fsync failed", error=str(err))
        publish = self.server.publish
        for reply, payload in batch:
            publish(reply, payload)
        self.server.flush_pending()
        if self._sync_wait and not self.stopped:
            self._start_group_commit()

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
        """Flush, let an in-flight fsync finish and release its acks; stop the timer."""
        self.flush()
        if self._sync_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._sync_task), 10)
            except Exception:
                pass
        self.stopped = True
        if self._sync_wait:
            batch, self._sync_wait = self._sync_wait, []
            for s in list(self._unsynced):
                try:
                    s.store.sync()
                except Exception:
                    pass
            for reply, payload in batch:
                self.server.publish(reply, payload)
        if self._bg_timer is not None:
            self._bg_timer.cancel()
            self._bg_timer = None

    def forget(self, stream: "Stream") -> None:
        self._dirty.pop(stream, None)
        self._unsynced.pop(stream, None)


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


def _os_text(err: OSError | BaseException) -> str:
    """The OS error as Go prints it (``no space left on device``), not Python's ``[Errno 28] ...``."""
    if isinstance(err, OSError) and err.errno:
        text = os.strerror(err.errno)
        return text[:1].lower() + text[1:]
    return str(err)
