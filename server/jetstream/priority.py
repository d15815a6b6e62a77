"""Priority groups on pull consumers (ADR-42, nats-server 2.11+): ``overflow``, ``pinned_client``, ``prioritized``,
and ``$JS.API.CONSUMER.UNPIN.<stream>.<consumer>``.

Theory of operation
-------------------
A consumer with ``priority_policy`` other than ``none`` names its groups in ``priority_groups`` (nats-server uses
only the first one).  Every JSON pull request must then name one of them in ``group``; a plain-integer or empty
pull carries no priority group at all and is not checked (nats-server's ``priorityGroup`` is nil for those).
:meth:`PriorityMixin._check_priority_request` holds the request-time checks in nats-server's order
(processNextMsgRequest): ``400 Bad Request - Not a Overflow Priority consumer`` / ``- Not a Pinned Client Priority
consumer`` / ``- Priority must be between 0 and 9`` / ``- Priority Group missing`` / ``- Invalid Priority Group``,
then, while a client is pinned, ``423 Nats-Pin-Id mismatch`` for a request naming another pin id; a request naming
the current pin pushes the pin's timer back.

Selection happens message by message in ``PullMixin._next_waiting`` (nats-server nextWaiting), which asks this
module about the request at the head of the wait queue:

``pinned_client`` (:meth:`PriorityMixin._pin_verdict`)
    With no pin, the first request without ``id`` gets one: a fresh NUID becomes the pin, ``pinned_ts`` is now, the
    PINNED advisory goes out and the ``priority_timeout`` timer starts.  A request that still carries an old ``id``
    is ended with ``423 Nats-Wrong-Pin-Id`` (with ``Nats-Pending-Messages`` / ``-Bytes``).  With a pin, requests
    carrying it are served, requests without ``id`` are standbys (moved to the tail, not served), requests with
    another ``id`` get the same 423.  Every message delivered to a pull carries ``Nats-Pin-Id: <pin>``
    (:meth:`PriorityMixin._pin_header`).  The pin is dropped when its timer fires (no pull with the pin for
    ``priority_timeout``; deliveries do not count) with UNPINNED ``timeout``, or by UNPIN with UNPINNED ``admin``;
    the next message then pins the first eligible standby.  Nothing is taken back from the old client: messages it
    holds unacknowledged are redelivered only after their ack_wait, possibly to the new pin (docs/exclusivity.md).

``overflow`` (:meth:`PriorityMixin._overflow_blocked`)
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
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi import requests as rq
from skiff.protocol.jsapi.timefmt import ZERO_TIME_NS, format_time

from . import consumer_advisories as adv
from .advisories import nuid
from .pull import PIN_ASSIGNED, PIN_OK, PIN_STANDBY, PIN_WRONG, status, status_pending

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


class Pin:
    """The current pin of a ``pinned_client`` consumer (nats-server currentPinId / pinnedTS / pinnedTtl)."""

    __slots__ = ("id", "ts", "group", "timer")

    def __init__(self, id_: str, ts: int, group: str) -> None:
        self.id = id_
        self.ts = ts
        self.group = group
        self.timer = None


class PriorityMixin:
    """The priority-group half of :class:`~.consumer.Consumer` (pull consumers only)."""

    __slots__ = ()

    # ------------------------------------------------------------------ pull request checks
    def _check_priority_request(self: "Consumer", req: rq.PullRequest) -> bytes | None:
        """The status a JSON pull request is refused with, or None (nats-server processNextMsgRequest)."""
        pp = self.config.priority_policy
        if (req.min_pending or req.min_ack_pending) and pp != "overflow":
            return status(400, "Bad Request - Not a Overflow Priority consumer")
        if req.id and pp != "pinned_client":
            return status(400, "Bad Request - Not a Pinned Client Priority consumer")
        if req.priority < 0 or req.priority > 9:
            return status(400, "Bad Request - Priority must be between 0 and 9")
        if pp == "none":
            return None
        if not req.group:
            return status(400, "Bad Request - Priority Group missing")
        if req.group not in (self.config.priority_groups or ()):
            return status(400, "Bad Request - Invalid Priority Group")
        pin = self._pin
        if pin is not None:
            if req.id == pin.id:
                self._set_pin_timer()  # a pull from the pinned client keeps the pin
            elif req.id:
                return status(423, "Nats-Pin-Id mismatch")
        return None

    # ------------------------------------------------------------------ wait queue order
    def _add_waiting(self: "Consumer", wr: "WaitingRequest") -> bool:
        if self.config.priority_policy == "prioritized":
            return add_prioritized(self.waiting, wr)
        return self.waiting.add(wr)

    def _pop_waiting(self: "Consumer") -> "WaitingRequest":
        if self.config.priority_policy == "prioritized":
            return pop_and_requeue(self.waiting)
        return self.waiting.pop()

    # ------------------------------------------------------------------ selection
    def _pin_verdict(self: "Consumer", wr: "WaitingRequest", need_pin: bool) -> int:
        """What the head request ``wr`` may do with the next message under a pin (nats-server nextWaiting).
        ``need_pin`` is whether the consumer had no pin when this selection began."""
        if need_pin:
            if not wr.pin_id:
                self._assign_pin(wr)
                return PIN_ASSIGNED
            return PIN_WRONG  # an id from a pin that no longer exists
        pin = self._pin
        if pin is None or wr.pin_id == pin.id:
            return PIN_OK
        if not wr.pin_id:
            return PIN_STANDBY
        return PIN_WRONG

    def _wrong_pin(self: "Consumer", wr: "WaitingRequest") -> None:
        self.server.publish(wr.reply, b"", "", status_pending(423, "Nats-Wrong-Pin-Id", wr.n, wr.b))

    def _overflow_blocked(self: "Consumer", wr: "WaitingRequest") -> bool:
        """An overflow request whose thresholds are not met waits (either threshold met is enough)."""
        if wr.min_pending <= 0 and wr.min_ack_pending <= 0:
            return False
        # num_pending has already been decremented for the message at hand: +1, as nats-server's o.npc+1.
        if wr.min_pending > 0 and wr.min_pending <= self.num_pending() + 1:
            return False
        if wr.min_ack_pending > 0 and wr.min_ack_pending <= len(self.core.pending):
            return False
        return True

    def _pin_header(self: "Consumer", hdr: bytes) -> bytes:
        """nats-server genHeader(hdr, "Nats-Pin-Id", currentPinId): appended after the stored headers."""
        pin = self._pin
        value = pin.id.encode() if pin is not None else b""
        base = hdr[:-2] if len(hdr) > 2 else b"NATS/1.0\r\n"
        return base + PIN_ID_HDR + b": " + value + b"\r\n\r\n"

    # ------------------------------------------------------------------ the pin
    def _assign_pin(self: "Consumer", wr: "WaitingRequest") -> None:
        """nats-server assignNewPinId: only a request of a priority group can be pinned (a plain pull that reaches
        this point is served without a pin, and its messages carry an empty ``Nats-Pin-Id``)."""
        if not wr.group:
            return
        old = self._pin
        pin = Pin(nuid(), self.clock.time_ns(), wr.group)
        if old is not None:
            pin.timer = old.timer
        self._pin = pin
        wr.pin_id = pin.id
        self._set_pin_timer()
        adv.pinned(self, wr.group, pin.id)

    def _unassign_pin(self: "Consumer") -> None:
        pin = self._pin
        if pin is None:
            return
        self._pin = None
        if pin.timer is not None:
            pin.timer.cancel()
            pin.timer = None

    def _set_pin_timer(self: "Consumer") -> None:
        """nats-server setPinnedTimer: (re)start ``priority_timeout`` for the current pin."""
        pin = self._pin
        if pin is None:
            return
        if pin.timer is not None:
            pin.timer.cancel()
        pin.timer = self.clock.call_later(self.config.priority_timeout / 1e9, self._pin_expired, pin.group)

    def _pin_expired(self: "Consumer", group: str) -> None:
        pin = self._pin
        if self.closed or pin is None:
            return
        pin.timer = None
        self._unassign_pin()
        adv.unpinned(self, group, REASON_TIMEOUT)
        self.kick()

    def unpin(self: "Consumer", group: str) -> None:
        """UNPIN: drop the pin (if any) and announce it - nats-server sends UNPINNED ``admin`` either way."""
        self._unassign_pin()
        adv.unpinned(self, group, REASON_ADMIN)
        self.kick()

    # ------------------------------------------------------------------ info
    def _priority_groups_info(self: "Consumer") -> list[dict] | None:
        """ConsumerInfo ``priority_groups``: the first group's state (pinned_ts is a Go time.Time: always there)."""
        groups = self.config.priority_groups
        if not groups:
            return None
        st: dict = {"group": groups[0]}
        pin = self._pin
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
    stream = js.streams.get(req.tokens[2])
    if stream is None:
        return ApiError.of("JSStreamNotFoundErr")
    c = stream.consumers.get(req.tokens[3])
    if c is None:
        return ApiError.of("JSConsumerNotFoundErr")
    if r.group not in (c.config.priority_groups or ()):
        return ApiError.of("JSConsumerInvalidPriorityGroupErr")
    c.unpin(r.group)
    return {}
