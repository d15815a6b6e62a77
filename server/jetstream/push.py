"""Push consumers: interest on the deliver subject, idle heartbeats, flow control and the rate limit.

Theory of operation
-------------------
A push consumer delivers to ``deliver_subject`` only while someone is subscribed to it (``push_bound``).  It follows
the subject with ``server.watch_interest``; the first subscriber makes it active and starts delivery, the last one
leaving stops it and, with an ``inactive_threshold`` (ephemerals: 5s), starts the delete timer (nats-server
``updateDeliveryInterest``).  ``deliver_group`` needs nothing special: deliveries are published on the deliver subject
and the server's queue-group routing hands each one to a single member.

Idle heartbeats (``idle_heartbeat``): one clock timer, pushed back (lazily, see ``_hb_fired``) by every delivery; when
it fires ``idle_heartbeat`` after the last delivery while the consumer is active it sends ``NATS/1.0 100 Idle Heartbeat`` with ``Nats-Last-Consumer`` / ``Nats-Last-Stream`` (the
consumer's positions minus one, as nats-server) and ``Nats-Consumer-Stalled: <fc reply>`` while a flow-control
request is unanswered.  Ordered consumers compare ``Nats-Last-Consumer`` with what they saw.

Flow control (``flow_control``): outstanding bytes since the last answered request are counted; past half of the
window a ``NATS/1.0 100 FlowControl Request`` goes out with reply ``$JS.FC.<stream>.<consumer>.<4 chars>``, and past
the whole window delivery pauses until the client answers on that subject.  The window starts at 2 MiB (32 MiB / 16)
and doubles with every answer up to 32 MiB (nats-server ``setMaxPendingBytes`` / ``processFlowControl``).

``ack_policy: flow_control`` (2.14, ADR-60; what a durable sourcing consumer uses) acks by flow control instead of
an ack subject (there is none: an ack gets no responders).  A request also goes out when ``max_ack_pending`` messages
are outstanding, and with an idle heartbeat while any are, so a stalled window is always asked about.  The answer's
``Nats-Last-Stream`` / ``Nats-Last-Consumer`` headers ack everything up to them as ``ack_policy: all`` would; an answer
without them (what a plain client sends) acks nothing (nats-server ``needFlowControl``, ``processFlowControl``, the
``hbc`` case of ``loopAndGatherMsgs``).

``rate_limit_bps``: a token bucket in bytes (burst = the stream's max_msg_size or the server's max_payload, as Go's
``rate.NewLimiter`` is set up); a message that has to wait is put back and delivery resumes from a clock timer.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from skiff.protocol.headers import get_exact

from .acks import parse_num

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

FC_MAX_PENDING = 32 * 1024 * 1024  # JsFlowControlMaxPending
LAST_CONSUMER = b"Nats-Last-Consumer"
LAST_STREAM = b"Nats-Last-Stream"
STALLED = b"Nats-Consumer-Stalled"
FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class PushMixin:
    """The push half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    # ------------------------------------------------------------------ interest
    def _start_push(self: "Consumer") -> None:
        subject = self.config.deliver_subject
        self.active = self.server.sublist.has_interest(subject)
        self._unwatch = self.server.watch_interest(subject, self._interest_changed)
        if self.config.flow_control:
            self.pblimit = FC_MAX_PENDING
            self.maxpb = FC_MAX_PENDING // 16
        if self.config.rate_limit_bps:
            self._set_rate_limit()
        if self.config.idle_heartbeat:
            self._reset_hb()

    def _stop_push(self: "Consumer") -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._hb_timer is not None:
            self._hb_timer.cancel()
            self._hb_timer = None

    def _interest_changed(self: "Consumer", subject: str, has: bool) -> None:
        if self.closed or subject != self.config.deliver_subject:
            return
        self.update_delivery_interest(has)

    def update_delivery_interest(self: "Consumer", has: bool) -> None:
        was = self.active
        self.active = has
        if has:
            self._cancel_delete_timer()
            if not was:
                self.kick()
        else:
            if self.dthresh > 0 and self._dtmr is None:
                self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)
            self._update_ready()

    def change_deliver_subject(self: "Consumer", new: str) -> None:
        """nats-server updateDeliverSubjectLocked: redeliver everything pending, watch the new subject."""
        if self.core.pending:
            self._force_expire_pending()
        if self._unwatch is not None:
            self._unwatch()
        self.config = self.config.model_copy(update={"deliver_subject": new})
        self._unwatch = self.server.watch_interest(new, self._interest_changed)
        self.update_delivery_interest(self.server.sublist.has_interest(new))

    # ------------------------------------------------------------------ heartbeats
    def _reset_hb(self: "Consumer") -> None:
        hb = self.config.idle_heartbeat
        if not hb or self.closed or self.waiting is not None:
            return
        if self._hb_timer is not None:
            self._hb_timer.cancel()
        self._hb_timer = self.clock.call_later(hb / 1e9, self._hb_fired)

    def _hb_fired(self: "Consumer") -> None:
        self._hb_timer = None
        if self.closed:
            return
        # Deliveries do not push the timer back (a cancel and a new timer per message was most of a push
        # consumer's per-message cost): they only record ``ldt``, and a timer that fires less than
        # ``idle_heartbeat`` after the last delivery re-arms for the remainder instead of sending.  The heartbeat
        # still goes out exactly ``idle_heartbeat`` after the last delivery (nats-server resets its hb timer in
        # deliverMsg).  ``ldt`` is wall time; a remainder longer than one interval (the wall clock stepped back)
        # is cut to one interval.
        hb = self.config.idle_heartbeat
        if self.ldt and hb and self.waiting is None:
            rem = self.ldt + hb - self.clock.time_ns()
            if rem > 0:
                self._hb_timer = self.clock.call_later(min(rem, hb) / 1e9, self._hb_fired)
                return
        if self.active:
            self._send_idle_heartbeat(self.config.deliver_subject)
            # Acks come only with flow-control answers: ask again while anything is outstanding.
            if self.config.ack_policy == "flow_control" and self.core.pending and not self.fcid:
                self._send_flow_control()
        self._reset_hb()

    def _send_idle_heartbeat(self: "Consumer", subject: str) -> None:
        hdr = b"NATS/1.0 100 Idle Heartbeat\r\n%s: %d\r\n%s: %d\r\n" % (
            LAST_CONSUMER, self.core.dseq - 1, LAST_STREAM, self.core.sseq - 1)
        if self.fcid:
            hdr += STALLED + b": " + self.fcid.encode() + b"\r\n"
        self.server.publish(subject, b"", "", hdr + b"\r\n")

    # ------------------------------------------------------------------ flow control
    def _fc_blocked(self: "Consumer") -> bool:
        return self.maxpb > 0 and self.pbytes > self.maxpb

    def _need_flow_control(self: "Consumer", size: int) -> None:
        """nats-server needFlowControl, called after a delivery whose ``size`` is already in ``pbytes``."""
        if self.fcid == "" and (self.pbytes > self.maxpb // 2 or self._fc_acks_due()):
            self._send_flow_control()
        elif self.fcid and self.pbytes - self.fcsz >= self.maxpb:
            self.fcsz += size

    def _fc_acks_due(self: "Consumer") -> bool:
        """``ack_policy: flow_control`` at max_ack_pending: only a flow-control answer can free the window."""
        core = self.core
        return self.config.ack_policy == "flow_control" and 0 < core.maxp <= len(core.pending)

    def _send_flow_control(self: "Consumer") -> None:
        if self.waiting is not None:
            return
        rn = random.getrandbits(62)
        tag = []
        for _ in range(4):
            tag.append(_DIGITS[rn % 62])
            rn //= 62
        self.fcid = f"$JS.FC.{self.stream.name}.{self.name}.{''.join(tag)}"
        self.fcsz = self.pbytes
        self.server.publish(self.config.deliver_subject, b"", self.fcid, FC_REQUEST)

    def process_flow_control(self: "Consumer", subject: str, hdr: bytes = b"") -> None:
        """An answer on ``subject``; ``hdr`` is the answer's header block (acks, with ``ack_policy: flow_control``)."""
        if subject != self.fcid or self.closed:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        self.kick()
        if self.config.ack_policy != "flow_control" or not hdr:
            return
        lsseq = parse_num(get_exact(hdr, LAST_STREAM.decode()) or "")
        if lsseq > 0:
            # A zero (or missing) consumer sequence answers a request sent before any delivery: nothing to ack.
            ldseq = max(parse_num(get_exact(hdr, LAST_CONSUMER.decode()) or ""), 0)
            self.process_ack_msg(lsseq, ldseq, 1, "", False)
            self._after_change()

    # ------------------------------------------------------------------ rate limit
    def _set_rate_limit(self: "Consumer") -> None:
        bps = self.config.rate_limit_bps
        if not bps:
            self._rl_rate = 0.0
            return
        self._rl_rate = bps / 8
        mms = self.stream.config.max_msg_size
        self._rl_burst = float(mms if mms and mms > 0 else self.server.options.max_payload)
        self._rl_tokens = self._rl_burst
        self._rl_last = self.clock.monotonic()

    def _rate_delay(self: "Consumer", size: int) -> float:
        """Reserve ``size`` bytes; the seconds to wait before sending (0 = now)."""
        now = self.clock.monotonic()
        self._rl_tokens = min(self._rl_burst, self._rl_tokens + (now - self._rl_last) * self._rl_rate)
        self._rl_last = now
        self._rl_tokens -= min(size, self._rl_burst)
        if self._rl_tokens >= 0:
            return 0.0
        return -self._rl_tokens / self._rl_rate
