"""The consumers of one stream: registry, stream signals, interest/workqueue retention, recovery.

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

Persistence (states written off the loop, metadata in worker threads) is :class:`~.consumer_writes.ConsumerWrites`,
the base of :class:`ConsumerSet`. :func:`recover` reopens every consumer found on disk when the server starts;
ephemerals come back too and clean themselves up after their inactive threshold, as in nats-server.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from skiff.protocol.jsapi.consumer_config import ConsumerConfig

from ..core import gcpolicy
from .consumer import Consumer
from .consumer_writes import ConsumerWrites, open_store

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

STOP_SLICE = 100  # consumers of a deleted stream stopped per loop turn (finish_later)


class ConsumerSet(ConsumerWrites):
    def __init__(self, stream: "Stream") -> None:
        self.stream = stream
        self.server = stream.server
        self.clock = stream.clock
        self.consumers: dict[str, Consumer] = stream.consumers
        self.ready: set[Consumer] = set()
        self._with_pending: set[Consumer] = set()
        self._unfiltered = 0
        self._defaulted: set[str] = set()
        self.gen = 0
        self._init_writes()
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
