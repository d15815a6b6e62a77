"""Fast batch publish (ADR-50 "fast ingest", ``allow_batched``; nats-server stream.go processJetStreamFastBatchMsg,
getFastBatch, jetstream_batching.go fastBatch*).

Theory of operation
-------------------
A fast batch is told apart from a plain publish only by its reply subject::

    <prefix>.<batch id>.<flow>.<gap: ok|fail>.<batch seq>.<op>.$FI      op: 0 start, 1 append, 2 commit,
                                                                            3 commit eob, 4 ping

Unlike an atomic batch every message is checked and stored as it arrives (there is no all-or-nothing); what the
batch adds is flow control on the reply subject.  The server answers with JSON messages that carry a ``type``:

- ``{"type":"ack","seq":S,"msgs":N}``: messages up to batch sequence S are stored; send the next ack-worthy
  message after N more.  The first message gets ``seq 0`` with the starting N = min(500, flow), or 1 when the
  stream has another fast batch open.  After that N moves toward min(500 / open fast batches, flow): doubling
  up, halving down (checkFlowControl).
- ``{"type":"gap","last_seq":E,"seq":R}``: a message came out of order.  With ``ok`` the batch goes on from R;
  with ``fail`` (or backwards) the batch ends and is committed with what was stored.
- ``{"type":"err","seq":R,"error":{...}}``: message R failed its checks (expected-*, ...).  With ``ok`` the batch
  goes on; with ``fail`` it ends there.  A failure of the very first message gets a plain error PubAck instead.
- The final PubAck: ``{"stream","seq":<last stored>,"batch":<id>,"count":<last batch seq>}``.

A ``Nats-Msg-Id`` duplicate is skipped silently.  On a ``no_ack`` stream only the errors before a batch exists and
the first ``seq 0`` ack are left out; everything else is sent (nats-server sends it unconditionally).  A ping (op 4, seq = the highest the client sent) reports a gap if
the server saw less, else resends the current ack.

Skiff stores each message before the next one is read, so a message is "persisted" as soon as it is stored
(nats-server's ``pending`` count is always zero here) and the flow-control acks and the commit go out through the
durability queue as PubAcks do (``Durability.send_stored``): after the write they report, and after its fsync with
``sync_interval: always``, where nats-server fsyncs every write before answering.  Limits: 1000 open fast batches
per stream, 50,000 per server (10211), 10 s without a message drops a batch silently (no advisory, as nats-server).
"""
from __future__ import annotations

import weakref
from typing import Any, NamedTuple

from skiff.protocol import headers
from skiff.protocol.errors import ApiError

from . import jsonout
from .api import level_too_high
from .batching import Batching, IdleTimer, batch_timeout, server_limit
from .publish_checks import Duplicate

OP_START, OP_APPEND, OP_COMMIT, OP_COMMIT_EOB, OP_PING = range(5)
GAP_OK = "ok"
GAP_FAIL = "fail"
MAX_BATCH_ID = 64
MAX_U16 = 65535
MAX_U64 = (1 << 64) - 1

# stream.go streamDefaultMaxFastBatch*, streamDefaultMaxBatchTimeout.
MAX_INFLIGHT_PER_STREAM = 1000
MAX_INFLIGHT_TOTAL = 50_000
MAX_ACK_MESSAGES = 500

REQUIRED_API_LEVEL = "Nats-Required-Api-Level"

_inflight_total: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


class FastOp(NamedTuple):
    id: str
    seq: int
    flow: int
    gap_ok: bool
    op: int


def _go_int(text: str) -> int:
    """Go parseInt64: digits only, else -1."""
    return int(text) if text and text.isascii() and text.isdigit() else -1


