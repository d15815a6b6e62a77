"""The consumer's bookkeeping, with no I/O: pending, the ack floor, redelivery and max_deliver (nats-server
``consumer.go``: ``trackPending``, ``processAckMsg``, ``processNak``, ``checkPending``, ``hasMaxDeliveries``,
``getNextMsg``'s redelivery half).

Theory of operation
-------------------
:class:`ConsumerCore` is a plain object in the way of h11: no sockets, no clock, no store, no asyncio.  Its methods
are the events that change a consumer's delivery state, the time is an argument, and what they return says what
the caller (:class:`~.consumer.Consumer` and its delivery, ack and redelivery halves) has to do about it: write the
store, send an advisory, arm the ack timer, run delivery.  Every change of the ack floor happens in this file.

State (nats-server's names; ``docs/architecture.md`` has the glossary):

``sseq`` / ``dseq``
    the next stream sequence to look at and the next delivery (consumer) sequence to hand out.
``adflr`` / ``asflr``
    the ack floor: every delivery up to ``adflr`` (stream sequence ``asflr``) is acknowledged or given up on.
``pending``
    stream sequence -> ``[delivery sequence of the first delivery, time of the last delivery in ns]``, in stream
    sequence order (its first key is the lowest outstanding message: the ack floor moves in O(1)).
``rdc``
    stream sequence -> times redelivered (the delivery count minus one).
``rdq``
    the redelivery queue: an insertion-ordered dict used as an ordered set, served before new messages.

Events and their outcomes:

====================================  ==========================================================================
:meth:`deliver` (sseq, now)           the delivery sequence it got; pending (or, with ``ack_policy: none``, the
                                      ack floor) records it
:meth:`ack` (sseq, dseq)              ``None`` (ignored), :data:`ALREADY` (ack all below the floor), or an
                                      :class:`Acked`: the sequences that left pending, whether the consumer was
                                      at ``max_ack_pending`` (delivery may resume), the pending entry
:meth:`nak` (sseq, dseq, delay, now)  :data:`NAK_IGNORED`, :data:`NAK_QUEUED` (redeliver next) or
                                      :data:`NAK_DELAYED` (redeliver ``delay`` from now: the entry's time moves)
:meth:`progress` (sseq, now)          the pending entry whose ack timer restarted, or None
:meth:`check_pending` (now, first)    an :class:`Expiry`: the sequences queued for redelivery, those that hit
                                      ``max_deliver`` (:class:`MaxDelivered`, with whether the advisory is due),
                                      the delay of the next check (None: nothing pending)
:meth:`take_redelivery`               the next queued redelivery with its delivery count, or the
                                      :class:`MaxDelivered` it turned into
:meth:`purged` (first, gone, ...)     whether the state changed; messages gone from the stream leave pending
====================================  ==========================================================================

Acks move the floor as nats-server's ``processAckMsg`` does: an explicit ack of the delivery just above the floor
moves it up to just below the next outstanding delivery; with nothing outstanding the floor is the last delivery;
an ``ack_policy: all`` ack moves it to the acked message and drops everything below.  A message that reaches
``max_deliver`` leaves pending as if acked (the floor moves the same way) and keeps its count in ``rdc`` so that
consumer info still reports it redelivered.

The ack timer is one per consumer (the caller's): :meth:`ack_timeout` is how long to wait for one delivery
(``backoff[redeliveries]``, the last value repeating, else ``ack_wait``, plus nats-server's ``ackWaitDelay``) and
:meth:`check_pending` answers when to look again.  Expired messages are queued in stream order and their times
shifted by one offset, so that their relative order survives the next round (nats-server checkPending).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, NamedTuple

ACK_WAIT_DELAY = 0.001  # seconds, nats-server ackWaitDelay: the first timer waits ack_wait plus this

NAK_IGNORED, NAK_QUEUED, NAK_DELAYED = range(3)


class Acked(NamedTuple):
    """What an ack did: ``dseq`` is the delivery sequence to record in the store (the first delivery's for an
    explicit ack of a pending message), ``acked`` the stream sequences acknowledged (an interest or workqueue
    stream may now remove them), ``was_full`` whether the consumer was at ``max_ack_pending`` before (delivery
    may go on), ``entry`` the pending entry an explicit ack removed (its time is the ack metric's start)."""

    dseq: int
    acked: list
    was_full: bool
    entry: list | None


ALREADY = Acked(0, [], False, None)  # ack all at or below the floor: nothing changes, the ack is still answered


class MaxDelivered(NamedTuple):
    """A message that reached ``max_deliver``: it left pending (``entry`` is what it was, None if it was not
    pending any more) after ``deliveries`` deliveries; ``advise`` is True the first time (MAX_DELIVERIES advisory).
    The store is told ``deliveries + 1`` (nats-server updates the delivered state with the count that failed)."""

    seq: int
    deliveries: int
    entry: list | None
    advise: bool


class Expiry(NamedTuple):
    """What an ack-wait check found: ``expired`` joined the redelivery queue, ``maxed`` hit max_deliver,
    ``next_check`` is the seconds until the next check (None: nothing is pending, stop the timer), ``changed``
    whether messages gone from the stream left pending, ``unblocked`` whether delivery may resume (a message left
    a consumer that was at max_ack_pending)."""

    expired: list
    maxed: list
    next_check: float | None
    changed: bool
    unblocked: bool


class ConsumerCore:
    __slots__ = ("ack_policy", "ack_wait", "backoff", "maxp", "maxdc", "flow_control",
                 "sseq", "dseq", "adflr", "asflr", "pending", "rdc", "rdq")

    def __init__(self, ack_policy: str = "explicit", ack_wait: int = 30_000_000_000, backoff=None,
                 max_ack_pending: int = 0, max_deliver: int = -1, flow_control: bool = False) -> None:
        self.configure(ack_policy, ack_wait, backoff, max_ack_pending, max_deliver, flow_control)
        self.sseq = 1
        self.dseq = 1
        self.adflr = 0
        self.asflr = 0
        self.pending: dict[int, list[int]] = {}
        self.rdc: dict[int, int] = {}
        self.rdq: dict[int, None] = {}  # an OrderedDict once something is queued (_queue)

    def configure(self, ack_policy: str, ack_wait: int, backoff, max_ack_pending: int, max_deliver: int,
                  flow_control: bool) -> None:
        """The parts of the consumer config the bookkeeping follows (at create and on every config update)."""
        self.ack_policy = ack_policy
        self.ack_wait = ack_wait  # ns
        self.backoff = list(backoff) if backoff else []  # ns
        self.maxp = max_ack_pending
        self.maxdc = max(max_deliver, 0)  # 0: no limit
        self.flow_control = flow_control

    # ------------------------------------------------------------------ positions
    def start_at(self, sseq: int) -> None:
        """Start (or restart, CONSUMER.RESET) from stream sequence ``sseq`` with nothing outstanding
        (nats-server selectStartingSeqNo's tail and resetLocalStartingSeq)."""
        self.sseq = max(sseq, 1)
        self.dseq = 1
        self.adflr = 0
        self.asflr = self.sseq - 1
        self.pending = {}
        self.rdc = {}
        self.rdq = {}

    def restore(self, delivered: tuple[int, int], ack_floor: tuple[int, int], pending: dict[int, tuple[int, int]],
                redelivered: dict[int, int]) -> None:
        """Take the stored state back: ``delivered`` and ``ack_floor`` are (consumer seq, stream seq) pairs."""
        self.dseq, self.sseq = delivered[0] + 1, delivered[1] + 1
        self.adflr, self.asflr = ack_floor
        self.pending = {s: [p[0], p[1]] for s, p in sorted(pending.items())}
        self.rdc = dict(redelivered)
        self.rdq = {}

    def reconcile(self, last: int) -> None:
        """The stream lost data and went back below our position (nats-server reconcileStateWithStream)."""
        if self.asflr > last:
            self.asflr = last
            self.adflr = max(self.dseq - 1, 0)
            self.pending, self.rdc = {}, {}
        self.pending = {s: p for s, p in self.pending.items() if s <= last}
        self.rdc = {s: n for s, n in self.rdc.items() if s <= last}
        if not self.pending:
            self.sseq, self.dseq = self.asflr + 1, self.adflr + 1
        else:
            self.sseq = max(self.pending) + 1
            self.dseq = max(p[0] for p in self.pending.values()) + 1

    def forget_redelivered_below(self, first: int) -> None:
        for s in [s for s in self.rdc if s < first]:
            del self.rdc[s]

    # ------------------------------------------------------------------ queries
    def full(self) -> bool:
        """At max_ack_pending: no new message may go out (redeliveries still may)."""
        return self.maxp > 0 and len(self.pending) >= self.maxp

    def needs(self, sseq: int) -> bool:
        """nats-server needAck for a message this consumer's filter matches."""
        if self.ack_policy == "explicit":
            need = sseq > self.asflr and (sseq >= self.sseq or sseq in self.pending)
        else:
            need = sseq > self.asflr
        return need or sseq in self.rdc

    def has_outstanding(self) -> bool:
        """Anything delivered and not acknowledged, or a redelivery count kept (the stream's set of consumers with
        pending messages, stream_consumers.py, holds exactly these)."""
        return bool(self.pending or self.rdc)

    def latest_ack_deadline(self) -> int:
        """Wall time (ns) when the last pending message's ack_wait (or backoff step) ends; 0 with nothing pending
        (nats-server deleteNotActive waits for these before deleting an inactive pull consumer)."""
        end = 0
        for seq, p in self.pending.items():
            t = p[1] + int(self.ack_timeout(seq) * 1e9)
            if t > end:
                end = t
        return end

    def ack_timeout(self, sseq: int = 0) -> float:
        """Seconds to wait for the ack of a delivery of ``sseq`` (0: a plain ack_wait) before redelivering."""
        backoff = self.backoff
        if sseq and backoff:
            b = backoff[min(max(self.rdc.get(sseq, 0), 0), len(backoff) - 1)]
            if b > 0:
                return b / 1e9 + ACK_WAIT_DELAY
        return self.ack_wait / 1e9 + ACK_WAIT_DELAY

    # ------------------------------------------------------------------ deliver
    def deliver(self, sseq: int, now: int) -> int:
        """A message goes out (first delivery or redelivery): the delivery sequence it carries (nats-server
        trackPending; with ``ack_policy: none`` it is acknowledged by being sent)."""
        dseq = self.dseq
        self.dseq = dseq + 1
        if self.ack_policy == "none":
            self.adflr, self.asflr = dseq, sseq
            return dseq
        pending = self.pending
        p = pending.get(sseq)
        if p is not None:
            p[1] = now  # a redelivery keeps the first delivery's consumer sequence
        elif not pending or sseq > next(reversed(pending)):
            pending[sseq] = [dseq, now]  # new deliveries come in stream order
        else:
            pending[sseq] = [dseq, now]  # out of order (rare): keep pending sorted
            items = sorted(pending.items())
            pending.clear()
            pending.update(items)
        return dseq

    def _queue(self) -> "OrderedDict[int, None]":
        """The redelivery queue, to add to.  An OrderedDict once anything is queued: delivery takes its head one at
        a time, which a plain dict finds by walking the slots of the heads taken before (O(taken) a take: 74 us a
        redelivery while 50,000 expired messages went out again); a consumer that never redelivers keeps the
        smaller plain dict."""
        rdq = self.rdq
        if type(rdq) is not OrderedDict:
            rdq = self.rdq = OrderedDict(rdq)
        return rdq

    def take_redelivery(self) -> tuple[int, int, MaxDelivered | None]:
        """Pop the head of the redelivery queue (the caller checked it is not empty): (stream seq, delivery count
        it goes out with, None), or (stream seq, count, :class:`MaxDelivered`) when it would exceed max_deliver."""
        rdq = self.rdq
        if type(rdq) is OrderedDict:
            seq = rdq.popitem(last=False)[0]
        else:
            seq = next(iter(rdq))
            del rdq[seq]
        r = self.rdc.get(seq, 0) + 1
        self.rdc[seq] = r
        if self.maxdc and r >= self.maxdc:
            return seq, r + 1, self._drop_max_delivered(seq, r)
        return seq, r + 1, None

    def put_back(self, seq: int, requeue: bool) -> None:
        """A redelivery taken with :meth:`take_redelivery` did not go out: undo its count, and with ``requeue``
        queue it again (no destination now); without, the message is gone from the stream."""
        self.rdc[seq] = self.rdc.get(seq, 1) - 1
        if requeue:
            self._queue()[seq] = None

    # ------------------------------------------------------------------ acks
    def ack(self, sseq: int, dseq: int) -> Acked | None:
        """An ack of the delivery (``sseq``, ``dseq``) from the ack subject (nats-server processAckMsg).  None:
        not for this consumer (a sequence it has not delivered, or ``ack_policy: none``)."""
        if sseq >= self.sseq and not self.flow_control:
            return None
        policy = self.ack_policy
        pending = self.pending
        if policy == "explicit":
            was_full = self.maxp > 0 and len(pending) >= self.maxp
            p = self.ack_explicit(sseq)
            if p is None:
                return Acked(dseq, [], False, None)
            return Acked(p[0], [sseq], was_full, p)
        if policy in ("all", "flow_control"):
            if dseq <= self.adflr or sseq <= self.asflr:
                return ALREADY
            was_full = self.maxp > 0 and len(pending) >= self.maxp
            sgap = sseq - self.asflr
            self.adflr, self.asflr = dseq, sseq
            if sgap > len(pending):
                seqs = [s for s in pending if s <= sseq]
            else:
                seqs = [s for s in range(sseq, sseq - sgap, -1) if s in pending]
            rdc, rdq = self.rdc, self.rdq
            for s in seqs:
                del pending[s]
                rdc.pop(s, None)
                rdq.pop(s, None)
            if sseq not in seqs:
                seqs.append(sseq)
            return Acked(dseq, seqs, was_full, None)
        return None

    def ack_explicit(self, sseq: int) -> list | None:
        """The explicit ack of stream sequence ``sseq`` (below ``sseq``: :meth:`ack` checks that): the pending entry
        it removed (delivery sequence, time) or None when it was not pending.  :meth:`ack`'s explicit case without
        its record, for acks.py's per-ack path."""
        pending = self.pending
        p = pending.pop(sseq, None)
        if p is not None:
            dseq = p[0]
            nxt = pending.get(sseq + 1) if dseq == self.adflr + 1 else None
            if nxt is not None:
                # _move_ack_floor's case for an ack in order, in-line (once per ack): the floor moves to just
                # below the next outstanding delivery, found at the next sequence
                self.adflr, self.asflr = (nxt[0] - 1, sseq) if nxt[0] > 0 else (dseq, sseq)
            else:
                self._move_ack_floor(dseq, sseq)
        if self.rdc:
            self.rdc.pop(sseq, None)
        if self.rdq:
            self.rdq.pop(sseq, None)
        return p

    def _move_ack_floor(self, dseq: int, sseq: int) -> None:
        """``(dseq, sseq)`` left pending: move the floor past it if it was the lowest outstanding delivery."""
        pending = self.pending
        if not pending:
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        elif dseq == self.adflr + 1:
            self.adflr, self.asflr = dseq, sseq
            p = pending.get(sseq + 1)
            if p is not None:
                # Acks in order: the next outstanding delivery is the next sequence.  Looked at first because
                # the first key of a dict that lost its oldest entries one by one is found by walking over their
                # empty slots (next(iter(pending)) cost ~45 us an ack while 50,000 pending were acked in order).
                if p[0] > 0:
                    self.adflr, self.asflr = p[0] - 1, sseq
            elif len(pending) < self.sseq - sseq:
                nxt = next(iter(pending))  # the lowest: pending is kept in stream order
                p = pending[nxt]
                if p[0] > 0:
                    self.adflr, self.asflr = p[0] - 1, nxt - 1
            else:
                for ss in range(sseq + 1, self.sseq):
                    p = pending.get(ss)
                    if p is not None:
                        if p[0] > 0:
                            self.adflr, self.asflr = p[0] - 1, ss - 1
                        break

    def nak(self, sseq: int, dseq: int, delay: int | None, now: int) -> int:
        """``-NAK`` (``delay`` in ns, or None: redeliver at once).  With a delay the entry's time is set so that
        its ack_wait ends ``delay`` from now (nats-server processNak)."""
        if dseq <= self.adflr or dseq > self.dseq:
            return NAK_IGNORED
        p = self.pending.get(sseq)
        if p is None:
            return NAK_IGNORED
        if delay is not None:
            self.rdq.pop(sseq, None)
            p[1] = now - self.ack_wait + delay
            return NAK_DELAYED
        if sseq not in self.rdq:
            self._queue()[sseq] = None
        return NAK_QUEUED

    def progress(self, sseq: int, now: int) -> list | None:
        """``+WPI``: the ack timer of ``sseq`` starts again; the pending entry, or None if it is not pending."""
        p = self.pending.get(sseq)
        if p is not None:
            p[1] = now
        return p

    # ------------------------------------------------------------------ ack-wait expiry and max_deliver
    def _drop_max_delivered(self, seq: int, deliveries: int) -> MaxDelivered:
        p = self.pending.pop(seq, None)
        if p is not None:
            self._move_ack_floor(p[0], seq)
        self.rdc[seq] = deliveries
        return MaxDelivered(seq, deliveries, p, deliveries == self.maxdc)

    def _max_delivered(self, seq: int) -> MaxDelivered | None:
        """nats-server hasMaxDeliveries for a message whose ack_wait passed."""
        maxdc = self.maxdc
        if maxdc == 0:
            return None
        dc = self.rdc.get(seq, 0) or 1  # nats-server deliveryCount: the redelivery count, 1 when none
        if dc >= maxdc:
            return self._drop_max_delivered(seq, dc)
        return None

    def _queue_expired(self, expired: list[int], now: int) -> None:
        expired.sort()
        rdq, pending = self._queue(), self.pending
        for seq in expired:
            rdq[seq] = None
        off = now - pending[expired[0]][1]
        for seq in expired:
            pending[seq][1] += off

    def check_pending(self, now: int, first_seq: int) -> Expiry:
        """The ack timer fired (nats-server checkPending): ``now`` is wall time in ns, ``first_seq`` the stream's
        first sequence (anything below it is gone)."""
        pending, rdc, rdq = self.pending, self.rdc, self.rdq
        ttl = self.ack_wait
        backoff = self.backoff
        nxt = int(self.ack_timeout() * 1e9)
        if backoff:
            nxt = backoff[-1]
        expired: list[int] = []
        maxed: list[MaxDelivered] = []
        changed = unblocked = False
        for seq, p in list(pending.items()):
            if seq < first_seq or seq <= self.asflr:
                del pending[seq]
                rdc.pop(seq, None)
                rdq.pop(seq, None)
                changed = True
                if seq > self.asflr:
                    self.asflr = seq
                if p[0] > self.adflr:
                    self.adflr = p[0]
                continue
            elapsed, deadline = now - p[1], ttl
            if backoff:
                dc = max(rdc.get(seq, 0), 0)
                nbi = dc + 1
                if dc + 1 >= len(backoff):
                    dc = len(backoff) - 1
                    nbi = dc
                deadline = backoff[dc]
                if backoff[nbi] < nxt:
                    nxt = backoff[nbi]
            if elapsed >= deadline:
                if seq not in rdq:
                    md = self._max_delivered(seq)
                    if md is None:
                        expired.append(seq)
                    else:
                        maxed.append(md)
                        if md.entry is not None and self.maxp > 0 and len(pending) == self.maxp - 1:
                            unblocked = True
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            self._queue_expired(expired, now)
        if pending:
            # Never closer than 1ms: wall and monotonic time are rounded differently, and a timer that fires a
            # nanosecond early must not spin.
            next_check: float | None = max(nxt / 1e9, ACK_WAIT_DELAY)
        else:
            next_check = None
            rdq.clear()
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        return Expiry(expired, maxed, next_check, changed, unblocked)

    def expire_all(self, now: int) -> tuple[list[int], list[MaxDelivered]]:
        """Everything pending is due now (the deliver subject changed: nats-server updateDeliverSubjectLocked
        forces checkPending): (queued for redelivery, hit max_deliver)."""
        expired: list[int] = []
        maxed: list[MaxDelivered] = []
        for s in sorted(self.pending):
            if s in self.rdq:
                continue
            md = self._max_delivered(s)
            if md is None:
                expired.append(s)
            else:
                maxed.append(md)
        if expired:
            self._queue_expired(expired, now)
        return expired, maxed

    # ------------------------------------------------------------------ stream changes
    def forget_redelivered(self, sseq: int) -> bool:
        """A message that is not pending left the stream: drop its redelivery count; whether it had one."""
        return self.rdc.pop(sseq, None) is not None

    def purged(self, first: int, gone: Iterable[int]) -> bool:
        """The stream was purged: ``first`` is its new first sequence and ``gone`` the pending sequences whose
        messages no longer exist (nats-server consumer.purge).  They count as acked; whether anything changed."""
        if self.sseq < first:
            self.sseq = first
        changed = False
        pending, rdc, rdq = self.pending, self.rdc, self.rdq
        for seq in gone:
            p = pending.pop(seq)
            if p[0] > self.adflr:
                self.adflr = p[0]
                if self.adflr > self.dseq:
                    self.dseq = self.adflr
            rdc.pop(seq, None)
            rdq.pop(seq, None)
            changed = True
        if self.asflr < first - 1:
            self.asflr = first - 1
            changed = True
        if not pending:
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
            rdc.clear()
        for seq in [s for s in rdq if s < first]:
            del rdq[seq]
        return changed
