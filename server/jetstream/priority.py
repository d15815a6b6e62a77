"""Priority groups on pull consumers (ADR-42, nats-server 2.11+): ``overflow``, ``pinned_client``, ``prioritized``,
and ``$JS.API.CONSUMER.UNPIN.<stream>.<consumer>``.

Theory of operation
-------------------
A consumer with ``priority_policy`` other than ``none`` names its groups in ``priority_groups`` (nats-server uses
only the first one).  Every JSON pull request must then name one of them in ``group``; a plain-integer or empty
pull carries no priority group at all and is not checked (nats-server's ``priorityGroup`` is nil for those).
:func:`refuse_request` and :meth:`PriorityGroups.check_request` hold the request-time checks in nats-server's order
(processNextMsgRequest): ``400 Bad Request - Not a Overflow Priority consumer`` / ``- Not a Pinned Client Priority
consumer`` / ``- Priority must be between 0 and 9`` / ``- Priority Group missing`` / ``- Invalid Priority Group``,
then, while a client is pinned, ``423 Nats-Pin-Id mismatch`` for a request naming another pin id; a request naming
the current pin pushes the pin's timer back.

Selection happens message by message in :func:`select_request` (nats-server nextWaiting), which walks the wait
queue from its head and decides without sending anything: it returns the request that gets the message and the
list of what to do first, in order (statuses ending requests, a pin to assign or drop), which the pull adapter
(:class:`~.pull.PullDelivery`) carries out.  It asks the rules of this module about each request:

``pinned_client`` (:func:`pin_verdict`, :class:`PriorityGroups` holds the pin)
    With no pin, the first request without ``id`` gets one: a fresh NUID becomes the pin, ``pinned_ts`` is now, the
    PINNED advisory goes out and the ``priority_timeout`` timer starts.  A request that still carries an old ``id``
    is ended with ``423 Nats-Wrong-Pin-Id`` (with ``Nats-Pending-Messages`` / ``-Bytes``).  With a pin, requests
    carrying it are served, requests without ``id`` are standbys (moved to the tail, not served), requests with
    another ``id`` get the same 423.  Every message delivered to a pull carries ``Nats-Pin-Id: <pin>``
    (:meth:`PriorityGroups.pin_header`).  The pin is dropped when its timer fires (no pull with the pin for
    ``priority_timeout``; deliveries do not count) with UNPINNED ``timeout``, or by UNPIN with UNPINNED ``admin``;
    the next message then pins the first eligible standby.  Nothing is taken back from the old client: messages it
    holds unacknowledged are redelivered only after their ack_wait, possibly to the new pin (docs/exclusivity.md).

``overflow`` (:func:`overflow_blocked`)
    A request with ``min_pending`` / ``min_ack_pending`` is served only while the consumer's pending count
    (including the message at hand) is at least ``min_pending`` OR its ack-pending count is at least
    ``min_ack_pending``; otherwise it is moved to the tail and waits (heartbeats and expiry go on).

``prioritized`` (:func:`add_prioritized`, :func:`pop_and_requeue`)
    The queue is kept sorted by ``priority`` (0 first; JSON pulls without the field are 0, plain pulls last), new
    requests go after the others of their level, and a request that wants more after a delivery goes back behind
    the others of its level: lower numbers always first, round-robin within a level (waitQueue.addPrioritized /
    popAndRequeue).

The pin lives only in memory, as in nats-server: a restart starts without one.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi import requests as rq
from skiff.protocol.jsapi.timefmt import ZERO_TIME_NS, format_time

from ..ids import nuid
from . import consumer_advisories as adv
from .api import consumer_of
from .delivery import status, status_pending

if TYPE_CHECKING:  # pragma: no cover
    from .api import ApiRequest
    from .consumer import Consumer
    from .engine import JetStream
    from .pull import WaitQueue, WaitingRequest

PIN_ID_HDR = b"Nats-Pin-Id"
REASON_TIMEOUT = "timeout"
REASON_ADMIN = "admin"
NO_PRIORITY = 1 << 31  # where pulls without a priority group sort (Go: math.MaxInt32)
_VALID_GROUP = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")  # nats-server validGroupName

# What the pinned_client rules let the head request do (pin_verdict)
PIN_OK, PIN_ASSIGNED, PIN_STANDBY, PIN_WRONG = range(4)
# What select_request asks its caller to do before delivering, in order
DO_STATUS, DO_PIN, DO_UNPIN = range(3)


# ---------------------------------------------------------------------- pull request checks
def refuse_request(policy: str, req: rq.PullRequest) -> bytes | None:
    """The status a JSON pull request is refused with whatever the consumer's pin, or None (nats-server
    processNextMsgRequest, in its order)."""
    if (req.min_pending or req.min_ack_pending) and policy != "overflow":
        return status(400, "Bad Request - Not a Overflow Priority consumer")
    if req.id and policy != "pinned_client":
        return status(400, "Bad Request - Not a Pinned Client Priority consumer")
    if req.priority < 0 or req.priority > 9:
        return status(400, "Bad Request - Priority must be between 0 and 9")
    return None


# ---------------------------------------------------------------------- selection (no I/O)
def pin_verdict(wr: "WaitingRequest", pin_id: str | None, need_pin: bool) -> int:
    """What the head request ``wr`` may do with the next message under a pin (nats-server nextWaiting).
    ``need_pin`` is whether the consumer had no pin when this selection began."""
    if need_pin:
        return PIN_ASSIGNED if not wr.pin_id else PIN_WRONG  # an id from a pin that no longer exists
    if pin_id is None or wr.pin_id == pin_id:
        return PIN_OK
    if not wr.pin_id:
        return PIN_STANDBY
    return PIN_WRONG


def overflow_blocked(wr: "WaitingRequest", num_pending: int, ack_pending: int) -> bool:
    """An overflow request whose thresholds are not met waits (either threshold met is enough).  ``num_pending``
    counts the message at hand (nats-server's o.npc+1)."""
    if wr.min_pending <= 0 and wr.min_ack_pending <= 0:
        return False
    if 0 < wr.min_pending <= num_pending:
        return False
    if 0 < wr.min_ack_pending <= ack_pending:
        return False
    return True


def select_request(wq: "WaitQueue", now: float, sz: int, policy: str, pin_id: str | None,
                   counts: Callable[[], tuple[int, int]], has_interest: Callable[[str], bool]
                   ) -> "tuple[WaitingRequest | None, list]":
    """nats-server nextWaiting without the I/O: the request that gets a message of ``sz`` bytes (taken from the
    queue: its batch counts down), or None, and what to do first, in order: ``(DO_STATUS, reply, frame)`` ends a
    request, ``(DO_PIN, request)`` pins it, ``(DO_UNPIN,)`` drops the pin just given.  ``pin_id`` is the current
    pin (None: none), ``counts`` gives (num_pending including the message at hand, ack pending) for overflow."""
    out: list = []
    need_pin = policy == "pinned_client" and pin_id is None
    check_pin = need_pin or pin_id is not None
    overflow = policy == "overflow"
    q = wq.q
    cycled = 0
    while q:
        wr = q[0]
        if wr.expires and now >= wr.expires:
            out.append((DO_STATUS, wr.reply, status_pending(408, "Request Timeout", wr.n, wr.b)))
            del q[0]
            continue
        assigned = False
        if check_pin:
            verdict = pin_verdict(wr, pin_id, need_pin)
            if verdict == PIN_WRONG:
                out.append((DO_STATUS, wr.reply, status_pending(423, "Nats-Wrong-Pin-Id", wr.n, wr.b)))
                del q[0]
                continue
            if verdict == PIN_STANDBY:
                wq.cycle()
                cycled += 1
                if cycled >= len(q):
                    return None, out
                continue
            if verdict == PIN_ASSIGNED:
                assigned = True
                out.append((DO_PIN, wr))
        if overflow and overflow_blocked(wr, *counts()):
            wq.cycle()
            cycled += 1
            if cycled >= len(q):
                return None, out
            continue
        if wr.b > 0:
            if sz <= wr.b:
                wr.b -= sz
                if wr.b == 0:
                    wr.n = 1
            else:
                out.append((DO_STATUS, wr.reply, status_pending(409, "Message Size Exceeds MaxBytes", wr.n, wr.b)))
                if assigned:  # the pin just given to this request goes with it
                    out.append((DO_UNPIN,))
                del q[0]
                continue
        if has_interest(wr.reply):
            return (pop_and_requeue(wq) if policy == "prioritized" else wq.pop()), out
        del q[0]  # the requester is gone: drop silently
    return None, out


# ---------------------------------------------------------------------- the pin
class Pin:
    """The current pin of a ``pinned_client`` consumer (nats-server currentPinId / pinnedTS / pinnedTtl)."""

    __slots__ = ("id", "ts", "group", "timer")

    def __init__(self, id_: str, ts: int, group: str) -> None:
        self.id = id_
        self.ts = ts
        self.group = group
        self.timer = None


class PriorityGroups:
    """The priority-group state of a pull consumer whose ``priority_policy`` is not ``none``: the pin (in memory
    only, as in nats-server) and its ``priority_timeout`` timer."""

    __slots__ = ("c", "pin")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.pin: Pin | None = None

    @property
    def pin_id(self) -> str | None:
        pin = self.pin
        return pin.id if pin is not None else None

    def check_request(self, req: rq.PullRequest) -> bytes | None:
        """The rest of the request-time checks (after :func:`refuse_request`): group, then the pin."""
        cfg = self.c.config
        if not req.group:
            return status(400, "Bad Request - Priority Group missing")
        if req.group not in (cfg.priority_groups or ()):
            return status(400, "Bad Request - Invalid Priority Group")
        pin = self.pin
        if pin is not None:
            if req.id == pin.id:
                self._set_pin_timer()  # a pull from the pinned client keeps the pin
            elif req.id:
                return status(423, "Nats-Pin-Id mismatch")
        return None

    def add(self, wq: "WaitQueue", wr: "WaitingRequest") -> bool:
        if self.c.config.priority_policy == "prioritized":
            return add_prioritized(wq, wr)
        return wq.add(wr)

    def pin_header(self, hdr: bytes) -> bytes:
        """nats-server genHeader(hdr, "Nats-Pin-Id", currentPinId), on every message to a pull of a
        ``pinned_client`` consumer: appended after the stored headers."""
        if self.c.config.priority_policy != "pinned_client":
            return hdr
        pin = self.pin
        value = pin.id.encode() if pin is not None else b""
        base = hdr[:-2] if len(hdr) > 2 else b"NATS/1.0\r\n"
        return base + PIN_ID_HDR + b": " + value + b"\r\n\r\n"

    def assign(self, wr: "WaitingRequest") -> None:
        """nats-server assignNewPinId: only a request of a priority group can be pinned (a plain pull that reaches
        this point is served without a pin, and its messages carry an empty ``Nats-Pin-Id``)."""
        if not wr.group:
            return
        c = self.c
        old = self.pin
        pin = Pin(nuid(), c.clock.time_ns(), wr.group)
        if old is not None:
            pin.timer = old.timer
        self.pin = pin
        wr.pin_id = pin.id
        self._set_pin_timer()
        adv.pinned(c, wr.group, pin.id)

    def unassign(self) -> None:
        pin = self.pin
        if pin is None:
            return
        self.pin = None
        if pin.timer is not None:
            pin.timer.cancel()
            pin.timer = None

    def _set_pin_timer(self) -> None:
        """nats-server setPinnedTimer: (re)start ``priority_timeout`` for the current pin."""
        pin = self.pin
        if pin is None:
            return
        if pin.timer is not None:
            pin.timer.cancel()
        c = self.c
        pin.timer = c.clock.call_later(c.config.priority_timeout / 1e9, self._pin_expired, pin.group)

    def _pin_expired(self, group: str) -> None:
        pin = self.pin
        c = self.c
        if c.closed or pin is None:
            return
        pin.timer = None
        self.unassign()
        adv.unpinned(c, group, REASON_TIMEOUT)
        c.kick()

    def unpin(self, group: str) -> None:
        """UNPIN: drop the pin (if any) and announce it - nats-server sends UNPINNED ``admin`` either way."""
        self.unassign()
        adv.unpinned(self.c, group, REASON_ADMIN)
        self.c.kick()

    def info(self) -> list[dict] | None:
        """ConsumerInfo ``priority_groups``: the first group's state (pinned_ts is a Go time.Time: always there)."""
        groups = self.c.config.priority_groups
        if not groups:
            return None
        st: dict = {"group": groups[0]}
        pin = self.pin
        if pin is not None:
            st["pinned_client_id"] = pin.id
        st["pinned_ts"] = format_time(pin.ts if pin is not None else ZERO_TIME_NS)
        return [st]


# ---------------------------------------------------------------------- prioritized wait queue
def _prio(wr: "WaitingRequest") -> int:
    return wr.priority if wr.group else NO_PRIORITY


def add_prioritized(wq: "WaitQueue", wr: "WaitingRequest") -> bool:
    """nats-server waitQueue.addPrioritized: insert after every request of the same or a lower number."""
    if wq.is_full():
        return False
    _insert(wq.q, wr)
    wq.last = wr.received
    return True


def pop_and_requeue(wq: "WaitQueue") -> "WaitingRequest":
    """nats-server waitQueue.popAndRequeue: take one from the head; if it wants more it goes behind the others of
    its priority (round-robin within a level)."""
    q = wq.q
    wr = q[0]
    wr.d += 1
    wr.n -= 1
    if wr.n > 0 and len(q) > 1:
        del q[0]
        _insert(q, wr)
    elif wr.n <= 0:
        del q[0]
    return wr


def _insert(q: list, wr: "WaitingRequest") -> None:
    p = _prio(wr)
    i = len(q)
    for j, other in enumerate(q):
        if _prio(other) > p:
            i = j
            break
    q.insert(i, wr)


# ---------------------------------------------------------------------- UNPIN
_OFFSET = re.compile(r" at offset \d+$")


def _unpin_json_error(body: bytes) -> ApiError | rq.JSApiConsumerUnpinRequest:
    """json.Unmarshal into JSApiConsumerUnpinRequest (plain Unmarshal: unknown fields pass, errors carry no
    offset, an empty body is "unexpected end of JSON input")."""
    if not body.strip():
        return ApiError.of("JSInvalidJSONErr", err="unexpected end of JSON input")
    r = rq.parse_request(rq.JSApiConsumerUnpinRequest, body, strict=False, unmarshal=True)
    if isinstance(r, ApiError):
        text = r.description.removeprefix("invalid JSON: ")
        text = _OFFSET.sub("", text)
        if text == "unexpected EOF":
            text = "unexpected end of JSON input"
        return ApiError.of("JSInvalidJSONErr", err=text)
    return r


def unpin_request(js: "JetStream", req: "ApiRequest") -> dict | ApiError:
    """``$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`` with ``{"group": "<g>"}`` (nats-server
    jsConsumerUnpinRequest, single server: body, group, group name, stream, consumer, group of the consumer)."""
    r = _unpin_json_error(req.body)
    if isinstance(r, ApiError):
        return r
    if not r.group:
        return ApiError.of("JSInvalidJSONErr", err="consumer group not specified")
    if not _VALID_GROUP.fullmatch(r.group):
        return ApiError.of("JSConsumerInvalidGroupNameErr")
    c = consumer_of(js, req)
    if isinstance(c, ApiError):
        return c
    if r.group not in (c.config.priority_groups or ()):
        return ApiError.of("JSConsumerInvalidPriorityGroupErr")
    c.unpin(r.group)
    return {}
