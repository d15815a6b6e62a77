"""The consumers of one stream: registry, stream signals, interest/workqueue retention, persistence, recovery.

Theory of operation
-------------------
:class:`ConsumerSet` is attached to a :class:`~.stream.Stream` the first time it gets a consumer (created or recovered)
and plugs into the stream's hooks: ``consumers`` (name -> Consumer, which ``consumer_count`` reads),
``on_new_message``, ``on_removed``, ``on_purged``, ``on_deleted``, ``on_stopped`` and ``interest``.

Per published message it does work only for *ready* consumers (a waiting pull request, an active push subscriber,
below max_ack_pending - see ``Delivery.update_ready``, delivery.py): they get their pending count bumped and are kicked.  10,000
idle consumers therefore cost nothing per publish.  Per removed message it touches only consumers holding
unacknowledged messages (``_with_pending``) plus the ready ones; every other consumer's cached pending count is
invalidated at once by bumping ``gen``.

Retention (nats-server ``ackMsg`` / ``needAck`` / ``checkInterestState``): on interest and workqueue streams an ack
(or a delivery, for ack none) asks every consumer whether it still needs the message; when none does, the message is
removed.  At publish, an interest stream stores a message only if some consumer's filter matches its subject.

Persistence: a consumer of a file-backed stream (unless ``mem_storage``) keeps its config and its state in its store
(storage/consumer.py: ``obs/<name>/meta.inf`` and ``o.dat``); nothing here knows the files. State changes mark the
consumer dirty; one clock timer per stream encodes dirty states every :data:`FLUSH_INTERVAL` seconds and a worker
thread writes them, one batch at a time (:meth:`ConsumerSet._flush_slice`; with ``sync_interval: always`` it hands
them to the group commit, which also writes the state of every confirmed ack before confirming it: durability.py,
"Consumer acks"), and stopping the stream writes the rest. A new consumer's ``meta.inf`` is written in a worker thread
before its create answers (:func:`create_files`), and so is the one an update or a pause rewrites
(:meth:`ConsumerSet.write_meta`): one worker job at a time per stream, with every write asked for meanwhile
(:meth:`ConsumerSet._queue_meta`); ``pending`` names the consumers whose write is under way. :func:`recover` reopens every consumer found there when the server
starts; ephemerals come back too and clean themselves up after their inactive threshold, as in nats-server.
"""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.consumer_config import ConsumerConfig
from skiff.storage.consumer import MemoryConsumerStore

from ..core import gcpolicy
from .consumer import Consumer

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

FLUSH_INTERVAL = 0.1  # seconds between writes of dirty consumer states
FLUSH_SLICE = 0.005  # seconds of state encoding (timer) or writing (flush without a loop) per loop turn
STOP_SLICE = 100  # consumers of a deleted stream stopped per loop turn (finish_later)
META_VERSION = 1