def parse_reply(reply: str) -> FastOp | None:
    """getFastBatch: None for a malformed pattern (10206)."""
    parts = reply[:-4].rsplit(".", 5)
    if len(parts) < 6:
        return None
    _, bid, flow_s, gap, seq_s, op_s = parts
    op = _go_int(op_s)
    if op < OP_START or op > OP_PING:
        return None
    seq = _go_int(seq_s)
    if seq <= 0 or seq >= MAX_U64:
        return None
    if (seq == 1 and op == OP_COMMIT_EOB) or (op == OP_START and seq != 1) or (op == OP_APPEND and seq <= 1):
        return None
    if gap not in (GAP_OK, GAP_FAIL):
        return None
    flow = _go_int(flow_s)
    flow = 10 if flow <= 0 else min(flow, MAX_U16)
    return FastOp(bid, seq, flow, gap == GAP_OK, op)


class FastBatch:
    __slots__ = ("id", "lseq", "sseq", "pseq", "fseq", "ack_messages", "max_ack_messages", "gap_ok", "timer", "head",
                 "next")

    def __init__(self, batch_id: str, gap_ok: bool, flow: int) -> None:
        self.id = batch_id
        self.lseq = self.sseq = self.pseq = self.fseq = 0
        self.ack_messages = 1
        self.max_ack_messages = flow
        self.gap_ok = gap_ok
        self.timer: Any = None
        self.head = ""  # the reply subject up to the batch sequence: "<prefix>.<id>.<flow>.<gap>."
        self.next = ""  # the reply subject of the next in-order append, the key of this batch in FastBatches.expect


