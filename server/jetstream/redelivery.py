"""Redelivery: the ack timer, backoff, the redelivery queue and max_deliver (nats-server ``checkPending``).

Theory of operation
-------------------
``pending`` maps each unacknowledged stream sequence to ``[consumer seq of the first delivery, last delivery time]``
and ``rdc`` counts redeliveries per stream sequence (delivery count - 1).  One clock timer per consumer
(``_ptmr``) fires at the earliest ack deadline, never one per message; :meth:`_check_pending` then walks
``pending``: a message whose ack_wait (or ``backoff[redeliveries]``, the last value repeating) has passed joins the
redelivery queue ``rdq``, unless it reached ``max_deliver`` - then it leaves ``pending``, the ack floor moves as if it
were acked and the ``MAX_DELIVERIES`` advisory goes out once.  Expired messages are queued in stream-sequence order
and their times are shifted by the same offset so their relative order survives the next round.  The timer is
re-armed for the nearest remaining deadline; the first timer after a delivery waits ``ack_wait + 1ms``
(nats-server ``ackWaitDelay``).

``rdq`` is an insertion-ordered dict used as an ordered set: redeliveries are served before new messages, in the
order they were queued (NAKs append), and an ack removes its entry in O(1).  Redeliveries ignore
``max_ack_pending``; new messages stop at it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import consumer_advisories as adv

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

ACK_WAIT_DELAY = 0.001  # nats-server ackWaitDelay


class RedeliveryMixin:
    """Redelivery half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    def _ack_wait(self: "Consumer", nxt_ns: int = 0) -> float:
        return (nxt_ns if nxt_ns > 0 else self.config.ack_wait) / 1e9 + ACK_WAIT_DELAY

    def _reset_ptmr(self: "Consumer", delay: float) -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
        self._ptmr = self.clock.call_later(delay, self._check_pending)
        self._ptmr_end = self.clock.monotonic() + delay

    def _stop_ptmr(self: "Consumer") -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
            self._ptmr = None

    def _track_pending(self: "Consumer", sseq: int, dseq: int, now: int) -> None:
        """nats-server trackPending: remember the delivery and make sure the timer fires in time for it."""
        pending = self.pending
        p = pending.get(sseq)
        if p is not None:
            p[1] = now  # keep the first delivery's consumer sequence
        else:
            # ``pending`` is kept in stream-sequence order so that its first key is the lowest (acks.py moves the
            # ack floor with it in O(1) instead of min() over up to max_ack_pending entries).  New deliveries come
            # in order; anything else re-sorts, which is rare.
            if not pending:
                # Joining the stream's set of consumers with pending messages once is enough: it leaves only
                # when pending is empty again (stream_consumers.maybe_no_pending).
                pending[sseq] = [dseq, now]
                self.cset.has_pending(self)
            elif sseq > next(reversed(pending)):
                pending[sseq] = [dseq, now]
            else:
                pending[sseq] = [dseq, now]
                items = sorted(pending.items())
                pending.clear()
                pending.update(items)
        backoff = self.config.backoff
        if backoff:
            bi = min(max(self.rdc.get(sseq, 0), 0), len(backoff) - 1)
            min_delay = self._ack_wait(backoff[bi])
        else:
            min_delay = self._ack_wait(0)
        deadline = self.clock.monotonic() + min_delay
        if self._ptmr is None or self._ptmr_end > deadline:
            self._reset_ptmr(min_delay)

    def _check_pending(self: "Consumer") -> None:
        self._ptmr = None
        if self.closed or not self.config.ack_wait and not self.config.backoff:
            return
        store = self.stream.store
        fseq = store.first_seq
        now = self.clock.time_ns()
        ttl = self.config.ack_wait
        backoff = self.config.backoff or []
        nxt = int(self._ack_wait(0) * 1e9)
        if backoff:
            nxt = backoff[-1]
        expired: list[int] = []
        changed = False
        for seq, p in list(self.pending.items()):
            if seq < fseq or seq <= self.asflr:
                del self.pending[seq]
                self.rdc.pop(seq, None)
                self.rdq.pop(seq, None)
                changed = True
                if seq > self.asflr:
                    self.asflr = seq
                if p[0] > self.adflr:
                    self.adflr = p[0]
                continue
            elapsed, deadline = now - p[1], ttl
            if backoff:
                dc = max(self.rdc.get(seq, 0), 0)
                nbi = dc + 1
                if dc + 1 >= len(backoff):
                    dc = len(backoff) - 1
                    nbi = dc
                deadline = backoff[dc]
                if backoff[nbi] < nxt:
                    nxt = backoff[nbi]
            if elapsed >= deadline:
                if seq not in self.rdq and not self._has_max_deliveries(seq):
                    expired.append(seq)
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            expired.sort()
            for seq in expired:
                self.rdq[seq] = None
            off = now - self.pending[expired[0]][1]
            for seq in expired:
                p = self.pending.get(seq)
                if p is not None:
                    p[1] += off
        if self.pending:
            # Never closer than 1ms: wall and monotonic time are rounded differently, and a timer that fires a
            # nanosecond early must not spin.
            self._reset_ptmr(max(nxt / 1e9, ACK_WAIT_DELAY))
        else:
            self.rdq.clear()
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
            self.cset.maybe_no_pending(self)
        if changed:
            self._state_changed()
        if expired:
            self.kick()

    def _has_max_deliveries(self: "Consumer", seq: int) -> bool:
        maxdc = self.maxdc
        if maxdc == 0:
            return False
        dc = self.rdc.get(seq, 0) or 1  # nats-server deliveryCount: the redelivery count, 1 when none
        if dc >= maxdc:
            if dc == maxdc:
                adv.max_deliveries(self, seq, dc)
            p = self.pending.pop(seq, None)
            if p is not None:
                self.store.update_delivered(p[0], seq, dc + 1, p[1])
                self._move_ack_floor(p[0], seq)
                self._state_changed()
                if self.maxp > 0 and len(self.pending) == self.maxp - 1:
                    self.kick()
            self.rdc[seq] = dc
            return True
        return False

    def _force_expire_pending(self: "Consumer") -> None:
        expired = [s for s in sorted(self.pending) if s not in self.rdq and not self._has_max_deliveries(s)]
        if expired:
            for seq in expired:
                self.rdq[seq] = None
            now = self.clock.time_ns()
            off = now - self.pending[expired[0]][1]
            for seq in expired:
                self.pending[seq][1] += off
            self._reset_ptmr(self._ack_wait(0))
        self.kick()

    def _next_redelivery(self: "Consumer") -> int:
        rdq = self.rdq
        if not rdq:
            return 0
        seq = next(iter(rdq))
        del rdq[seq]
        return seq