class ConsumerSet:
    def __init__(self, stream: "Stream") -> None:
        self.stream = stream
        self.server = stream.server
        self.clock = stream.clock
        self.consumers: dict[str, Consumer] = stream.consumers
        self.ready: set[Consumer] = set()
        self._with_pending: set[Consumer] = set()
        self._dirty: set[Consumer] = set()
        self._flush_timer = None
        self._writing = None  # the future of the batch of states a worker thread is writing (_flush_slice)
        self._unfiltered = 0
        self._defaulted: set[str] = set()
        self.gen = 0
        # consumer name -> a future done once the meta.inf write in flight for that name is over (and, for a new
        # consumer, once it is registered or refused): a create or update of that name waits for it.
        self.pending: dict[str, asyncio.Future] = {}
        self._meta_todo: list = []  # (future, function, args) of the metadata writes for the next worker job
        self._meta_job = None  # the worker job writing the previous batch
        stream.on_new_message.append(self._new_message)
        stream.on_removed.append(self._removed)
        stream.on_purged.append(self._purged)
        stream.on_deleted.append(self._stream_deleted)
        if hasattr(stream, "on_stopped"):
            stream.on_stopped.append(self._stream_stopped)
        stream.interest = self._interest

    # ------------------------------------------------------------------ registry
    def add(self, c: Consumer) -> None:
        self.consumers[c.name] = c
        gcpolicy.created()  # a long-lived object: frozen out of the collector's passes after bulk creations
        if not c.filters:
            self._unfiltered += 1

    def forget(self, c: Consumer) -> None:
        if self.consumers.get(c.name) is c:
            del self.consumers[c.name]
            if not c.filters:
                self._unfiltered -= 1
        self.ready.discard(c)
        self._with_pending.discard(c)
        self._dirty.discard(c)
        self._defaulted.discard(c.name)

    def filters_changed(self, c: Consumer) -> None:
        self._unfiltered = sum(1 for x in self.consumers.values() if not x.filters)

    def mark_defaulted_threshold(self, name: str) -> None:
        self._defaulted.add(name)

    def defaulted_threshold(self, c: Consumer) -> bool:
        return c.name in self._defaulted

    def set_ready(self, c: Consumer, ready: bool) -> None:
        if ready:
            self.ready.add(c)
        else:
            self.ready.discard(c)

    def has_pending(self, c: Consumer) -> None:
        self._with_pending.add(c)

    def maybe_no_pending(self, c: Consumer) -> None:
        if not c.core.has_outstanding():
            self._with_pending.discard(c)

    def delete_consumer(self, c: Consumer) -> None:
        """Delete (API delete or inactivity): advisory, 409 to waiting pulls, store removed, retention cleanup."""
        c.stop(delete=True, advisory=True)
        if self.stream.config.retention == "interest":
            self.cleanup_no_interest()

    # ------------------------------------------------------------------ persistence
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

    # ------------------------------------------------------------------ stream signals
    def _new_message(self, seq: int, subject: str) -> None:
        if not self.ready:
            return
        for c in list(self.ready):
            c.stream_appended(seq, subject)

    def _removed(self, seq: int, subject: str) -> None:
        gen = self.gen
        self.gen = gen + 1
        # Ready consumers keep their pending counts exact; the others just recompute when asked.
        for c in self.ready:
            c.stream_removed_count(seq, subject, gen, gen + 1)
        if not self._with_pending:
            return
        for c in list(self._with_pending):
            c.message_removed(seq)

    def _purged(self) -> None:
        self.gen += 1
        store = self.stream.store
        first = store.first_seq
        for c in list(self.consumers.values()):
            c.purged(first)

    def _stream_deleted(self) -> None:
        # No file work per consumer: the stream's directory (obs/ included) was renamed aside before this runs
        # and is removed in a worker thread (JetStream.delete_stream).  A few consumers are stopped now; many are
        # halted now (nothing reaches them any more) and finished a slice per loop turn: stopping 1,000 at once held
        # every other client 40-100 ms at load 8-12 (tests/jetstream/test_stream_delete.py).
        files = self.stream.path is None
        stopped = list(self.consumers.values())
        if len(stopped) <= STOP_SLICE:
            for c in stopped:
                c.stop(delete=True, advisory=True, remove_files=files)
            return
        for c in stopped:
            c.halt()
        finish_later(stopped, files)

    def _stream_stopped(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        for c in list(self.consumers.values()):
            c.stop(delete=False)

    # ------------------------------------------------------------------ retention
    def _interest(self, subject: str) -> bool:
        if self._unfiltered:
            return True
        return any(c.matches(subject) for c in self.consumers.values())

    def ack_msg(self, seq: int) -> bool:
        """nats-server stream.ackMsg: remove ``seq`` from an interest/workqueue stream once nobody needs it."""
        stream = self.stream
        if stream.closed or stream.config.retention == "limits" or seq == 0:
            return False
        store = stream.store
        if seq > store.last_seq or seq < store.first_seq:
            return False
        subject = store.subject_for_seq(seq)
        if subject is None:
            return False
        for c in self.consumers.values():
            if c.need_ack(seq, subject):
                return False
        stream.remove_msg(seq)
        return True

    def cleanup_no_interest(self) -> None:
        """After a consumer left an interest stream: drop the messages nobody needs any more (nats-server
        cleanupNoInterestMessages, simplified to a walk from the first sequence up to the last)."""
        stream = self.stream
        store = stream.store
        if stream.closed or stream.config.retention != "interest":
            return
        if not self.consumers:
            if store.msgs:
                stream.purge()
            return
        seq = store.first_seq
        while True:
            sm, _ = store.load_next_msg("", seq)
            if sm is None:
                break
            if not any(c.need_ack(sm.seq, sm.subject) for c in self.consumers.values()):
                stream.remove_msg(sm.seq)
            seq = sm.seq + 1


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


def finish_later(halted: list[Consumer], remove_files: bool) -> None:
    """Finish the deletes of ``halted`` consumers (``Consumer.finish_delete``) and let go of them, :data:`STOP_SLICE`
    per loop turn.  This list holds the last references: a stopped consumer is freed by reference counting
    (consumer.py ``_unlink_parts``), which for 1,000 consumers took as long as their stops (5-16 ms at load 10)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop (a synchronous unit test): all at once
        loop = None

    def step() -> None:
        batch = halted[-STOP_SLICE:]
        del halted[-STOP_SLICE:]
        for c in batch:
            c.finish_delete(remove_files)
        del batch
        if halted and loop is not None:
            loop.call_soon(step)

    if loop is None:
        while halted:
            step()
    else:
        loop.call_soon(step)


def consumer_set(stream: "Stream") -> ConsumerSet:
    cs = getattr(stream, "_consumer_set", None)
    if cs is None:
        cs = ConsumerSet(stream)
        stream._consumer_set = cs  # type: ignore[attr-defined]
    return cs


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


def recover(stream: "Stream") -> None:
    """Reopen the consumers stored under ``<stream dir>/obs/`` (server start)."""
    if stream.path is None:
        return
    srv = stream.server
    left, found = stream.store.stored_consumers()
    if left:
        srv.log_warning("JetStream removed consumer directories left by an interrupted delete", stream=stream.name,
                        count=left)
    for name, doc, err in found:
        try:
            if err is not None:
                raise err
            cfg = ConsumerConfig.from_json(doc["config"], strict=False)
            created = int(doc.get("created") or 0)
        except FileNotFoundError:
            srv.log_warning("JetStream consumer directory without metadata, skipped", stream=stream.name,
                            consumer=name)
            continue
        except Exception as e:  # noqa: BLE001 - one bad consumer never stops the server
            srv.log_error("JETSTREAM CONSUMER COULD NOT BE RECOVERED, SKIPPED", stream=stream.name, consumer=name,
                          error=f"{type(e).__name__}: {e}")
            continue
        cs = consumer_set(stream)
        try:
            store = open_store(stream, name, cfg)
            c = Consumer(cs, cfg, name, created, store)
            cs.add(c)
            c.start(has_state=store.dc != 0 or store.ds != 0)
            c.kick()
        except Exception as e:  # noqa: BLE001
            srv.log_error("JETSTREAM CONSUMER COULD NOT BE RECOVERED, SKIPPED", stream=stream.name, consumer=name,
                          error=f"{type(e).__name__}: {e}")
            cs.consumers.pop(name, None)
            continue
        srv.log.info("Restored consumer", stream=stream.name, consumer=name)
