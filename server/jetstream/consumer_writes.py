"""A stream's consumers on disk: their states written off the loop, their metadata written in worker threads.

Theory of operation
-------------------
A consumer of a file-backed stream (unless ``mem_storage``) keeps its config and its state in its store
(storage/consumer.py: ``obs/<name>/meta.inf`` and ``o.dat``); nothing here knows the files. State changes mark the
consumer dirty; one clock timer per stream encodes dirty states every :data:`FLUSH_INTERVAL` seconds and a worker
thread writes them, one batch at a time (:meth:`ConsumerSet._flush_slice`; with ``sync_interval: always`` it hands
them to the group commit, which also writes the state of every confirmed ack before confirming it: durability.py,
"Consumer acks"), and stopping the stream writes the rest. A new consumer's ``meta.inf`` is written in a worker thread
before its create answers (:func:`create_files`), and so is the one an update or a pause rewrites
(:meth:`ConsumerSet.write_meta`): one worker job at a time per stream, with every write asked for meanwhile
(:meth:`ConsumerSet._queue_meta`); ``pending`` names the consumers whose write is under way. Recovery reads them
back (stream_consumers.py ``recover``).
"""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.consumer_config import ConsumerConfig
from skiff.storage.consumer import MemoryConsumerStore

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer
    from .stream import Stream

FLUSH_INTERVAL = 0.1  # seconds between writes of dirty consumer states
FLUSH_SLICE = 0.005  # seconds of state encoding (timer) or writing (flush without a loop) per loop turn
META_VERSION = 1