class FastBatches:
    """The open fast batches of one stream (owned by :class:`~.batching.Batching`)."""

    def __init__(self, owner: "Batching") -> None:
        self.owner = owner
        self.stream = owner.stream
        self.open: dict[str, FastBatch] = {}
        # The reply subject each open batch's next in-order append will carry -> the batch: such a message without
        # headers takes append() (Stream._inbound), everything else process().
        self.expect: dict[str, FastBatch] = {}

    # ------------------------------------------------------------------ bookkeeping
    def _drop(self, b: FastBatch) -> None:
        if self.open.get(b.id) is b:
            del self.open[b.id]
            srv = self.stream.server
            _inflight_total[srv] = max(_inflight_total.get(srv, 0) - 1, 0)
        if b.next:
            if self.expect.get(b.next) is b:
                del self.expect[b.next]
            b.next = ""
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None

    def clear(self) -> None:
        for b in list(self.open.values()):
            self._drop(b)

    def _arm(self, b: FastBatch) -> None:
        if b.timer is None:
            b.timer = IdleTimer(self.stream.clock, batch_timeout(self.stream.server), lambda: self._idle(b))
        else:
            b.timer.touch()

    def _idle(self, b: FastBatch) -> None:
        b.timer = None
        self._drop(b)

    def _send(self, reply: str, payload: bytes) -> None:
        if reply:
            self.stream.js.durability.send(reply, payload)

    def _send_stored(self, reply: str, payload: bytes, seq: int) -> None:
        """A flow-control ack or a commit: it reports messages stored, up to stream sequence ``seq``, so it waits
        as a PubAck does (and turns into the store-failure error if their write fails)."""
        if reply:
            self.stream.js.durability.send_stored(self.stream, reply, payload, seq)

    def _flow_ack(self, b: FastBatch, reply: str) -> None:
        self._send_stored(reply, b'{"type":"ack","seq":%d,"msgs":%d}' % (b.fseq, b.ack_messages), b.sseq)

    def write_failed(self, first_lost: int) -> None:
        """A write failed and the store rolled back every message from ``first_lost`` on: a batch that had stored
        one of them ends (its replies in that flush become the error ack; a later append gets 10208 "batch publish
        ID unknown"), so that no later flow ack or commit reports the lost messages as stored."""
        for b in [b for b in self.open.values() if b.sseq >= first_lost]:
            self._drop(b)

    def _gap(self, reply: str, expected: int, got: int) -> None:
        self._send(reply, b'{"type":"gap","last_seq":%d,"seq":%d}' % (expected, got))

    def _check_flow_control(self, b: FastBatch, reply: str) -> bool:
        """checkFlowControl: an ack every ``ack_messages`` stored messages, with the rate moved toward this
        publisher's share of 500."""
        am = b.ack_messages
        if b.pseq < b.fseq + am:
            return False
        b.fseq += ((b.pseq - b.fseq) // am) * am
        target = min(max(MAX_ACK_MESSAGES // len(self.open), 1), b.max_ack_messages)
        if am < target:
            b.ack_messages = min(am * 2, target)
        elif am > target:
            b.ack_messages = max(am // 2, target)
        self._flow_ack(b, reply)
        return True

    def _commit(self, b: FastBatch, reply: str) -> None:
        """fastBatchCommit with everything already stored: the final PubAck, and the batch is done."""
        self._drop(b)
        stream = self.stream
        if reply:  # sent on no_ack streams too, as nats-server does (only the errors before a batch obey no_ack)
            tail = b',"batch":' + jsonout.dumps(b.id).encode() + b',"count":%d}' % b.lseq
            self._send_stored(reply, stream.ack_payload(b.sseq, tail), b.sseq)

    def _rekey(self, b: FastBatch) -> None:
        """Key ``b`` by the reply subject of its next in-order append (op 1 at ``lseq + 1``): ``b.head`` comes from a
        reply subject parse_reply accepted for this batch, so it reads the key back as this batch."""
        expect = self.expect
        old = b.next
        if old and expect.get(old) is b:
            del expect[old]
        nxt = b.lseq + 1
        if 2 <= nxt < MAX_U64 and self.open.get(b.id) is b:  # op 1 needs a sequence above 1
            b.next = key = f"{b.head}{nxt}.1.$FI"
            expect[key] = b
        else:
            b.next = ""

    # ------------------------------------------------------------------ the publish path
    def append(self, b: FastBatch, subject: str, reply: str, msg: bytes) -> int:
        """The next in-order message of an open batch, without headers, on a stream without transform, seal or
        counters (``reply`` is ``b.next``): what Stream.process and :meth:`process` do for it, in their order,
        reduced to what applies (the resources, the size, "disabled"; the idle timer; store; flow control).
        tests/jetstream/test_batch_fast_path.py holds the two paths to the same replies and stored messages."""
        stream = self.stream
        err = stream.js.check_resources(stream, len(subject) + len(msg), 0)
        if err is None:
            mms = stream._max_msg_size
            if mms >= 0 and len(msg) > mms:
                err = ApiError.of("JSStreamMessageExceedsMaximumErr")
            elif not stream.config.allow_batched:
                err = ApiError.of("JSBatchPublishDisabledErr")
        if err is not None:
            return stream._nak(reply, not stream._no_ack, err)
        timer = b.timer  # an open batch has its timer (_arm at its first message; _drop takes both away)
        timer.last = timer.clock.monotonic()  # IdleTimer.touch
        b.lseq = nxt = b.lseq + 1
        seq = stream.store_checked(subject, reply, b"", msg, "", "", b"}", False)
        if seq:
            b.sseq = seq
        b.pseq = nxt
        if nxt >= b.fseq + b.ack_messages:  # _check_flow_control's own test, to spare the call
            self._check_flow_control(b, reply)
        self._rekey(b)
        return seq

    def process(self, subject: str, reply: str, hdr: bytes, msg: bytes, can_respond: bool) -> int:
        stream = self.stream
        fb = parse_reply(reply)
        if fb is None:
            return stream._nak(reply, can_respond, ApiError.of("JSBatchPublishInvalidPatternErr"))
        seq = self._process(fb, subject, reply, hdr, msg, can_respond)
        b = self.open.get(fb.id)
        if b is not None:
            b.head = reply[:-4].rsplit(".", 2)[0] + "."
            self._rekey(b)
        return seq

    def _process(self, fb: FastOp, subject: str, reply: str, hdr: bytes, msg: bytes, can_respond: bool) -> int:
        stream = self.stream
        nak = stream._nak
        counted = len(subject) + len(hdr) + len(msg)  # Stream.process counted this size against the limits
        if len(fb.id) > MAX_BATCH_ID:
            return nak(reply, can_respond, ApiError.of("JSBatchPublishInvalidBatchIDErr"))

        b = self.open.get(fb.id)
        if b is None:
            if fb.seq != 1 or fb.op == OP_PING:
                return nak(reply, can_respond, ApiError.of("JSBatchPublishUnknownBatchIDErr"))
            srv = stream.server
            if (len(self.open) + 1 > server_limit(srv, "max_batch_inflight_per_stream", MAX_INFLIGHT_PER_STREAM)
                    or _inflight_total.get(srv, 0) + 1 > server_limit(srv, "max_batch_inflight_total",
                                                                      MAX_INFLIGHT_TOTAL)):
                return nak(reply, can_respond, ApiError.of("JSBatchPublishTooManyInflight"))
            _inflight_total[srv] = _inflight_total.get(srv, 0) + 1
            b = self.open[fb.id] = FastBatch(fb.id, fb.gap_ok, fb.flow)
            # The only batch gets what the client asked for; otherwise start slow and ramp up.
            b.ack_messages = min(MAX_ACK_MESSAGES, fb.flow) if len(self.open) == 1 else 1

        level = headers.get_exact(hdr, REQUIRED_API_LEVEL) if hdr else None
        if level:
            if level_too_high(level):
                self._drop(b)
                return nak(reply, can_respond, ApiError.of("JSRequiredApiLevelErr"))
        if level is not None:
            hdr = headers.remove(hdr, REQUIRED_API_LEVEL)
        self._arm(b)

        if fb.op == OP_PING:
            if fb.seq > b.lseq:
                self._gap(reply, b.lseq + 1, fb.seq + 1)
                if not b.gap_ok:
                    self._commit(b, reply)
                    return 0
                b.lseq = b.pseq = fb.seq
                if self._check_flow_control(b, reply):
                    return 0
            self._flow_ack(b, reply)
            return 0

        b.lseq += 1
        if b.lseq != fb.seq:
            self._gap(reply, b.lseq, fb.seq)
            if b.gap_ok and fb.seq > b.lseq:
                b.lseq = fb.seq
            else:  # a backward gap, or a gap with "fail": the batch ends with what was stored
                b.lseq -= 1
                self._commit(b, reply)
                return 0

        commit = fb.op in (OP_COMMIT, OP_COMMIT_EOB)
        if fb.op == OP_COMMIT_EOB:
            b.lseq -= 1
            b.pseq = b.lseq
            self._commit(b, reply)
            return 0

        if fb.seq == 1 and can_respond and not commit:
            self._send(reply, b'{"type":"ack","seq":0,"msgs":%d}' % b.ack_messages)

        res = stream.check(subject, hdr, msg, counted=counted)
        if res.__class__ is not tuple:
            dup = isinstance(res, Duplicate)
            if dup:
                b.pseq = fb.seq
                self._check_flow_control(b, reply)
                if not commit:
                    return 0
            if not b.gap_ok and b.lseq == 1:
                # The batch's first message failed: the same answer as a plain publish.
                self._drop(b)
                if reply:
                    if dup:
                        tail = (b',"duplicate": true,"batch":' + jsonout.dumps(b.id).encode()
                                + b',"count":%d}' % fb.seq)
                        self._send_stored(reply, stream.ack_payload(res.seq, tail), res.seq)
                    else:
                        self._send(reply, stream.error_ack(res))
                return 0
            if not dup:
                self._send(reply, b'{"type":"err","seq":%d,"error":' % fb.seq + jsonout.dumpb(res.to_dict()) + b"}")
            if b.gap_ok and not commit:
                return 0
            if not dup:
                b.lseq -= 1
                b.pseq = b.lseq
            self._commit(b, reply)
            return 0

        hdr, msg, msg_id, rollup, ack_tail = res
        if commit:
            # The PubAck of the commit is the store's own, queued behind the write (durability.py).
            self._drop(b)
            tail = b',"batch":' + jsonout.dumps(b.id).encode() + b',"count":%d}' % b.lseq
            return stream.store_checked(subject, reply, hdr, msg, msg_id, rollup, tail, bool(reply))
        seq = stream.store_checked(subject, reply, hdr, msg, msg_id, rollup, ack_tail, False)
        if seq:
            b.sseq = seq
        b.pseq = b.lseq
        self._check_flow_control(b, reply)
        return seq
