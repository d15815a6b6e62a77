"""Redelivery: the ack timer, backoff, the redelivery queue and max_deliver (nats-server ``checkPending``).

Theory of operation
-------------------
The bookkeeping is the consumer core's (:mod:`.consumer_core`): ``pending`` maps each unacknowledged stream sequence
to ``[consumer seq of the first delivery, last delivery time]``, ``rdc`` counts redeliveries, ``rdq`` is the
redelivery queue.  This module owns the one clock timer per consumer (``_ptmr``), never one per message: it fires
at the earliest ack deadline (:meth:`~.consumer_core.ConsumerCore.ack_timeout`: ack_wait or
``backoff[redeliveries]``, plus nats-server's ``ackWaitDelay``), hands the time to
:meth:`~.consumer_core.ConsumerCore.check_pending` and carries out its answer: messages whose deadline passed are
queued for redelivery (delivery serves them before new messages, ignoring ``max_ack_pending``), messages that
reached ``max_deliver`` get the ``MAX_DELIVERIES`` advisory once and their last delivery recorded in the store
(:meth:`RedeliveryMixin._max_delivered`), and the timer is re-armed for the nearest remaining deadline.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import consumer_advisories as adv
from .consumer_core import ACK_WAIT_DELAY

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer
    from .consumer_core import MaxDelivered


class RedeliveryMixin:
    """Redelivery half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    def _ack_wait(self: "Consumer", nxt_ns: int = 0) -> float:
        """Seconds to wait for an ack: ``nxt_ns`` (a backoff value) if positive, else ack_wait, plus ackWaitDelay."""
        return (nxt_ns if nxt_ns > 0 else self.core.ack_wait) / 1e9 + ACK_WAIT_DELAY

    def _reset_ptmr(self: "Consumer", delay: float) -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
        self._ptmr = self.clock.call_later(delay, self._check_pending)
        self._ptmr_end = self.clock.monotonic() + delay

    def _stop_ptmr(self: "Consumer") -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
            self._ptmr = None

    def _watch_ack(self: "Consumer", sseq: int) -> None:
        """``sseq`` was just delivered: make sure the timer fires in time for its ack deadline (trackPending)."""
        delay = self.core.ack_timeout(sseq)
        if self._ptmr is None or self._ptmr_end > self.clock.monotonic() + delay:
            self._reset_ptmr(delay)

    def _check_pending(self: "Consumer") -> None:
        self._ptmr = None
        if self.closed or not self.config.ack_wait and not self.config.backoff:
            return
        e = self.core.check_pending(self.clock.time_ns(), self.stream.store.first_seq)
        for md in e.maxed:
            self._max_delivered(md)
        if e.next_check is not None:
            self._reset_ptmr(e.next_check)
        else:
            self.cset.maybe_no_pending(self)
        if e.changed:
            self._state_changed()
        # One pass of delivery after the whole check, as nats-server signals its delivery loop from checkPending.
        if e.expired or e.unblocked:
            self.kick()

    def _max_delivered(self: "Consumer", md: "MaxDelivered") -> None:
        """A message reached max_deliver (the core took it out of pending): advisory and store."""
        if md.advise:
            adv.max_deliveries(self, md.seq, md.deliveries)
        p = md.entry
        if p is not None:
            self.store.update_delivered(p[0], md.seq, md.deliveries + 1, p[1])
            self._state_changed()

    def _force_expire_pending(self: "Consumer") -> None:
        expired, maxed = self.core.expire_all(self.clock.time_ns())
        for md in maxed:
            self._max_delivered(md)
        if expired:
            self._reset_ptmr(self._ack_wait(0))
        self.kick()