class ConsumerWrites:
    """The writing part of ``ConsumerSet`` (stream_consumers.py), its base: dirty states and metadata writes."""

    def _init_writes(self) -> None:
        self._dirty: set[Consumer] = set()
        self._flush_timer = None
        self._writing = None  # the future of the batch of states a worker thread is writing (_flush_slice)
        # consumer name -> a future done once the meta.inf write in flight for that name is over (and, for a new
        # consumer, once it is registered or refused): a create or update of that name waits for it.
        self.pending: dict[str, asyncio.Future] = {}
        self._meta_todo: list = []  # (future, function, args) of the metadata writes for the next worker job
        self._meta_job = None  # the worker job writing the previous batch

    def dirty(self, c: Consumer) -> None:
        self._dirty.add(c)
        if self._flush_timer is None and not self.stream.closed:
            self._flush_timer = self.clock.call_later(FLUSH_INTERVAL, self._flush_slice)

    def _flush_slice(self) -> None:
        """The timer's flush: the dirty states are encoded on the loop (:data:`FLUSH_SLICE` seconds per turn at
        most) and written in a worker thread, one batch at a time.  Written on the loop, one ``write_atomic`` alone
        could block every other client for tens of milliseconds on a busy disk (stack samples of bench
        scale.admin_stalls while 10,000 consumers were created).  A snapshot older than one written
        since (the final flush of a stop) is dropped by the store (FileConsumerStore.write_snapshot ``seq``)."""
        self._flush_timer = None
        if self._writing is not None:
            return  # the batch in flight schedules the next one (_written)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous unit test)
            loop = None
        if loop is None or self.stream.closed:
            self.flush(budget=FLUSH_SLICE)
            return
        dirty, self._dirty = self._dirty, set()
        durability = self.stream.js.durability
        deadline = time.perf_counter() + FLUSH_SLICE
        batch = []
        todo = iter(dirty)
        for c in todo:
            store = c.store
            if c.closed:
                pass
            elif not c.persistent or (store.durable and not durability.stopped):
                self._write_state(c, durability)  # memory: nothing to write; sync_always: the group commit's
            else:
                data = store.snapshot()
                if data is not None:
                    batch.append((c, store.snaps, data))
            if time.perf_counter() > deadline:
                self._dirty |= set(todo)  # at least one per turn, so a slice always makes progress
                break
        if batch:
            self._writing = loop.run_in_executor(None, _write_states, batch)
            self._writing.add_done_callback(lambda fut: self._written(batch, fut))
        elif self._dirty and not self.stream.closed:
            self._flush_timer = self.clock.call_later(0, self._flush_slice)

    def _written(self, batch: list, fut) -> None:
        self._writing = None
        try:
            failed = fut.result()
        except Exception as e:  # noqa: BLE001 - as a failure of every write of the batch
            failed = [(c, str(e)) for c, _, _ in batch]  # the text: no traceback (and frame) held, as above
        more = bool(self._dirty)
        for c, e in failed:
            if c.closed:
                continue
            self.server.log_error("JetStream consumer state write failed", stream=self.stream.name,
                                  consumer=c.name, error=e)
            c.store.dirty = True  # the next change retries, as a failed write on the loop did
            self._dirty.add(c)
        if more and self._flush_timer is None and not self.stream.closed:
            self._flush_timer = self.clock.call_later(0, self._flush_slice)

    def flush(self, budget: float | None = None) -> None:
        """Write the changed consumer states on this thread (restore, or no loop: the timer writes in a worker
        thread, :meth:`_flush_slice`); with ``budget`` (seconds) stop once it is spent and go on at the next
        loop turn: creating 10,000 consumers marks hundreds dirty per interval, and writing them in one turn
        stalled every other client for 20-60 ms (bench scale.admin_stalls)."""
        self._flush_timer = None
        dirty, self._dirty = self._dirty, set()
        durability = self.stream.js.durability
        deadline = None if budget is None else time.perf_counter() + budget
        todo = iter(dirty)
        for c in todo:
            self._write_state(c, durability)
            if deadline is not None and time.perf_counter() > deadline:
                rest = set(todo)  # at least one written per turn, so a slice always makes progress
                if rest:
                    self._dirty |= rest
                    if not self.stream.closed:
                        self._flush_timer = self.clock.call_later(0, self._flush_slice)
                return

    def _write_state(self, c: Consumer, durability) -> None:
        if c.closed:
            return
        if c.store.durable and not durability.stopped:
            # sync_interval: always - written and fsynced by the group commit, off the loop (durability.py)
            durability.consumer_write(c.store)
            return
        try:
            c.store.flush()
        except Exception as e:  # noqa: BLE001 - keep serving; the next change retries
            self.server.log_error("JetStream consumer state write failed", stream=self.stream.name,
                                  consumer=c.name, error=str(e))
            self._dirty.add(c)

    def write_meta(self, c: Consumer) -> "asyncio.Future | None":
        """Rewrite the metadata of an existing consumer (update, pause) in a worker thread; the future of the
        write, or None when there is nothing to wait for (a consumer in memory, or no loop: written here).  The
        document is built now, on the loop, from the config just changed.  The caller answers once the future is
        done (:func:`when_written`), so an acknowledged update survives kill -9 as one written on the loop did.
        The callers are API handlers with ``stream_scope`` (api.py): a request on the stream other than a create
        or update waits for the write, and those wait for ``pending`` of their consumer, so two writes of one
        ``meta.inf`` never overlap.  A new consumer's metadata is written by :meth:`create_files`."""
        if not c.persistent:
            return None
        # As nats-server writeConsumerMeta: fsync only with sync_always (the store's ``durable`` flag).
        doc = meta_doc(c.config, c.created)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous unit test)
            c.store.write_meta(doc)
            return None
        # On a loaded disk one atomic rewrite (temp file, rename, and with sync_always two fsyncs) blocked every
        # client for tens of milliseconds (issue #13).
        fut = self._queue_meta(c.store.write_meta, doc)
        name = c.name
        self.pending[name] = fut
        fut.add_done_callback(lambda f: self.pending.pop(name) if self.pending.get(name) is f else None)
        return fut

    def create_files(self, name: str, cfg: ConsumerConfig, doc: dict) -> "asyncio.Future":
        """The future of new consumer ``name``'s store, opened and its first ``meta.inf`` written in a worker thread
        (:func:`create_files`).  The caller keeps ``pending[name]`` until it registered the consumer or gave up."""
        return self._queue_meta(create_files, self.stream, name, cfg, doc)

    def _queue_meta(self, fn, *args) -> "asyncio.Future":
        """Run ``fn(*args)`` with the next batch of metadata writes.  One worker job at a time writes every
        write asked for while the previous one ran (a group commit, as durability.py does for fsyncs): each job
        waits for a worker thread to get the interpreter (up to the 5 ms switch interval while the loop is busy),
        and one job per write capped consumer creates at about 250 a second (bench scale.consumers)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._meta_todo.append((fut, fn, args))
        if self._meta_job is None:
            self._start_meta_job(loop)
        return fut

    def _start_meta_job(self, loop) -> None:
        batch, self._meta_todo = self._meta_todo, []
        self._meta_job = loop.run_in_executor(None, _run_meta_batch, [(fn, args) for _, fn, args in batch])
        self._meta_job.add_done_callback(lambda f: self._meta_done(loop, batch, f))

    def _meta_done(self, loop, batch: list, job) -> None:
        self._meta_job = None
        try:
            results = job.result()
        except BaseException as e:  # noqa: BLE001 - the job never ran (executor shut down): every write failed
            results = [(False, e.with_traceback(None))] * len(batch)  # no frame held (see _run_meta_batch)
        for (fut, _, _), (ok, value) in zip(batch, results):
            if fut.done():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)
        if self._meta_todo:
            self._start_meta_job(loop)


def _run_meta_batch(items: list) -> list:
    """Worker thread: run each metadata write of a batch; ``(True, result)`` or ``(False, exception)`` each."""
    out = []
    for fn, args in items:
        try:
            out.append((True, fn(*args)))
        except Exception as e:  # noqa: BLE001 - handed to the write's own future
            # Without its traceback: that holds this frame, whose locals hold ``out`` and ``items`` (streams,
            # stores), a cycle only a collection frees (the collector is off for long stretches: gcpolicy.py).
            out.append((False, e.with_traceback(None)))
    return out


def _write_states(batch: list) -> list:
    """Worker thread: write ``(consumer, snapshot number, encoded state)`` items; the (consumer, error) of those that
    failed while their consumer is still open (a deleted one's directory is gone: nothing to write, and nothing is
    recreated, see FileConsumerStore.write_snapshot)."""
    failed = []
    for c, seq, data in batch:
        store = c.store
        try:
            store.write_snapshot(data, store.durable, seq)
        except Exception as e:  # noqa: BLE001 - reported on the loop
            if not store.closed:
                # The text, not the exception: its traceback holds this frame, whose locals hold ``failed`` and
                # ``batch``, a cycle that kept the batch's consumers alive until a collection (the collector is
                # off for long stretches: server/core/gcpolicy.py).
                failed.append((c, str(e)))
    return failed


def open_store(stream: "Stream", name: str, cfg: ConsumerConfig):
    """The state store of consumer ``name``: in memory for memory streams and ``mem_storage``, else on disk."""
    if stream.path is None or cfg.mem_storage:
        return MemoryConsumerStore(cfg.ack_policy, cfg.max_deliver)
    return stream.store.consumer_store(name, cfg.ack_policy, cfg.max_deliver)


def meta_doc(config: ConsumerConfig, created: int) -> dict:
    """A consumer's ``meta.inf`` document (built on the loop, where the config is changed)."""
    return {"v": META_VERSION, "config": config.to_json(), "created": created}


