"""Redelivery: the ack timer, backoff, the redelivery queue and max_deliver (nats-server ``checkPending``).

Theory of operation
-------------------
The bookkeeping is the consumer core's (:mod:`.consumer_core`): ``pending`` maps each unacknowledged stream sequence
to ``[consumer seq of the first delivery, last delivery time]``, ``rdc`` counts redeliveries, ``rdq`` is the
redelivery queue.  This module's :class:`AckTimer` is the one clock timer per consumer, never one per message: it fires
at the earliest ack deadline (:meth:`~.consumer_core.ConsumerCore.ack_timeout`: ack_wait or
``backoff[redeliveries]``, plus nats-server's ``ackWaitDelay``), hands the time to
:meth:`~.consumer_core.ConsumerCore.check_pending` and carries out its answer: messages whose deadline passed are
queued for redelivery (delivery serves them before new messages, ignoring ``max_ack_pending``), messages that
reached ``max_deliver`` get the ``MAX_DELIVERIES`` advisory once and their last delivery recorded in the store
(:func:`record_max_delivered`), and the timer is re-armed for the nearest remaining deadline.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from . import consumer_advisories as adv
from .consumer_core import ACK_WAIT_DELAY

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer
    from .consumer_core import MaxDelivered


class AckTimer:
    """The consumer's ack-wait timer: ``timer`` fires at ``end`` (monotonic seconds)."""

    __slots__ = ("c", "timer", "end", "bounded")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.timer = None
        self.end = 0.0
        # Armed no later than one plain ack_wait from when it was armed: then no delivery after that (without
        # backoff) can have an earlier deadline, and watch() needs no clock read.
        self.bounded = False

    def reset(self, delay: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        c = self.c
        clock = c.clock
        self.timer = clock.call_later(delay, self._check_pending)
        self.end = clock.monotonic() + delay
        self.bounded = delay <= c.core.ack_wait / 1e9 + ACK_WAIT_DELAY

    def soon(self, delay: float) -> None:
        """Check sooner than planned (a NAK with a delay, a new ack_wait), if the timer runs at all."""
        if self.timer is not None:
            self.reset(delay)

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def after_restart(self) -> None:
        """Messages were pending when the consumer stopped: check them soon (nats-server: 500ms-1.5s, or sooner
        with a short ack_wait)."""
        delay = 0.5 + random.random()
        core = self.c.core
        if core.ack_wait / 1e9 < delay:
            delay = core.ack_wait / 1e9 + ACK_WAIT_DELAY
        self.reset(delay)

    def watch(self, sseq: int) -> None:
        """``sseq`` was just delivered: make sure the timer fires in time for its ack deadline (trackPending)."""
        if self.bounded and self.timer is not None and not self.c.core.backoff:
            return
        c = self.c
        delay = c.core.ack_timeout(sseq)
        if self.timer is None or self.end > c.clock.monotonic() + delay:
            self.reset(delay)

    def _check_pending(self) -> None:
        self.timer = None
        c = self.c
        if c.closed or not c.config.ack_wait and not c.config.backoff:
            return
        e = c.core.check_pending(c.clock.time_ns(), c.stream.store.first_seq)
        for md in e.maxed:
            record_max_delivered(c, md)
        if e.next_check is not None:
            self.reset(e.next_check)
        else:
            c.cset.maybe_no_pending(c)
        if e.changed:
            c.state.changed()
        # One pass of delivery after the whole check, as nats-server signals its delivery loop from checkPending.
        if e.expired or e.unblocked:
            c.kick()

    def expire_all(self) -> None:
        """Redeliver everything pending now (the deliver subject changed: nats-server updateDeliverSubjectLocked
        forces checkPending)."""
        c = self.c
        expired, maxed = c.core.expire_all(c.clock.time_ns())
        for md in maxed:
            record_max_delivered(c, md)
        if expired:
            self.reset(c.core.ack_wait / 1e9 + ACK_WAIT_DELAY)
        c.kick()


def record_max_delivered(c: "Consumer", md: "MaxDelivered") -> None:
    """A message reached max_deliver (the core took it out of pending): advisory and store."""
    if md.advise:
        adv.max_deliveries(c, md.seq, md.deliveries)
    p = md.entry
    if p is not None:
        c.state.delivered(p[0], md.seq, md.deliveries + 1, p[1])
