"""Pull consumers: ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` requests, the wait queue, and their statuses.

Theory of operation
-------------------
A pull request (nats-server ``processNextMsgRequest``) is checked in nats-server's order - push consumer (409),
body (400), ``max_batch`` / ``max_expires`` / ``max_bytes`` caps (409), priority-group misuse (400), a full queue
is pruned at most once a second, ``no_wait`` with nothing to deliver (404) or less than the queued requests already
claim (408 Requests Pending) - and then becomes a :class:`WaitingRequest` at the tail of the consumer's
:class:`WaitQueue` (409 Exceeded MaxWaiting when full, suppressed when the request asked for heartbeats).

Delivery (``Consumer._run``) takes one message at a time and hands it to :meth:`PullMixin._next_waiting`, which walks
the queue head first: an expired request gets ``408 Request Timeout`` (with ``Nats-Pending-Messages`` / ``-Bytes``),
a request whose ``max_bytes`` budget cannot hold the message gets ``409 Message Size Exceeds MaxBytes``, a request
whose reply subject lost interest is dropped silently.  The chosen request's batch count goes down by one and, if it
wants more, it moves to the tail, so concurrent pullers are served round-robin (waitQueue.pop).  A request whose
batch is done but whose byte budget is not gets ``409 Batch Completed``; a batch that is simply complete ends
silently.  Priority groups (:mod:`.priority`) add their say before the byte budget: a pinned_client consumer pins
a request or skips standbys and ends requests with a stale pin id (423), overflow requests below their thresholds
are skipped, and a prioritized queue is kept in priority order.

:meth:`PullMixin._process_waiting` runs after every delivery pass (nats-server runs it before it sleeps); the
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

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

# What the pinned_client rules let the head request do (PriorityMixin._pin_verdict in .priority)
PIN_OK, PIN_ASSIGNED, PIN_STANDBY, PIN_WRONG = range(4)
# What WaitQueue.sweep decided for a request (the caller sends it, in queue order)
SWEEP_TIMEOUT, SWEEP_NO_MESSAGES, SWEEP_HEARTBEAT = range(3)

PENDING_MSGS = "Nats-Pending-Messages"
PENDING_BYTES = "Nats-Pending-Bytes"
REQUIRED_API_LEVEL_HDR = "Nats-Required-Api-Level"


def status(code: int, text: str) -> bytes:
    return b"NATS/1.0 %d %s\r\n\r\n" % (code, text.encode())


def status_pending(code: int, text: str, n: int, b: int) -> bytes:
    return b"NATS/1.0 %d %s\r\n%s: %d\r\n%s: %d\r\n\r\n" % (
        code, text.encode(), PENDING_MSGS.encode(), n, PENDING_BYTES.encode(), b)


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

    def remove_head(self) -> None:
        del self.q[0]

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


class PullMixin:
    """The pull half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    # ------------------------------------------------------------------ requests
    def process_next_request(self: "Consumer", reply: str, hdr: bytes, body: bytes) -> None:
        if not reply or self.closed:
            return
        send = self.server.publish
        if self.waiting is None:
            send(reply, b"", "", status(409, "Consumer is push based"))
            return
        if hdr and _api_level_too_high(hdr):
            send(reply, b"", "", status(412, "Required Api Level"))
            return
        req = parse_pull_request(body)
        if isinstance(req, str):
            send(reply, b"", "", status(400, f"Bad Request - {req}"))
            return
        cfg = self.config
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
            refused = self._check_priority_request(req)
            if refused is not None:
                send(reply, b"", "", refused)
                return
        now = self.clock.monotonic()
        wq = self.waiting
        if wq.is_full() and now - self._lwqic > 1.0:
            self._process_waiting(False)
        if req.no_wait:
            msgs_pending = self.num_pending() + len(self.core.rdq)
            if msgs_pending == 0 and expires_ns == 0:
                wq.last = now
                send(reply, b"", "", status(404, "No Messages"))
                return
            if msgs_pending > 0:
                self._process_waiting(False)
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
        if not self._add_waiting(wr):
            if hb_ns == 0:
                send(reply, b"", "", status(409, "Exceeded MaxWaiting"))
            return
        self.kick()

    # ------------------------------------------------------------------ selection
    def _next_waiting(self: "Consumer", sz: int) -> WaitingRequest | None:
        """nats-server nextWaiting: the request that gets a message of ``sz`` bytes, or None."""
        wq = self.waiting
        if wq is None:
            return None
        now = self.clock.monotonic()
        has_interest = self.server.sublist.has_interest
        send = self.server.publish
        pp = self.config.priority_policy
        # Priority groups (see .priority): a pinned_client consumer without a pin pins the first request without an
        # id; with a pin only requests carrying it are served; overflow requests wait below their thresholds.
        need_pin = pp == "pinned_client" and self._pin is None
        cycled = 0
        while wq.q:
            wr = wq.q[0]
            if wr.expires and now >= wr.expires:
                send(wr.reply, b"", "", status_pending(408, "Request Timeout", wr.n, wr.b))
                wq.remove_head()
                continue
            assigned = False
            if need_pin or self._pin is not None:
                verdict = self._pin_verdict(wr, need_pin)
                if verdict == PIN_WRONG:
                    self._wrong_pin(wr)
                    wq.remove_head()
                    continue
                if verdict == PIN_STANDBY:
                    wq.cycle()
                    cycled += 1
                    if cycled >= len(wq):
                        return None
                    continue
                assigned = verdict == PIN_ASSIGNED
            if pp == "overflow" and self._overflow_blocked(wr):
                wq.cycle()
                cycled += 1
                if cycled >= len(wq):
                    return None
                continue
            if wr.b > 0:
                if sz <= wr.b:
                    wr.b -= sz
                    if wr.b == 0:
                        wr.n = 1
                else:
                    send(wr.reply, b"", "", status_pending(409, "Message Size Exceeds MaxBytes", wr.n, wr.b))
                    if assigned:  # the pin just given to this request goes with it
                        self._unassign_pin()
                    wq.remove_head()
                    continue
            if has_interest(wr.reply):
                return self._pop_waiting()
            wq.remove_head()  # the requester is gone: drop silently
        return None

    def _process_waiting(self: "Consumer", eos: bool) -> None:
        """nats-server processWaiting: the queue's :meth:`WaitQueue.sweep`, then its statuses and heartbeats go out
        and one timer is armed for the next expiry or heartbeat."""
        wq = self.waiting
        if wq is None:
            return
        now = self.clock.monotonic()
        self._lwqic = now
        if not wq.q:
            self._arm_wait_timer(0.0)
            return
        out, fexp = wq.sweep(now, eos, self.server.sublist.has_interest)
        send = self.server.publish
        for what, wr in out:
            if what == SWEEP_TIMEOUT:
                send(wr.reply, b"", "", status_pending(408, "Request Timeout", wr.n, wr.b))
            elif what == SWEEP_NO_MESSAGES:
                send(wr.reply, b"", "", status(404, "No Messages"))
            else:
                self._send_idle_heartbeat(wr.reply)
        self._arm_wait_timer(fexp)

    def _arm_wait_timer(self: "Consumer", at: float) -> None:
        t = self._wq_timer
        if not at:
            if t is not None:
                t.cancel()
                self._wq_timer = None
            return
        if t is not None:
            if self._wq_timer_at == at:
                return
            t.cancel()
        self._wq_timer_at = at
        delay = max(at - self.clock.monotonic(), 0.001)
        self._wq_timer = self.clock.call_later(delay, self._wait_timer_fired)

    def _wait_timer_fired(self: "Consumer") -> None:
        self._wq_timer = None
        self._wq_timer_at = 0.0
        if self.closed:
            return
        self._process_waiting(True)
        self._update_ready()

    def _release_waiting(self: "Consumer", notify: bool) -> None:
        """Stop: pending requests get ``409 Consumer Deleted`` when the consumer is deleted."""
        wq = self.waiting
        if wq is None:
            return
        if notify:
            for wr in wq.q:
                self.server.publish(wr.reply, b"", "", status(409, "Consumer Deleted"))
        wq.q.clear()
        self._arm_wait_timer(0.0)


def _api_level_too_high(hdr: bytes) -> bool:
    from skiff.protocol import headers

    from ..version import API_LEVEL

    v = headers.get(hdr, REQUIRED_API_LEVEL_HDR)
    if not v:
        return False
    try:
        return int(v) > API_LEVEL
    except ValueError:
        return True