async def when_written(written: "asyncio.Future", c: Consumer, reply):
    """The reply of a request that rewrote ``c``'s metadata (:meth:`ConsumerSet.write_meta`), once the write is
    done: ``reply()``, or 10014 when the consumer or its stream went away meanwhile outside the API (shutdown,
    account removal: its directory is gone and the write failed, or it was no longer needed).  Another failure of
    the write is raised to the router (logged and answered as any handler failure, api.py ``_outcome``)."""
    try:
        await written
    except FileNotFoundError:
        if not c.closed:
            raise
    if c.closed:
        return ApiError.of("JSConsumerNotFoundErr")
    return reply()


def create_files(stream: "Stream", name: str, cfg: ConsumerConfig, doc: dict):
    """Worker thread: open the file store of new consumer ``name`` and write its first ``meta.inf`` (``doc``, from
    :func:`meta_doc`); returns the store.  On a loaded disk these stats, mkdirs and the atomic write blocked the loop
    for 150-880 ms over 10,000 creates (bench scale.admin_stalls); the API router holds the later requests on the
    stream until the create answers (api.py ``stream_scope``; creates and updates of other consumers join, see
    ``ConsumerSet.pending``), so creates, updates and deletes stay in order.  The store never recreates a deleted
    stream's directory (FileConsumerStore.create_meta)."""
    store = open_store(stream, name, cfg)
    store.create_meta(doc)
    return store
