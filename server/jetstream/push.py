"""Push consumers: interest on the deliver subject, idle heartbeats, flow control and the rate limit.

Theory of operation
-------------------
A push consumer delivers to ``deliver_subject`` only while someone is subscribed to it (``push_bound``).  It follows
the subject with ``server.watch_interest``; the first subscriber makes it active and starts delivery, the last one
leaving stops it and, with an ``inactive_threshold`` (ephemerals: 5s), starts the delete timer (nats-server
``updateDeliveryInterest``).  ``deliver_group`` needs nothing special: deliveries are published on the deliver subject
and the server's queue-group routing hands each one to a single member.

:class:`PushDelivery` is the consumer's push adapter: it owns the interest watch, the heartbeat timer and the
flow-control window; the delivery loop (:mod:`.delivery`) asks it whether it may send (:meth:`PushDelivery.can_send`)
and tells it what went out.

Idle heartbeats (``idle_heartbeat``): one clock timer, pushed back (lazily, see ``_hb_fired``) by every delivery; when
it fires ``idle_heartbeat`` after the last delivery while the consumer is active it sends ``NATS/1.0 100 Idle
Heartbeat`` (:func:`~.delivery.send_idle_heartbeat`) with ``Nats-Consumer-Stalled: <fc reply>`` while a flow-control
request is unanswered.

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

``rate_limit_bps``: a token bucket in bytes kept by the delivery loop's :class:`~.delivery.Pacer`; a message that has
to wait is held and sent from a clock timer.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from skiff.protocol.headers import get_exact
from skiff.protocol.jsapi.subjects import FC_T

from .acks import parse_num
from .delivery import LAST_CONSUMER, LAST_STREAM, Pacer, send_idle_heartbeat

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

FC_MAX_PENDING = 32 * 1024 * 1024  # JsFlowControlMaxPending
FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class PushDelivery:
    """The push adapter of a consumer with a ``deliver_subject``."""

    __slots__ = ("c", "active", "unwatch", "hb_timer", "pbytes", "maxpb", "pblimit", "fcsz", "fcid")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.active = False
        self.unwatch = None
        self.hb_timer = None
        self.pbytes = self.maxpb = self.pblimit = self.fcsz = 0
        self.fcid = ""

    # ------------------------------------------------------------------ interest
    def start(self) -> None:
        c = self.c
        cfg = c.config
        subject = cfg.deliver_subject
        self.active = c.server.sublist.has_interest(subject)
        self.unwatch = c.server.watch_interest(subject, self._interest_changed)
        if cfg.flow_control:
            self.pblimit = FC_MAX_PENDING
            self.maxpb = FC_MAX_PENDING // 16
        if cfg.rate_limit_bps:
            if c.pacer is None:
                c.pacer = Pacer(c)
            c.pacer.set_rate_limit(cfg.rate_limit_bps)
        if cfg.idle_heartbeat:
            self._reset_hb()

    def stop(self) -> None:
        if self.unwatch is not None:
            self.unwatch()
            self.unwatch = None
        if self.hb_timer is not None:
            self.hb_timer.cancel()
            self.hb_timer = None

    def can_send(self) -> bool:
        return self.active and not (self.maxpb > 0 and self.pbytes > self.maxpb)

    def _interest_changed(self, subject: str, has: bool) -> None:
        c = self.c
        if c.closed or subject != c.config.deliver_subject:
            return
        self.update_interest(has)

    def update_interest(self, has: bool) -> None:
        """nats-server updateDeliveryInterest."""
        c = self.c
        was = self.active
        self.active = has
        idle = c.idle
        if has:
            if idle is not None:
                idle.cancel()
            if not was:
                c.kick()
        else:
            if idle is not None and idle.thresh > 0 and idle.timer is None:
                idle.arm()
            c.delivery.update_ready()

    def change_deliver_subject(self, new: str) -> None:
        """nats-server updateDeliverSubjectLocked: redeliver everything pending, watch the new subject."""
        c = self.c
        if c.core.pending:
            c.ack_timer.expire_all()
        if self.unwatch is not None:
            self.unwatch()
        c.config = c.config.model_copy(update={"deliver_subject": new})
        self.unwatch = c.server.watch_interest(new, self._interest_changed)
        self.update_interest(c.server.sublist.has_interest(new))

    # ------------------------------------------------------------------ heartbeats
    def _reset_hb(self) -> None:
        c = self.c
        hb = c.config.idle_heartbeat
        if not hb or c.closed:
            return
        if self.hb_timer is not None:
            self.hb_timer.cancel()
        self.hb_timer = c.clock.call_later(hb / 1e9, self._hb_fired)

    def _hb_fired(self) -> None:
        self.hb_timer = None
        c = self.c
        if c.closed:
            return
        # Deliveries do not push the timer back (a cancel and a new timer per message was most of a push
        # consumer's per-message cost): they only record ``ldt``, and a timer that fires less than
        # ``idle_heartbeat`` after the last delivery re-arms for the remainder instead of sending.  The heartbeat
        # still goes out exactly ``idle_heartbeat`` after the last delivery (nats-server resets its hb timer in
        # deliverMsg).  ``ldt`` is wall time; a remainder longer than one interval (the wall clock stepped back)
        # is cut to one interval.
        hb = c.config.idle_heartbeat
        if c.ldt and hb:
            rem = c.ldt + hb - c.clock.time_ns()
            if rem > 0:
                self.hb_timer = c.clock.call_later(min(rem, hb) / 1e9, self._hb_fired)
                return
        if self.active:
            send_idle_heartbeat(c, c.config.deliver_subject, self.fcid)
            # Acks come only with flow-control answers: ask again while anything is outstanding.
            if c.config.ack_policy == "flow_control" and c.core.pending and not self.fcid:
                self._send_flow_control()
        self._reset_hb()

    # ------------------------------------------------------------------ flow control
    def need_flow_control(self, size: int) -> None:
        """nats-server needFlowControl, called after a delivery whose ``size`` is already in ``pbytes``."""
        if self.fcid == "" and (self.pbytes > self.maxpb // 2 or self._fc_acks_due()):
            self._send_flow_control()
        elif self.fcid and self.pbytes - self.fcsz >= self.maxpb:
            self.fcsz += size

    def _fc_acks_due(self) -> bool:
        """``ack_policy: flow_control`` at max_ack_pending: only a flow-control answer can free the window."""
        c = self.c
        core = c.core
        return c.config.ack_policy == "flow_control" and 0 < core.maxp <= len(core.pending)

    def _send_flow_control(self) -> None:
        c = self.c
        rn = random.getrandbits(62)
        tag = []
        for _ in range(4):
            tag.append(_DIGITS[rn % 62])
            rn //= 62
        self.fcid = FC_T.format(stream=c.stream.name, consumer=c.name, tag="".join(tag))
        self.fcsz = self.pbytes
        c.server.publish(c.config.deliver_subject, b"", self.fcid, FC_REQUEST)

    def process_flow_control(self, subject: str, hdr: bytes = b"") -> None:
        """An answer on ``subject``; ``hdr`` is the answer's header block (acks, with ``ack_policy: flow_control``)."""
        c = self.c
        if subject != self.fcid or c.closed:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        c.kick()
        if c.config.ack_policy != "flow_control" or not hdr:
            return
        lsseq = parse_num(get_exact(hdr, LAST_STREAM.decode()) or "")
        if lsseq > 0:
            # A zero (or missing) consumer sequence answers a request sent before any delivery: nothing to ack.
            ldseq = max(parse_num(get_exact(hdr, LAST_CONSUMER.decode()) or ""), 0)
            c.ack(lsseq, ldseq, 1, "", False)
            c.delivery.after_change()
