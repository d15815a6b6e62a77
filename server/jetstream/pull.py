"""Pull consumers: ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` requests, the wait queue, and their statuses.

Theory of operation
-------------------
A pull request (nats-server ``processNextMsgRequest``) is checked in nats-server's order - push consumer (409),
body (400), ``max_batch`` / ``max_expires`` / ``max_bytes`` caps (409), priority-group misuse (400), a full queue
is pruned at most once a second, ``no_wait`` with nothing to deliver (404) or less than the queued requests already
claim (408 Requests Pending) - and then becomes a :class:`WaitingRequest` at the tail of the consumer's
:class:`WaitQueue` (409 Exceeded MaxWaiting when full, suppressed when the request asked for heartbeats).

:class:`PullDelivery` is the consumer's pull adapter: it owns the wait queue, its timer and the priority-group state
(:class:`~.priority.PriorityGroups`).  Delivery (:class:`~.delivery.Delivery`) takes one message at a time and asks
:meth:`PullDelivery.next_waiting` for its destination; the decision is :func:`~.priority.select_request`'s, which
has no I/O and walks the queue head first: an expired request gets ``408 Request Timeout`` (with ``Nats-Pending-Messages`` / ``-Bytes``),
a request whose ``max_bytes`` budget cannot hold the message gets ``409 Message Size Exceeds MaxBytes``, a request
whose reply subject lost interest is dropped silently.  The chosen request's batch count goes down by one and, if it
wants more, it moves to the tail, so concurrent pullers are served round-robin (waitQueue.pop).  A request whose
batch is done but whose byte budget is not gets ``409 Batch Completed``; a batch that is simply complete ends
silently.  Priority groups (:mod:`.priority`) add their say before the byte budget: a pinned_client consumer pins
a request or skips standbys and ends requests with a stale pin id (423), overflow requests below their thresholds
are skipped, and a prioritized queue is kept in priority order.

:meth:`PullDelivery.process_waiting` runs after every delivery pass (nats-server runs it before it sleeps); the
decisions are :meth:`WaitQueue.sweep`'s, which has no I/O (tests/jetstream/test_consumer_core.py drives it with
tables).  At the end of the available messages a ``no_wait`` request ends with ``404 No Messages`` (or waits for
its ``expires`` if it has one and got nothing), expired requests get 408, idle requests with ``idle_heartbeat`` get
``100 Idle Heartbeat``, and one clock timer is armed for the earliest of all expiries and heartbeats.  Status
messages have no payload and no reply subject.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from skiff.protocol.jsapi.requests import parse_pull_request
from skiff.protocol.jsapi.timefmt import format_go_duration

from .api import api_level_too_high
from .delivery import PENDING_BYTES, PENDING_MSGS, send_idle_heartbeat, status, status_pending
from .priority import DO_PIN, DO_STATUS, PriorityGroups, refuse_request, select_request

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

__all__ = ["PENDING_BYTES", "PENDING_MSGS", "PullDelivery", "WaitQueue", "WaitingRequest", "status", "status_pending"]

# What WaitQueue.sweep decided for a request (the caller sends it, in queue order)
SWEEP_TIMEOUT, SWEEP_NO_MESSAGES, SWEEP_HEARTBEAT = range(3)


class WaitingRequest:
    """One queued pull request (nats-server waitingRequest): ``n`` still wanted, ``d`` delivered, ``b`` bytes left."""

    __slots__ = ("reply", "n", "d", "b", "expires", "received", "hb", "hbt", "no_wait", "group", "pin_id",
                 "priority", "min_pending", "min_ack_pending")

    def __init__(self, reply: str, n: int, b: int, expires: float, received: float, hb: float, no_wait: bool) -> None:
        self.reply = reply
        self.n = n
        self.d = 0
        self.b = b
        self.expires = expires  # monotonic seconds, 0 = never
        self.received = received
        self.hb = hb  # seconds, 0 = none
        self.hbt = received + hb if hb else 0.0
        self.no_wait = no_wait
        self.group = ""
        self.pin_id = ""
        self.priority = 0
        self.min_pending = 0
        self.min_ack_pending = 0


class WaitQueue:
    """FIFO of waiting requests with nats-server's pop-and-move-to-tail (round-robin between pullers)."""

    __slots__ = ("q", "max", "last")

    def __init__(self, max_waiting: int) -> None:
        self.q: list[WaitingRequest] = []  # small (max_waiting), and an empty list costs far less
        self.max = max_waiting
        self.last = 0.0  # monotonic time of the last request (inactive_threshold counts from it)

    def __len__(self) -> int:
        return len(self.q)

    def is_full(self) -> bool:
        return len(self.q) >= self.max

    def add(self, wr: WaitingRequest) -> bool:
        if self.is_full():
            return False
        self.q.append(wr)
        self.last = wr.received
        return True

    def peek(self) -> WaitingRequest | None:
        return self.q[0] if self.q else None

    def pop(self) -> WaitingRequest:
        wr = self.q[0]
        wr.d += 1
        wr.n -= 1
        if wr.n > 0 and len(self.q) > 1:
            del self.q[0]
            self.q.append(wr)
        elif wr.n <= 0:
            del self.q[0]
        return wr

    def cycle(self) -> None:
        if self.q:
            self.q.append(self.q.pop(0))

    def pending_batch(self) -> int:
        return sum(wr.n for wr in self.q)

    def sweep(self, now: float, eos: bool, has_interest: Callable[[str], bool]) -> tuple[list, float]:
        """nats-server processWaiting without the I/O: drop expired requests (408), ``no_wait`` requests at the end
        of the stream (``eos``: 404, unless one with an ``expires`` got nothing yet: it waits for its expiry) and
        requests whose reply subject lost interest (silently); advance due heartbeats.  Returns what to send, as
        ``(SWEEP_*, request)`` in queue order, and the monotonic time of the earliest expiry or heartbeat left
        (0.0: none)."""
        out: list[tuple[int, WaitingRequest]] = []
        keep: list[WaitingRequest] = []
        fexp = 0.0
        for wr in self.q:
            expired = wr.expires and now >= wr.expires
            if (eos and wr.no_wait) or expired:
                if expired:
                    out.append((SWEEP_TIMEOUT, wr))
                    continue
                if not wr.expires or wr.d > 0:
                    out.append((SWEEP_NO_MESSAGES, wr))
                    continue
            if not has_interest(wr.reply):
                continue
            if wr.hbt:
                if now >= wr.hbt:
                    out.append((SWEEP_HEARTBEAT, wr))
                    wr.hbt = now + wr.hb
                if not fexp or wr.hbt < fexp:
                    fexp = wr.hbt
            if wr.expires and (not fexp or wr.expires < fexp):
                fexp = wr.expires
            keep.append(wr)
        self.q = keep
        return out, fexp


