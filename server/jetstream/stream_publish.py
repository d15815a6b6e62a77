"""The publish path of a stream: a message from its subjects' subscriptions to the store and the PubAck.

Theory of operation
-------------------
A stream subscribes (internal subscriptions, one per configured subject) to what it captures, so any PUB/HPUB the
server routes there reaches :meth:`StreamPublishing._inbound`, then :meth:`~StreamPublishing.process`, in-line, on
the event loop, with or without a reply subject (nats-server ``processInboundJetStreamMsg`` ->
``processJetStreamMsg``).  ``process`` runs to completion without awaiting: header checks (:mod:`.publish_checks`),
size checks, interest retention, TTL, ``store.store_msg``, dedupe bookkeeping, roll-ups, then the PubAck is *queued*
with the engine's :class:`~.durability.Durability`, which sends it once the store has handed the write to the OS (and
fsynced, with ``sync_always``).  Error acks are sent at once through the same queue so that acks keep their order.

``_inbound`` has two short cuts, each doing what ``process`` would do for its case, in the same order: a message
without headers on a stream without subject transform, seal or counters (``_plain``), and one whose only headers are
Nats-Msg-Id / Nats-Expected-Stream (``_publish_with_ids``); the next in-order message of an open fast batch goes
to ``FastBatches.append`` (batching_fast.py).

:class:`StreamPublishing` is the base of :class:`~.stream.Stream` (split out to keep each module to one concern): it
reads the plain attributes ``Stream._apply_flags`` derives from the config (``_plain``, ``_no_ack``, ``_sealed``,
``_max_msg_size``, ``_itr``, ``_rp``, ...) and the stream's store, dedupe window, consumer hooks and engine.
"""
from __future__ import annotations

from skiff.protocol import headers
from skiff.protocol.errors import ApiError
from skiff.protocol.headers import id_values
from skiff.protocol.jsapi.timefmt import SECOND, format_time
from skiff.protocol.subjects import is_valid_literal_subject
from skiff.storage.errors import DiscardNewError, MsgTooLargeError, StoreClosedError, StoreError

from . import counters, jsonout
from .publish_checks import (
    FAST_BATCH_SUFFIX, MSG_TTL, ROLLUP_ALL, ROLLUP_SUB, Checked, Duplicate, batch_refusal, check_headers,
    message_ttl,
)
from .schedules import purge_scheduler

MAX_HEADER_SIZE = 65535  # math.MaxUint16 in processJetStreamMsg
_K_INCR = counters.INCR.encode()  # as headers.nats_values() lists it
_TTL_NEEDLE = b"\r\n" + MSG_TTL.encode() + b":"
_TRACE_ERRORS = {"JSStreamMessageExceedsMaximumErr": "maximum payload exceeded",  # ErrMaxPayload
                 "JSStreamHeaderExceedsMaximumErr": "maximum payload exceeded"}


