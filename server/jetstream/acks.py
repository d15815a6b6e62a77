"""Acks: the ack reply subject, the ack payloads, and what each does (nats-server ``processAck`` and friends).

Theory of operation
-------------------
Every delivery carries the reply subject
``$JS.ACK.<stream>.<consumer>.<delivery count>.<stream seq>.<consumer seq>.<timestamp ns>.<pending>``; a client
acks by publishing to it.  The payload picks the action (ADR-15):

=================================  ===========================================================================
empty, ``+ACK``, ``+OK``           ack (explicit: that message; all: everything up to it)
``+NXT``[`` N`` / `` {json}``]     ack, then treat the ack's own reply subject as a pull request
``-NAK``[`` {"delay":ns}`` / dur]  redeliver now, or after the delay (an unparsable delay is a plain NAK)
``+WPI``                           in progress: restart the ack timer of that message
``+TERM``[`` reason``]             never redeliver; counts as acked; MSG_TERMINATED advisory
=================================  ===========================================================================

Any ack with a reply subject gets an empty message back (the clients' ``ack_sync`` / double ack) once it has been
applied - except ``+NXT``, an ack for a stream sequence the consumer has not reached yet, and acks of an
``ack_policy: none`` consumer (nats-server does not even subscribe to its ack subject: a requester gets 503).

What an ack does to pending and the ack floor is decided by the consumer's core
(:meth:`~.consumer_core.ConsumerCore.ack`, :meth:`~.consumer_core.ConsumerCore.nak`,
:meth:`~.consumer_core.ConsumerCore.progress`); the functions of this module hold no state of their own: they read
the ack, hand it to the core, record the outcome through the consumer's
:class:`~.consumer_state.StateRecorder`, answer, and send the advisories.  On interest and workqueue streams each ack asks the stream whether any consumer still needs the message
(:meth:`~.stream_consumers.ConsumerSet.ack_msg`) and removes it if not.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from skiff.protocol.jsapi import gojson as go_json
from skiff.protocol.jsapi.timefmt import DurationParseError, parse_go_duration

from . import consumer_advisories as adv
from .consumer_core import ALREADY, NAK_DELAYED, NAK_IGNORED

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer

ACK_ACK = b"+ACK"
ACK_OK = b"+OK"
ACK_NEXT = b"+NXT"
ACK_NAK = b"-NAK"
ACK_PROGRESS = b"+WPI"
ACK_TERM = b"+TERM"


def parse_num(tok: str) -> int:
    """parseAckReplyNum: digits only, else -1."""
    if not tok or not tok.isdigit() or not tok.isascii():
        return -1
    return int(tok)


def ack_tokens(subject: str) -> tuple[str, str, list[str]] | None:
    """(stream, consumer, tokens) for an ack subject in the v1 (9 tokens) or v2 (11+) format, else None."""
    toks = subject.split(".")
    n = len(toks)
    if n == 9:
        return toks[2], toks[3], toks
    if n >= 11:
        return toks[4], toks[5], toks
    return None


def ack_reply_info(toks: list[str]) -> tuple[int, int, int]:
    """(stream seq, consumer seq, delivery count) from the tokens of an ack subject (nats-server ackReplyInfo)."""
    off = 2 if len(toks) == 9 else 4
    s, d, n = toks[off + 3], toks[off + 4], toks[off + 2]
    # parse_num inlined (three per ack): digits only, else -1
    return (int(s) if s.isdigit() and s.isascii() else -1, int(d) if d.isdigit() and d.isascii() else -1,
            int(n) if n.isdigit() and n.isascii() else -1)


def process_ack(c: "Consumer", toks: list[str], reply: str, msg: bytes) -> None:
    """An ack arrived on ``toks`` (the ack subject's tokens) with payload ``msg``."""
    # ack_reply_info in-line (once per ack); the delivery sequence and count only where they are used
    off = 2 if len(toks) == 9 else 4
    s = toks[off + 3]
    sseq = int(s) if s.isdigit() and s.isascii() else -1
    idle = c.idle
    # Inactivity.suppress does nothing for a push consumer whose delete timer is not running (someone listens)
    if idle is not None and idle.thresh > 0 and (idle.timer is not None or c.pull is not None):
        idle.suppress()
    if not msg or msg == ACK_ACK or msg == ACK_OK:
        core = c.core
        if not reply and core.ack_policy == "explicit" and not c.closed:
            # ack_msg in-line for the common ack (explicit, no reply to answer: what a client's ack() sends), once
            # per message: the same steps in the same order, without the Acked record.
            if sseq >= core.sseq and not core.flow_control:
                return  # beyond what this consumer delivered: ignored (ConsumerCore.ack's None)
            pending = core.pending
            maxp = core.maxp
            was_full = maxp > 0 and len(pending) >= maxp
            p = core.ack_explicit(sseq)
            if p is not None:
                if c.sfreq > 0:
                    d, n = toks[off + 4], toks[off + 2]
                    _sample(c, sseq, int(d) if d.isdigit() and d.isascii() else -1,
                            int(n) if n.isdigit() and n.isascii() else -1, p[1])
                dseq = p[0]
            else:
                d = toks[off + 4]
                dseq = int(d) if d.isdigit() and d.isascii() else -1
            # StateRecorder.acked in-line
            st = c.state
            try:
                st.store.update_acks(dseq, sseq)
            except Exception as e:  # noqa: BLE001 - a store refusing an ack must never break the ack path
                st._failed("ack", e)
            cset = c.cset
            # ConsumerSet.dirty changes nothing for a consumer already marked while the flush timer is armed
            if st.persistent and (cset._flush_timer is None or c not in cset._dirty):
                cset.dirty(c)
            c.lat = c.clock.time_ns()
            if not pending:
                cset.maybe_no_pending(c)
            if p is not None:
                if c.stream.config.retention != "limits":
                    cset.ack_msg(sseq)
                if was_full:
                    dl = c.delivery
                    if not dl.cont_scheduled:
                        # The first ack of a read at max_ack_pending schedules the pass; the others of that read
                        # (a client acks each message) find it scheduled: kick_soon would do nothing, a call less.
                        dl.kick_soon()
            return
    d, n = toks[off + 4], toks[off + 2]
    dseq = int(d) if d.isdigit() and d.isascii() else -1
    dc = int(n) if n.isdigit() and n.isascii() else -1
    skip_reply = sseq == 0
    dl = c.delivery
    passes = dl.passes
    if not msg or msg == ACK_ACK or msg == ACK_OK:
        if not ack_msg(c, sseq, dseq, dc, reply, True):
            skip_reply = True
        if reply and not skip_reply:
            c.state.confirm_ack(reply)
        # An ack leaves the consumer as ready as it was, unless it freed a slot at max_ack_pending, and then
        # ack_msg asked for a delivery pass (kick_soon), which tells the stream: no readiness check per ack.
        return
    elif msg.startswith(ACK_NEXT):
        ack_msg(c, sseq, dseq, dc, "", True)
        c.process_next_request(reply, b"", msg[len(ACK_NEXT):])
        skip_reply = True
    elif msg.startswith(ACK_NAK):
        _nak(c, sseq, dseq, dc, msg)
    elif msg == ACK_PROGRESS:
        _progress(c, sseq)
    elif msg.startswith(ACK_TERM):
        reason = msg[len(ACK_TERM):].strip().decode("utf-8", "replace")
        if not terminate(c, sseq, dseq, dc, reason, reply):
            skip_reply = True
    if reply and not skip_reply:
        c.state.confirm_ack(reply)
    # A delivery pass (kicked by the ack) already told the stream whether c is ready, or one is scheduled to
    # (kick_soon) and will.
    if dl.passes == passes and not dl.cont_scheduled:
        dl.after_change()


def ack_msg(c: "Consumer", sseq: int, dseq: int, dc: int, reply: str, sample: bool) -> bool:
    """nats-server processAckMsgLocked for a standalone server; returns whether the caller may answer."""
    if c.closed:
        return False
    r = c.core.ack(sseq, dseq)
    if r is None:
        return False  # beyond what this consumer delivered, or ack_policy none: ignored, no reply
    if r is ALREADY:
        return True
    if sample and r.entry is not None and c.sfreq > 0:
        _sample(c, sseq, dseq, dc, r.entry[1])
    c.state.acked(r.dseq, sseq)
    c.lat = c.clock.time_ns()
    if not c.core.pending:
        c.cset.maybe_no_pending(c)
    ack_in_place = c.stream.config.retention != "limits"
    if not ack_in_place and reply:
        c.state.confirm_ack(reply)
    if ack_in_place:
        for s in r.acked:
            c.cset.ack_msg(s)
    if r.was_full:
        c.delivery.kick_soon()
    return ack_in_place


def terminate(c: "Consumer", sseq: int, dseq: int, dc: int, reason: str, reply: str) -> bool:
    """``+TERM`` (or a pending message that left the stream): acked, never redelivered, MSG_TERMINATED."""
    ok = ack_msg(c, sseq, dseq, dc, reply, False)
    adv.terminated(c, dseq, sseq, dc, reason)
    return ok


def _sample(c: "Consumer", sseq: int, dseq: int, dc: int, ts: int) -> None:
    f = c.sfreq
    if f <= 0 or (f < 100 and random.randrange(100) > f):
        return
    adv.ack_metric(c, dseq, sseq, c.clock.time_ns() - ts, dc)


def _nak(c: "Consumer", sseq: int, dseq: int, dc: int, nak: bytes) -> None:
    arg = nak[len(ACK_NAK):].strip()
    delay = _nak_delay(arg) if arg else None
    core = c.core
    r = core.nak(sseq, dseq, delay, c.clock.time_ns())
    if r == NAK_IGNORED:
        return
    adv.naked(c, dseq, sseq, dc)
    if r == NAK_DELAYED:
        p = core.pending[sseq]
        c.state.delivered(p[0], sseq, dc, p[1])
        c.ack_timer.soon(0.01)
        return
    if arg and delay is None:  # nats-server logs it and NAKs without a delay
        c.server.log_warning("JetStream consumer bad NAK delay value", stream=c.stream.name,
                             consumer=c.name, value=arg.decode("utf-8", "replace"))
    c.kick()


def _progress(c: "Consumer", sseq: int) -> None:
    p = c.core.progress(sseq, c.clock.time_ns())
    if p is not None:
        c.state.delivered(p[0], sseq, 1, p[1])


def _nak_delay(arg: bytes) -> int | None:
    """The delay of ``-NAK <arg>`` in ns: ``{"delay": ns}`` or a Go duration; None when it cannot be parsed."""
    if arg[:1] == b"{":
        try:
            d = go_json.loads(arg)  # nested input is ValueError here, never RecursionError
        except ValueError:
            return None
        if not isinstance(d, dict):
            return None
        v = d.get("delay", 0)
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        return v
    try:
        return parse_go_duration(arg.decode("utf-8", "replace"))
    except (DurationParseError, ValueError):
        return None
