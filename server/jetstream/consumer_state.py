"""Recording a consumer's state: what the core decided goes to the ``ConsumerStore``, and the store reaches the disk.

Theory of operation
-------------------
The consumer's bookkeeping is its :class:`~.consumer_core.ConsumerCore`; the ``ConsumerStore``
(``storage/consumer.py``) is what consumer info reports and what a restart reads back.  :class:`StateRecorder` is
the one place where the consumer writes to that store: each outcome of the core (a delivery, an ack, a NAK's new
deadline, a message that reached max_deliver, a reset) becomes the store's own nats-server transition
(``update_delivered`` / ``update_acks``, consumerMemStore.UpdateDelivered / UpdateAcks), and the consumer is marked
dirty with its stream's :class:`~.stream_consumers.ConsumerSet` (consumer_writes.py), which writes dirty file stores every 100 ms, with
``sync_interval: always`` through the group commit (durability.py, "Consumer acks").

A store that refuses an update (a store bug, or a state it thinks impossible) must never stop delivery or the ack
path: the failure is logged loudly and, once the operation in progress is complete, the store is rewritten from the
core's own view (:meth:`StateRecorder.write_all`, as after a purge), so that info and a restart do not drift from
what clients saw.  ``tests/jetstream/test_consumer_state_faults.py`` injects such refusals.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from skiff.storage.records import ConsumerState, Pending, SequencePair

if TYPE_CHECKING:  # pragma: no cover
    from skiff.storage.base import ConsumerStore

    from .consumer import Consumer


class StateRecorder:
    """The consumer's writes to its ``ConsumerStore`` (``store``), and the dirty mark that gets them to disk."""

    __slots__ = ("c", "store", "persistent")

    def __init__(self, c: "Consumer", store: "ConsumerStore", persistent: bool) -> None:
        self.c = c
        self.store = store
        self.persistent = persistent  # a file store: changes are flushed by the stream's ConsumerSet

    def changed(self) -> None:
        if self.persistent:
            self.c.cset.dirty(self.c)

    def delivered(self, dseq: int, sseq: int, dc: int, ts: int) -> None:
        """A delivery (or a pending message's new deadline: NAK with a delay, +WPI, max_deliver reached)."""
        try:
            self.store.update_delivered(dseq, sseq, dc, ts)
        except Exception as e:  # noqa: BLE001 - a store refusing an update must never stop delivery
            self._failed("deliver", e)
        if self.persistent:
            self.c.cset.dirty(self.c)

    def delivered_run(self, dseq: int, msgs: list) -> None:
        """First deliveries of the stored messages ``msgs`` (in stream order) with delivery sequences ``dseq``,
        ``dseq + 1``, ...: :meth:`delivered` for each, in one store call (delivery.py ``_send_run``)."""
        try:
            self.store.update_delivered_run(dseq, msgs)
        except Exception as e:  # noqa: BLE001 - a store refusing an update must never stop delivery
            self._failed("deliver", e)
        if self.persistent:
            self.c.cset.dirty(self.c)

    def acked(self, dseq: int, sseq: int, op: str = "ack") -> None:
        """An ack (``dseq`` 0: a redelivered message left the stream, only its count goes)."""
        try:
            self.store.update_acks(dseq, sseq)
        except Exception as e:  # noqa: BLE001 - a store refusing an ack must never break the ack path
            self._failed(op, e)
        if self.persistent:
            self.c.cset.dirty(self.c)

    def reset(self, seq: int) -> None:
        """CONSUMER.RESET: delivered = ack floor = ``seq - 1`` (consumerFileStore.Reset / SetStarting)."""
        self.store.set_state(ConsumerState(SequencePair(0, seq - 1), SequencePair(0, seq - 1)), force=True)
        self.c.cset.dirty(self.c)

    def starting(self, sseq: int) -> None:
        """A new consumer's start position (file stores keep it: nats-server SetStarting)."""
        set_starting = getattr(self.store, "set_starting", None)
        if set_starting is not None:
            set_starting(sseq)
            self.changed()

    def write_all(self) -> None:
        """Write the core's whole view to the store (nats-server writeStoreState, after a purge)."""
        c = self.c
        core = c.core
        state = ConsumerState(SequencePair(core.dseq - 1, core.sseq - 1), SequencePair(core.adflr, core.asflr),
                              {s: Pending(p[0], p[1]) for s, p in core.pending.items()}, dict(core.rdc))
        try:
            self.store.set_state(state, force=True)
        except ValueError as e:  # the store refuses a state it thinks impossible (storage/consumer.py set_state)
            c.server.log_warning("JetStream consumer state not written", stream=c.stream.name, consumer=c.name,
                                 error=str(e))
        self.changed()

    def confirm_ack(self, reply: str) -> None:
        """Answer an ack.  With ``sync_interval: always`` only once the state holding it is fsynced
        (durability.py, "Consumer acks", says what each sync_interval guarantees)."""
        c = self.c
        if self.persistent and self.store.durable:
            c.stream.js.durability.consumer_ack(self.store, reply)
        else:
            c.server.publish(reply, b"")

    def close(self, delete: bool, remove_files: bool) -> None:
        """Stop: flush and close, or remove the state (``remove_files`` False: the stream's directory, with every
        consumer's, was already renamed aside in one step, persist.py)."""
        c = self.c
        try:
            if delete:
                if remove_files:
                    self.store.delete()
                else:
                    self.store.discard()
            else:
                self.store.flush()
                self.store.stop()
        except OSError as e:  # a failing disk must not break a shutdown or a delete
            c.server.log_error("JetStream consumer store close failed", stream=c.stream.name, consumer=c.name,
                               error=str(e))

    def _failed(self, op: str, err: Exception) -> None:
        c = self.c
        c.server.log_error("JetStream consumer state update failed, rewriting the state", stream=c.stream.name,
                           consumer=c.name, op=op, error=f"{type(err).__name__}: {err}")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous unit test)
            self._resync()
            return
        loop.call_soon(self._resync, self.c)  # the consumer itself, kept until then (Consumer._unlink_parts)

    def _resync(self, c: "Consumer | None" = None) -> None:
        if not (c or self.c).closed:
            self.write_all()