class StreamPublishing:
    def _inbound(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        # One handler for every path below (entering a try block costs nothing in 3.11): a bug, here or in a
        # consumer hook, must not cost the publisher its connection.
        try:
            if hdr_len:
                hdr = bytes(data[:hdr_len])
                msg = bytes(data[hdr_len:])
                if self._plain and reply[-4:] != FAST_BATCH_SUFFIX:
                    ids = id_values(hdr)
                    if ids is not None:
                        self._publish_with_ids(subject, reply, hdr, msg, ids[0], ids[1])
                        return
                if hdr[8:9] == b" ":  # removeHeaderStatusIfPresent: a status line is not stored
                    hdr = _strip_status(hdr)
            elif self._plain:
                msg = bytes(data)
                if reply[-4:] != FAST_BATCH_SUFFIX:
                    # The common publish, no headers, on a stream without subject transform, seal or counters:
                    # process() and check() reduced to what applies to it (same checks, same order), then
                    # store_checked().
                    mms = self._max_msg_size
                    if mms >= 0 and len(msg) > mms:
                        err = ApiError.of("JSStreamMessageExceedsMaximumErr")
                    else:
                        err = self.js.check_resources(self, len(subject) + len(msg))
                    if err is None:
                        self.store_checked(subject, reply, b"", msg, "", "", b"}", bool(reply) and not self._no_ack)
                    else:
                        self._nak(reply, bool(reply) and not self._no_ack, err)
                    return
                b = self._fast_expect.get(reply)
                if b is not None:  # the next in-order message of an open fast batch (FastBatches.append)
                    self.batching.fast.append(b, subject, reply, msg)
                    return
                hdr = b""  # any other fast batch message: process() below
            else:
                hdr, msg = b"", bytes(data)
            self.process(subject, reply, hdr, msg)
        except Exception as e:
            self.server.log_error("JetStream stream failed to process a message", stream=self.name,
                                  subject=subject, error=repr(e))

    #: the ``js`` event of a traced message while process() runs for it (trace_inbound), else None
    _js_trace: dict | None = None

    def trace_inbound(self, trace, subject: str, reply: str, hdr_len: int, data: bytes) -> None:
        """A traced message (core/msgtrace.py; nats-server processInboundJetStreamMsg with a msgTrace): the trace's
        ``js`` event, then :meth:`process`, which fills it in.  A trace-only message is checked and not stored: only an
        error is answered (processJetStreamMsg returns before the store, and before the PubAck).  A stored one keeps
        ``Nats-Trace-Dest: trace disabled``, so that a consumer's delivery of it starts no trace of its own."""
        from ..core.msgtrace import DISABLED, TRACE_DEST

        ev = trace.jetstream(self.name)
        hdr = bytes(data[:hdr_len])
        msg = bytes(data[hdr_len:])
        if hdr[8:9] == b" ":
            hdr = _strip_status(hdr)
        if not trace.only:  # stream.go setHeader(MsgTraceDest, MsgTraceDestDisabled): in place
            hdr = headers.replace_value(hdr, TRACE_DEST, DISABLED)
        self._js_trace = ev
        try:
            self.process(subject, reply, hdr, msg, trace_only=trace.only)
        except Exception as e:  # as _inbound: never the publisher's connection
            self.server.log_error("JetStream stream failed to process a message", stream=self.name,
                                  subject=subject, error=repr(e))
        finally:
            self._js_trace = None

    def process(self, subject: str, reply: str, hdr: bytes, msg: bytes, sourced: bool = False,
                trace_only: bool = False) -> int:
        """Store one published message; returns its sequence, or 0 when it was not stored.  ``sourced``: a
        message the server made (a fired schedule) or a source brought in (sourcing.py) skips the checks nats-server
        skips for it (publish_checks.check_headers).  ``trace_only``: check it, answer an error, store nothing
        (trace_inbound)."""
        if self.closed:
            return 0
        if self._itr is not None:  # subject_transform applies before anything else
            subject = self._itr.match(subject) or subject
        can_respond = bool(reply) and not self._no_ack
        if self._sealed:
            return self._nak(reply, can_respond, ApiError.of("JSStreamSealedErr"))
        if reply[-4:] == FAST_BATCH_SUFFIX or (hdr and b"Nats-Batch-Id:" in hdr):
            batch = batch_refusal(reply, hdr)
            if batch is not None:
                # nats-server processJetStream{Atomic,Fast}BatchMsg: sealed, the server and account limits, the
                # size, then "disabled".
                err = self.js.check_resources(self, len(subject) + len(hdr) + len(msg), len(hdr))
                if err is not None:
                    return self._nak(reply, can_respond, err)
                mms = self._max_msg_size
                if mms >= 0 and (len(hdr) > mms or len(msg) > mms - len(hdr)):
                    return self._nak(reply, can_respond, ApiError.of("JSStreamMessageExceedsMaximumErr"))
                if trace_only:
                    return 0  # never into a batch: a trace-only message is not stored
                if batch == "JSBatchPublishDisabledErr":
                    if self.config.allow_batched:
                        return self.batching.fast.process(subject, reply, hdr, msg, can_respond)
                elif self.config.allow_atomic:
                    return self.batching.process_atomic(subject, reply, hdr, msg, can_respond)
                return self._nak(reply, can_respond, ApiError.of(batch))
        mms = self._max_msg_size
        if mms >= 0 and (len(hdr) > mms or len(msg) > mms - len(hdr)):
            # nats-server 2.15.1 refuses a message over max_msg_size before any header check (a duplicate, a wrong
            # expected stream or sequence, a TTL or counter refusal: measured); check() repeats it after a counter or
            # a schedule rewrote the message, as processJetStreamMsg does.
            return self._nak(reply, can_respond, ApiError.of("JSStreamMessageExceedsMaximumErr"))
        res = self.check(subject, hdr, msg, sourced)
        if res.__class__ is tuple:
            ev = self._js_trace
            if ev is not None:  # updateJetStreamEvent, then the trace-only return of processJetStreamMsg
                ev["ts"] = format_time(self.server.clock.time_ns())
                ev["subject"] = subject
                if self._interest_retention and not (
                        self.consumers and self.interest is not None and self.interest(subject)):
                    ev["nointerest"] = True
                if trace_only:
                    return 0
            return self.store_checked(subject, reply, *res, can_respond, sourced)
        if isinstance(res, Duplicate):
            if self._js_trace is not None:
                self._js_trace["error"] = "msgid is duplicate"  # errMsgIdDuplicate
            if can_respond:
                self.js.durability.send_stored(self, reply,
                                               self._pub_ack_prefix + b"%d,\"duplicate\": true}" % res.seq, res.seq)
            return 0
        return self._nak(reply, can_respond, res)

    def _publish_with_ids(self, subject: str, reply: str, hdr: bytes, msg: bytes, raw_id: bytes | None,
                          raw_stream: bytes | None) -> None:
        """:meth:`process` for a publish whose headers are only Nats-Msg-Id and/or Nats-Expected-Stream
        (:func:`~protocol.headers.id_values`: the Spark connector's writes, the clients' ``publish(msg_id=...)``) on
        a :attr:`_plain` stream: what :meth:`process`, :meth:`check` and :func:`.publish_checks.check_headers` do for
        such a block, in their order (max_msg_size 10054, expected stream 10060, the duplicate, the header size 10097,
        the resources), then :meth:`store_checked`.  No batch, schedule, counter, TTL or roll-up check applies: their
        keys are absent."""
        can_respond = bool(reply) and not self._no_ack
        hlen = len(hdr)
        mms = self._max_msg_size
        if mms >= 0 and (hlen > mms or len(msg) > mms - hlen):
            self._nak(reply, can_respond, ApiError.of("JSStreamMessageExceedsMaximumErr"))
            return
        if raw_stream:
            sname = raw_stream.decode("utf-8", "surrogateescape")  # headers.text in-line
            if sname and sname != self.name:
                self._nak(reply, can_respond, ApiError.of("JSStreamNotMatchErr"))
                return
        msg_id = raw_id.decode("utf-8", "surrogateescape") if raw_id else ""
        if msg_id:
            dup = self.dedupe.check(msg_id)
            if dup:
                if can_respond:
                    self.js.durability.send_stored(self, reply,
                                                   self._pub_ack_prefix + b"%d,\"duplicate\": true}" % dup, dup)
                return
        if hlen > MAX_HEADER_SIZE:
            err = ApiError.of("JSStreamHeaderExceedsMaximumErr")
        else:
            err = self.js.check_resources(self, len(subject) + hlen + len(msg), hlen)
        if err is not None:
            self._nak(reply, can_respond, err)
            return
        self.store_checked(subject, reply, hdr, msg, msg_id, "", b"}", can_respond)

    def check(self, subject: str, hdr: bytes, msg: bytes, sourced: bool = False,
              counted: int = -1) -> "tuple | Duplicate | ApiError":
        """The checks half of :meth:`process`: ``(hdr, msg, msg_id, rollup, ack_tail)`` for the store (counters
        rewrite the message), a :class:`Duplicate`, or the error for the PubAck.  ``counted``: the size a batch
        message already had checked against the limits (check_resources counts what it lets through until the
        next refresh, so a second check of the same message would count it twice)."""
        msg_id = rollup = ""
        incr = None
        if hdr:
            values = headers.nats_values(hdr)  # one scan; the checks read only the keys it found
            if _K_INCR in values:
                incr = counters.check_incr(hdr, msg, self._counter)
                if isinstance(incr, ApiError):
                    return incr
            res = check_headers(self, subject, hdr, sourced, values)
            if res.__class__ is not Checked:
                return res
            msg_id, rollup, new_hdr = res
            if new_hdr is not None:
                hdr = new_hdr
        ack_tail = b"}"
        if self._counter:
            if incr is None:
                return ApiError.of("JSMessageIncrMissingErr")
            res = counters.apply(self.store, subject, hdr, incr)
            if isinstance(res, ApiError):
                return res
            hdr, msg, value = res
            maxp = self.server.options.max_payload
            if len(hdr) > maxp or len(msg) > maxp - len(hdr):
                return ApiError.of("JSStreamMessageExceedsMaximumErr")
            ack_tail = b',"val":"' + value.encode() + b'"}'
        mms = self._max_msg_size
        if mms >= 0 and (len(hdr) > mms or len(msg) > mms - len(hdr)):
            return ApiError.of("JSStreamMessageExceedsMaximumErr")
        if len(hdr) > MAX_HEADER_SIZE:
            return ApiError.of("JSStreamHeaderExceedsMaximumErr")
        size = len(subject) + len(hdr) + len(msg)
        if size != counted:
            err = self.js.check_resources(self, size, len(hdr))
            if err is not None:
                return err
        return (hdr, msg, msg_id, rollup, ack_tail)

    def store_checked(self, subject: str, reply: str, hdr: bytes, msg: bytes, msg_id: str, rollup: str,
                      ack_tail: bytes, can_respond: bool, sourced: bool = False) -> int:
        """The store half of :meth:`process`, for a message whose checks passed (an atomic batch's commit
        checks all its messages first, then stores each through here: batching.py)."""
        js = self.js
        store = self.store
        now = self._time_ns()
        if self._interest_retention and not (self.consumers and self.interest is not None and self.interest(subject)):
            # No interest: the sequence is used up, nothing is stored, the publisher gets a normal ack.
            seq = store.skip_msg(ts=now)
            self.last_msg_id = msg_id
            self.dedupe.store(msg_id, seq, now)
            if rollup and self._allow_rollup:
                self._rollup(subject, rollup, 0)
            if hdr and self._allow_rollup and b"Nats-Schedule-Next:" in hdr:
                purge_scheduler(self, hdr)
            js.durability.stored(self, seq, reply if can_respond else "", ack_tail)
            return seq

        ttl = 0
        if hdr and _TTL_NEEDLE in hdr:  # what message_ttl's lookup searches for: absent, it returns 0
            ttl = message_ttl(hdr)
            if isinstance(ttl, ApiError):
                if sourced:
                    ttl = 0
                else:
                    return self._nak(reply, can_respond, ttl)
            if sourced and not self.config.allow_msg_ttl:
                ttl = 0  # kept in the header, not applied
            sdm = self._sdm_ttl
            if ttl > 0 and sdm > 0 and ttl < sdm // SECOND:
                # Markers must outlive the message they stand for: raise the TTL and rewrite the header.
                ttl = sdm // SECOND
                hdr = headers.set_values(hdr, {MSG_TTL: str(ttl)})
        rp_subject, rp_last = "", 0
        if self._rp is not None:
            rp_subject = self._rp.match(subject) or ""
            if rp_subject and not is_valid_literal_subject(rp_subject):
                rp_subject = ""  # nats-server suppresses a republish to an invalid subject
            if rp_subject:
                last = store.load_last_msg(subject)
                rp_last = last.seq if last is not None else 0
        try:
            seq = store.store_msg(subject, hdr, msg, now, ttl)
        except (DiscardNewError, MsgTooLargeError) as e:
            return self._nak(reply, can_respond, ApiError.of("JSStreamStoreFailedF", err=str(e)))
        except StoreClosedError:
            return 0
        except StoreError as e:  # nats-server logs store failures and does not answer
            self.server.log_error("JetStream failed to store a msg", stream=self.name, error=str(e))
            return 0
        self.last_msg_id = msg_id
        if msg_id:
            self.dedupe.store(msg_id, seq, now)
        if self.scheduling is not None:
            self.scheduling.stored(seq, subject, hdr, now)
        if rollup and self._allow_rollup:
            self._rollup(subject, rollup, 1)
        if hdr and self._allow_rollup and b"Nats-Schedule-Next:" in hdr:
            purge_scheduler(self, hdr)  # processJetStreamMsgWithRollup: a fired @at removes its schedule
        if rp_subject:
            self._republish(rp_subject, subject, seq, now, rp_last, hdr, msg)
        js.durability.stored(self, seq, reply if can_respond else "", ack_tail)
        if self._max_age or ttl:
            if self._expiry_timer is None or (ttl > 0 and now + ttl * SECOND < self._expiry_at):
                self._arm_expiry(force=True)
        for cb in self.on_new_message:
            cb(seq, subject)
        return seq

    def store_mirrored(self, subject: str, hdr: bytes, msg: bytes, seq: int, ts: int) -> bool:
        """Store a mirrored message at the origin's sequence and time (processJetStreamMsg with ``lseq`` and
        ``ts`` from the mirror); gaps were skipped by the caller.  False when it could not be stored."""
        if self.closed:
            return False
        store = self.store
        if store.msgs == 0 and store.first_seq == 0 and seq > 1:
            store.compact(seq)  # a fresh mirror starting past 1 (opt_start_seq / filtered): begin there
        ttl = 0
        if hdr and self.config.allow_msg_ttl:
            t = message_ttl(hdr)
            ttl = t if isinstance(t, int) else 0
        try:
            store.store_raw(seq, subject, hdr, msg, ts, ttl)
        except StoreClosedError:
            return False
        except StoreError as e:
            self.server.log_warning("JetStream error processing inbound mirror message", stream=self.name,
                                    error=str(e))
            return False
        self.js.durability.stored(self, seq, "")
        if self._max_age or ttl:
            self._arm_expiry(force=True)
        for cb in self.on_new_message:
            cb(seq, subject)
        return True

    def _republish(self, to: str, subject: str, seq: int, ts: int, last: int, hdr: bytes, msg: bytes) -> None:
        """nats-server's republish: the stored message plus Nats-Stream/-Subject/-Sequence/-Time-Stamp/
        -Last-Sequence (the previous sequence on this subject), and Nats-Msg-Size instead of the payload with
        ``headers_only``; appended after the message's own headers."""
        extra = (f"Nats-Stream: {self.name}\r\nNats-Subject: {subject}\r\nNats-Sequence: {seq}\r\n"
                 f"Nats-Time-Stamp: {format_time(ts)}\r\nNats-Last-Sequence: {last}\r\n")
        if self._rp_headers_only:
            extra += f"Nats-Msg-Size: {len(msg)}\r\n"
            msg = b""
        base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
        self.server.publish(to, msg, hdr=base + extra.encode("utf-8", "surrogateescape") + b"\r\n")

    def ack_payload(self, seq: int, tail: bytes = b"}") -> bytes:
        return self._pub_ack_prefix + b"%d" % seq + tail

    def error_ack(self, err: ApiError) -> bytes:
        # nats-server builds error acks from PubAck{Stream: name}: no domain, even when one is configured.
        return jsonout.dumpb({"error": err.to_dict(), "stream": self.name, "seq": 0})

    def _nak(self, reply: str, can_respond: bool, err: ApiError) -> int:
        if self._js_trace is not None:
            # processJetStreamMsg's error: an ApiError's Error() ("<description> (<err_code>)"), or for some a plain
            # error of its own (ApiError.go_returned; ErrMaxPayload for the sizes)
            self._js_trace["error"] = err.go_returned or _TRACE_ERRORS.get(err.constant) or err.go_error()
        if can_respond:
            self.js.durability.send(reply, self.error_ack(err))
        return 0

    def _rollup(self, subject: str, kind: str, keep: int) -> None:
        if kind == ROLLUP_SUB:
            self.purge(subject, 0, keep)
        elif kind == ROLLUP_ALL:
            self.purge(None, 0, keep)


def _strip_status(hdr: bytes) -> bytes:
    end = hdr.find(b"\r\n")
    return b"NATS/1.0" + hdr[end:] if end > 0 else hdr