class PullDelivery:
    """The pull adapter of a consumer without a ``deliver_subject``."""

    __slots__ = ("c", "waiting", "timer", "timer_at", "lwqic", "priority")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        cfg = c.config
        self.waiting = WaitQueue(cfg.max_waiting)
        self.timer = None
        self.timer_at = 0.0
        self.lwqic = 0.0  # when the queue was last swept (a full queue is swept at most once a second)
        self.priority = PriorityGroups(c) if cfg.priority_policy not in ("none", "") else None

    # ------------------------------------------------------------------ requests
    def process_next_request(self, reply: str, hdr: bytes, body: bytes) -> None:
        c = self.c
        send = c.server.publish
        if hdr and api_level_too_high(hdr):
            send(reply, b"", "", status(412, "Required Api Level"))
            return
        req = parse_pull_request(body)
        if isinstance(req, str):
            send(reply, b"", "", status(400, f"Bad Request - {req}"))
            return
        cfg = c.config
        expires_ns = req.expires
        hb_ns = req.idle_heartbeat
        if hb_ns > 0 and hb_ns * 2 > expires_ns:
            send(reply, b"", "", status(400, "Bad Request - heartbeat value too large"))
            return
        batch = req.batch  # 0 or less still delivers one message, as in nats-server
        if cfg.max_batch > 0 and batch > cfg.max_batch:
            send(reply, b"", "", status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"))
            return
        if expires_ns > 0 and cfg.max_expires > 0 and expires_ns > cfg.max_expires:
            send(reply, b"", "", status(409, f"Exceeded MaxRequestExpires of {format_go_duration(cfg.max_expires)}"))
            return
        if req.max_bytes > 0 and cfg.max_bytes > 0 and req.max_bytes > cfg.max_bytes:
            send(reply, b"", "", status(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"))
            return
        is_json = body.strip()[:1] == b"{"
        if is_json:  # only JSON pulls carry a priority group (nats-server: priorityGroup != nil)
            refused = refuse_request(cfg.priority_policy, req)
            if refused is None and self.priority is not None:
                refused = self.priority.check_request(req)
            if refused is not None:
                send(reply, b"", "", refused)
                return
        now = c.clock.monotonic()
        wq = self.waiting
        if wq.is_full() and now - self.lwqic > 1.0:
            self.process_waiting(False)
        if req.no_wait:
            msgs_pending = c.num_pending() + len(c.core.rdq)
            if msgs_pending == 0 and expires_ns == 0:
                wq.last = now
                send(reply, b"", "", status(404, "No Messages"))
                return
            if msgs_pending > 0:
                self.process_waiting(False)
                # Go: msgsPending < uint64(batchPending): a negative total (a waiting batch of -1) wraps around
                if msgs_pending < wq.pending_batch() & 0xFFFFFFFFFFFFFFFF:
                    wq.last = now
                    send(reply, b"", "", status(408, "Requests Pending"))
                    return
        # Go: a non-zero expires is a deadline, even a negative one (already past: the request ends with 408)
        wr = WaitingRequest(reply, batch, req.max_bytes, now + expires_ns / 1e9 if expires_ns else 0.0, now,
                            hb_ns / 1e9, req.no_wait)
        if is_json:
            wr.group, wr.pin_id, wr.priority = req.group, req.id, req.priority
            wr.min_pending, wr.min_ack_pending = req.min_pending, req.min_ack_pending
        added = self.priority.add(wq, wr) if self.priority is not None else wq.add(wr)
        if not added:
            if hb_ns == 0:
                send(reply, b"", "", status(409, "Exceeded MaxWaiting"))
            return
        c.kick()

    # ------------------------------------------------------------------ selection
    def next_waiting(self, sz: int) -> WaitingRequest | None:
        """nats-server nextWaiting: the request that gets a message of ``sz`` bytes, or None.  The decision is
        :func:`~.priority.select_request`'s; this carries out what it asks for, in its order."""
        c = self.c
        prio = self.priority
        wq = self.waiting
        if prio is None:
            q = wq.q
            if not q:
                return None
            now = c.clock.monotonic()
            wr = q[0]
            has_interest = c.delivery.dest.valid(c.server).has_interest  # the inbox the message then goes to
            if wr.b <= 0 and not (wr.expires and now >= wr.expires) and has_interest(wr.reply):
                return wq.pop()  # the common case, what select_request answers first, without its lists
            wr, todo = select_request(wq, now, sz, "none", None, _no_counts, has_interest)
        else:
            wr, todo = select_request(wq, c.clock.monotonic(), sz, c.config.priority_policy, prio.pin_id,
                                      lambda: (c.num_pending() + 1, len(c.core.pending)),
                                      c.server.sublist.has_interest)
        if todo:
            send = c.server.publish
            for do in todo:
                if do[0] == DO_STATUS:
                    send(do[1], b"", "", do[2])
                elif do[0] == DO_PIN:
                    prio.assign(do[1])
                else:
                    prio.unassign()
        return wr

    def batch_completed(self, reply: str, n: int, b: int) -> None:
        """A request's batch is done but its byte budget is not (nats-server: 409 Batch Completed)."""
        self.c.server.publish(reply, b"", "", status_pending(409, "Batch Completed", n, b))

    def process_waiting(self, eos: bool) -> None:
        """nats-server processWaiting: the queue's :meth:`WaitQueue.sweep`, then its statuses and heartbeats go out
        and one timer is armed for the next expiry or heartbeat."""
        c = self.c
        wq = self.waiting
        now = c.clock.monotonic()
        self.lwqic = now
        if not wq.q:
            self._arm_timer(0.0)
            return
        out, fexp = wq.sweep(now, eos, c.server.sublist.has_interest)
        send = c.server.publish
        for what, wr in out:
            if what == SWEEP_TIMEOUT:
                send(wr.reply, b"", "", status_pending(408, "Request Timeout", wr.n, wr.b))
            elif what == SWEEP_NO_MESSAGES:
                send(wr.reply, b"", "", status(404, "No Messages"))
            else:
                send_idle_heartbeat(c, wr.reply)
        self._arm_timer(fexp)

    def _arm_timer(self, at: float) -> None:
        t = self.timer
        if not at:
            if t is not None:
                t.cancel()
                self.timer = None
            return
        if t is not None:
            if self.timer_at == at:
                return
            t.cancel()
        self.timer_at = at
        clock = self.c.clock
        delay = max(at - clock.monotonic(), 0.001)
        self.timer = clock.call_later(delay, self._timer_fired)

    def _timer_fired(self) -> None:
        self.timer = None
        self.timer_at = 0.0
        c = self.c
        if c.closed:
            return
        self.process_waiting(True)
        c.delivery.update_ready()

    def stop(self, notify: bool) -> None:
        """Stop: pending requests get ``409 Consumer Deleted`` when the consumer is deleted; the pin goes."""
        wq = self.waiting
        if notify:
            for wr in wq.q:
                self.c.server.publish(wr.reply, b"", "", status(409, "Consumer Deleted"))
        wq.q.clear()
        self._arm_timer(0.0)
        if self.priority is not None:
            self.priority.unassign()


def _no_counts() -> tuple[int, int]:  # pragma: no cover - only the overflow policy asks
    return 0, 0
