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
:meth:`~.consumer_core.ConsumerCore.progress`); this module reads the ack, records the outcome in the consumer
store, answers, and sends the advisories.  On interest and workqueue streams each ack asks the stream whether any consumer still needs the message
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

ACK_PREFIX = "$JS.ACK."
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
    return parse_num(toks[off + 3]), parse_num(toks[off + 4]), parse_num(toks[off + 2])


class AckMixin:
    """Ack half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    def process_ack(self: "Consumer", toks: list[str], reply: str, msg: bytes) -> None:
        sseq, dseq, dc = ack_reply_info(toks)
        skip_reply = sseq == 0
        if self.dthresh > 0:
            self._suppress_deletion()
        if not msg or msg == ACK_ACK or msg == ACK_OK:
            if not self.process_ack_msg(sseq, dseq, dc, reply, True):
                skip_reply = True
        elif msg.startswith(ACK_NEXT):
            self.process_ack_msg(sseq, dseq, dc, "", True)
            self.process_next_request(reply, b"", msg[len(ACK_NEXT):])
            skip_reply = True
        elif msg.startswith(ACK_NAK):
            self._process_nak(sseq, dseq, dc, msg)
        elif msg == ACK_PROGRESS:
            self._progress_update(sseq)
        elif msg.startswith(ACK_TERM):
            reason = msg[len(ACK_TERM):].strip().decode("utf-8", "replace")
            if not self.process_term(sseq, dseq, dc, reason, reply):
                skip_reply = True
        if reply and not skip_reply:
            self._ack_reply(reply)
        self._after_change()

    def process_ack_msg(self: "Consumer", sseq: int, dseq: int, dc: int, reply: str, sample: bool) -> bool:
        """nats-server processAckMsgLocked for a standalone server; returns whether the caller may answer."""
        if self.closed:
            return False
        r = self.core.ack(sseq, dseq)
        if r is None:
            return False  # beyond what this consumer delivered, or ack_policy none: ignored, no reply
        if r is ALREADY:
            return True
        if sample and r.entry is not None and self.sfreq > 0:
            self._sample_ack(sseq, dseq, dc, r.entry[1])
        try:
            self.store.update_acks(r.dseq, sseq)
        except Exception as e:  # noqa: BLE001 - a state store refusing an ack must never break the ack path
            self._store_update_failed("ack", e)
        self.lat = self.clock.time_ns()
        self._state_changed()
        if not self.core.pending:
            self.cset.maybe_no_pending(self)
        ack_in_place = self.stream.config.retention != "limits"
        if not ack_in_place and reply:
            self._ack_reply(reply)
        if ack_in_place:
            for s in r.acked:
                self.cset.ack_msg(self, s)
        if r.was_full:
            self.kick()
        return ack_in_place

    def _ack_reply(self: "Consumer", reply: str) -> None:
        """Confirm an ack.  With ``sync_interval: always`` only once the consumer state holding it is fsynced
        (durability.py, "Consumer acks", says what each sync_interval guarantees)."""
        if self.persistent and self.store.durable:
            self.stream.js.durability.consumer_ack(self.store, reply)
        else:
            self.server.publish(reply, b"")

    def _sample_ack(self: "Consumer", sseq: int, dseq: int, dc: int, ts: int) -> None:
        f = self.sfreq
        if f <= 0 or (f < 100 and random.randrange(100) > f):
            return
        adv.ack_metric(self, dseq, sseq, self.clock.time_ns() - ts, dc)

    def _process_nak(self: "Consumer", sseq: int, dseq: int, dc: int, nak: bytes) -> None:
        arg = nak[len(ACK_NAK):].strip()
        delay = _nak_delay(arg) if arg else None
        r = self.core.nak(sseq, dseq, delay, self.clock.time_ns())
        if r == NAK_IGNORED:
            return
        adv.naked(self, dseq, sseq, dc)
        if r == NAK_DELAYED:
            p = self.core.pending[sseq]
            self.store.update_delivered(p[0], sseq, dc, p[1])
            self._state_changed()
            if self._ptmr is not None:
                self._reset_ptmr(0.01)
            return
        if arg and delay is None:  # nats-server logs it and NAKs without a delay
            self.server.log_warning("JetStream consumer bad NAK delay value", stream=self.stream.name,
                                    consumer=self.name, value=arg.decode("utf-8", "replace"))
        self.kick()

    def _progress_update(self: "Consumer", sseq: int) -> None:
        p = self.core.progress(sseq, self.clock.time_ns())
        if p is not None:
            self.store.update_delivered(p[0], sseq, 1, p[1])
            self._state_changed()

    def process_term(self: "Consumer", sseq: int, dseq: int, dc: int, reason: str, reply: str) -> bool:
        ok = self.process_ack_msg(sseq, dseq, dc, reply, False)
        adv.terminated(self, dseq, sseq, dc, reason)
        return ok


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
