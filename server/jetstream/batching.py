"""Atomic batch publish (ADR-50; nats-server stream.go processJetStreamAtomicBatchMsg, jetstream_batching.go).
Fast batches (``allow_batched``) are in batching_fast.py; :class:`Batching` holds both kinds for a stream.

Theory of operation
-------------------
A publish with a non-empty ``Nats-Batch-Id`` on a stream with ``allow_atomic`` is *staged*, not stored.  Each
message carries ``Nats-Batch-Sequence`` (1, 2, 3, ...); the last one carries ``Nats-Batch-Commit``: ``1`` (store
this message too) or ``eob`` (end of batch: do not store this one; the previous message is stored with
``Nats-Batch-Commit: 1`` added).  A staged message that asked for a reply gets an empty message back; the commit
gets a PubAck ``{"stream", "seq": <last>, "batch": <id>, "count": <n>}``.

One batch goes through these states, driven only by what arrives and by one clock timer::

    (none) --seq 1--> OPEN --seq n+1--> OPEN --commit--> checks --ok--> stored, acked
                        |                                     \\--fail--> dropped, error PubAck
                        +-- gap / duplicate seq / too large / api level / bad commit --> dropped, error PubAck
                        +-- no message for `timeout` --> dropped silently (advisory reason "timeout")

Where the staged messages live.  nats-server stages an R1 file stream's batch in a file store of its own
(``streams/<name>/batches/<hash>``) so that, after a ``kill -9`` half way through the commit, a restart can write
the rest of the batch (jetstream.go, "partial batch write").  Skiff stages in memory and makes the commit
all-or-nothing the other way round: the commit checks every message first, then stores them all in one
synchronous run on the event loop, so they reach the OS in the same flush (one write per block) and the PubAck
is only sent after that.  A ``kill -9`` can still cut that flush short (the batch spans two blocks, or a long
write is interrupted); the store then ends with messages of a batch whose last stored message has no
``Nats-Batch-Commit``.  :func:`roll_back_torn_batch` removes them when the stream is recovered: they were never
acknowledged, and a batch is never left half stored.  (docs/parity.md: nats-server rolls forward, Skiff back.)

Checks at commit (:meth:`_check`, nats-server checkMsgHeadersPreClusteredProposal with a ``batchStagedDiff``):
every message is checked against the stream *as it would be* with the earlier messages of the batch stored:
``Nats-Expected-Last-Sequence`` only passes on the first message (later ones get 10071 with the running sequence,
or 10164 when the value matches); ``Nats-Expected-Last-Subject-Sequence`` on a subject the batch already wrote to
is 10164; a ``Nats-Msg-Id`` seen in the dedupe window or earlier in the batch is 10201; ``Nats-Expected-Last-Msg-Id``
is refused (10177); ``Nats-Rollup: all`` only on the first message, ``sub`` only on a subject's first message;
discard-new limits count the whole batch.  The first failure fails the whole batch.

Limits (stream.go streamDefaultMaxAtomicBatch*): 50 open batches per stream and 1000 per server (10210), 1000
messages per batch (10199), 10 s without a message abandons a batch; ``jetstream { limits { batch { } } }`` sets
other values (:func:`server_limit`, conf/jetstream_limits.py).  The timer runs on the server's clock, so
``ManualClock`` drives it in tests.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

from skiff.protocol import headers
from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.subjects import STREAM_BATCH_ABANDONED_T

from . import advisories, counters, jsonout
from .api import level_too_high
from .publish_checks import (
    EXPECTED_LAST_MSG_ID, EXPECTED_LAST_SEQ, EXPECTED_LAST_SUBJ_SEQ, EXPECTED_LAST_SUBJ_SEQ_SUBJ, EXPECTED_STREAM,
    MSG_ID, ROLLUP, ROLLUP_ALL, ROLLUP_SUB, message_ttl, parse_int64, schedule_refusal,
)
from .schedules import check_publish

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

BATCH_ID = "Nats-Batch-Id"
BATCH_SEQ = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
REQUIRED_API_LEVEL = "Nats-Required-Api-Level"
COMMIT_EOB = "eob"
MAX_BATCH_ID = 64

# stream.go streamDefaultMaxAtomicBatch*, streamDefaultMaxBatchTimeout.
MAX_INFLIGHT_PER_STREAM = 50
MAX_INFLIGHT_TOTAL = 1000
MAX_BATCH_SIZE = 1000
BATCH_TIMEOUT = 10.0  # seconds


def server_limit(srv, key: str, default: int) -> int:
    """``jetstream { limits { batch { } } }`` (JSLimitOpts ``key``) when positive, else nats-server's default."""
    v = srv.options.jetstream_batch_limits.get(key, 0)
    return v if v > 0 else default


def batch_timeout(srv) -> float:
    """Seconds an open batch may stay idle (getCleanupTimeout): the configured ``timeout`` or 10 s."""
    return server_limit(srv, "max_batch_timeout", 0) / 1e9 or BATCH_TIMEOUT

ABANDONED_TYPE = "io.nats.jetstream.advisory.v1.stream_batch_abandoned"
REASON_TIMEOUT = "timeout"
REASON_LARGE = "large"
REASON_INCOMPLETE = "incomplete"
REASON_UNSUPPORTED = "unsupported"

MAX_HEADER_SIZE = 65535

# Open atomic batches per server (nats-server globalInflightAtomicBatches), keyed by the server object.
_inflight_total: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


class Staged(NamedTuple):
    subject: str
    hdr: bytes
    msg: bytes


class IdleTimer:
    """A batch's inactivity timer: one clock timer, re-armed only when it fires before the batch has been idle
    for ``timeout`` (a message just records the time; re-creating a loop timer per message cost a quarter of a
    fast batch's per-message time)."""

    __slots__ = ("clock", "timeout", "last", "handle", "on_idle")

    def __init__(self, clock: Any, timeout: float, on_idle: Any) -> None:
        self.clock, self.timeout, self.on_idle = clock, timeout, on_idle
        self.last = clock.monotonic()
        self.handle: Any = clock.call_later(timeout, self._fire)

    def touch(self) -> None:
        self.last = self.clock.monotonic()

    def _fire(self) -> None:
        rest = self.last + self.timeout - self.clock.monotonic()
        if rest > 1e-6:
            self.handle = self.clock.call_later(rest, self._fire)
            return
        self.handle = None
        self.on_idle()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class AtomicBatch:
    __slots__ = ("id", "msgs", "timer")

    def __init__(self, batch_id: str) -> None:
        self.id = batch_id
        self.msgs: list[Staged] = []
        self.timer: Any = None


def parse_uint64(text: str | None) -> int | None:
    """nats-server parseUint64 on a header value: digits only, else not there."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 20:
        return None
    n = int(text)
    return n if n < 1 << 64 else None


class Batching:
    """The open atomic batches of one stream."""

    def __init__(self, stream: "Stream") -> None:
        from .batching_fast import FastBatches

        self.stream = stream
        self.atomic: dict[str, AtomicBatch] = {}
        self.fast = FastBatches(self)

    # ------------------------------------------------------------------ bookkeeping
    def _drop(self, b: AtomicBatch) -> None:
        if self.atomic.get(b.id) is b:
            del self.atomic[b.id]
            srv = self.stream.server
            _inflight_total[srv] = max(_inflight_total.get(srv, 0) - 1, 0)
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None
        b.msgs = []

    def clear(self, atomic: bool = True, fast: bool = True) -> None:
        """The stream stops, is deleted, or turned a batch flag off: open batches are dropped
        (deleteAtomicBatches, deleteFastBatches)."""
        if atomic:
            for b in list(self.atomic.values()):
                self._drop(b)
        if fast:
            self.fast.clear()

    def _arm(self, b: AtomicBatch) -> None:
        if b.timer is None:
            b.timer = IdleTimer(self.stream.clock, batch_timeout(self.stream.server), lambda: self._timed_out(b))
        else:
            b.timer.touch()

    def _timed_out(self, b: AtomicBatch) -> None:
        b.timer = None
        if self.atomic.get(b.id) is b:
            self._drop(b)
            self.abandoned(b.id, REASON_TIMEOUT)

    def abandoned(self, batch_id: str, reason: str) -> None:
        """sendStreamBatchAbandonedAdvisory (the account's copy; Skiff has no system account copy here)."""
        stream = self.stream
        srv = stream.server
        subject = STREAM_BATCH_ABANDONED_T.format(stream=stream.name)
        if not srv.sublist.has_interest(subject):
            return
        ev = advisories.envelope(srv, ABANDONED_TYPE)
        ev["stream"] = stream.name
        domain = srv.options.jetstream_domain
        if domain:
            ev["domain"] = domain
        ev["batch"] = batch_id
        ev["reason"] = reason
        advisories.publish_advisory(srv, subject, ev)

    # ------------------------------------------------------------------ the publish path
    def process_atomic(self, subject: str, reply: str, hdr: bytes, msg: bytes, can_respond: bool) -> int:
        """One message of an atomic batch (after sealed and the size were checked); returns the last stored
        sequence on a successful commit, else 0."""
        stream = self.stream
        get = headers.get_exact  # nats-server getBatchId/getBatchSequence/sliceHeader: nothing trimmed but leading spaces

        def nak(name: str, **kw: Any) -> int:
            return stream._nak(reply, can_respond, ApiError.of(name, **kw))

        batch_id = get(hdr, BATCH_ID) or ""
        if len(batch_id) > MAX_BATCH_ID:
            return nak("JSAtomicPublishInvalidBatchIDErr")
        seq = parse_uint64(get(hdr, BATCH_SEQ))
        if seq is None:
            return nak("JSAtomicPublishMissingSeqErr")
        commit_val = get(hdr, BATCH_COMMIT)
        commit = commit_val is not None and commit_val != ""
        eob = commit_val == COMMIT_EOB
        invalid_commit = commit and not eob and commit_val != "1"
        max_size = server_limit(stream.server, "max_batch_size", MAX_BATCH_SIZE)

        b = self.atomic.get(batch_id)
        if b is None:
            if seq != 1:
                # An unknown batch (never started, failed or timed out): "too large" when it could never have fit.
                if seq - (1 if eob else 0) > max_size:
                    return nak("JSAtomicPublishTooLargeBatchErrF", size=max_size)
                return nak("JSAtomicPublishIncompleteBatchErr")
            srv = stream.server
            if (len(self.atomic) + 1 > server_limit(srv, "max_batch_inflight_per_stream", MAX_INFLIGHT_PER_STREAM)
                    or _inflight_total.get(srv, 0) + 1 > server_limit(srv, "max_batch_inflight_total",
                                                                      MAX_INFLIGHT_TOTAL)):
                return nak("JSAtomicPublishTooManyInflight")
            _inflight_total[srv] = _inflight_total.get(srv, 0) + 1
            b = self.atomic[batch_id] = AtomicBatch(batch_id)

        if invalid_commit:
            self._drop(b)
            return nak("JSAtomicPublishInvalidBatchCommitErr")
        level = get(hdr, REQUIRED_API_LEVEL)
        if level:
            if level_too_high(level):
                self._drop(b)
                self.abandoned(batch_id, REASON_UNSUPPORTED)
                return nak("JSRequiredApiLevelErr")
        if level is not None:
            hdr = headers.remove(hdr, REQUIRED_API_LEVEL)  # always removed, like nats-server

        if len(b.msgs) + 1 != seq or (seq == 1 and eob):
            self._drop(b)
            self.abandoned(batch_id, REASON_INCOMPLETE)
            return nak("JSAtomicPublishIncompleteBatchErr")
        if seq - (1 if eob else 0) > max_size:
            self._drop(b)
            self.abandoned(batch_id, REASON_LARGE)
            return nak("JSAtomicPublishTooLargeBatchErrF", size=max_size)

        if not commit:
            b.msgs.append(Staged(subject, hdr, msg))
            self._arm(b)
            if can_respond:
                stream.js.durability.send(reply, b"")  # staged: an empty reply, as nats-server
            return 0

        msgs = b.msgs
        if not eob:
            msgs.append(Staged(subject, hdr, msg))
        self._drop(b)
        return self._commit(batch_id, msgs, reply, can_respond)

    # ------------------------------------------------------------------ commit
    def _commit(self, batch_id: str, msgs: list[Staged], reply: str, can_respond: bool) -> int:
        stream = self.stream
        checked = self._check(msgs)
        if isinstance(checked, ApiError):
            return stream._nak(reply, can_respond, checked)
        n = len(checked)
        last = 0
        tail = b',"batch":' + jsonout.dumps(batch_id).encode() + b',"count":%d}' % n
        for i, (subject, hdr, msg, msg_id, rollup) in enumerate(checked):
            final = i == n - 1
            if final and not headers.get_exact(hdr, BATCH_COMMIT):
                hdr = headers.set_values(hdr, {BATCH_COMMIT: "1"})  # committed by eob: the last gets "1"
            seq = stream.store_checked(subject, reply if final else "", hdr, msg, msg_id, rollup, tail,
                                       can_respond and final)
            if seq:
                last = seq
        return last

    def _check(self, msgs: list[Staged]) -> list[tuple[str, bytes, bytes, str, str]] | ApiError:
        """Every message checked as if the ones before it were stored; the first failure fails the batch."""
        stream = self.stream
        cfg = stream.config
        store = stream.store
        get = headers.get_exact  # nats-server getHeader, as check_headers reads the same keys
        lseq = stream.last_seq
        msg_ids: set[str] = set()
        inflight: dict[str, list[int]] = {}  # subject -> [ops, bytes]
        expected_per_subject: dict[str, int] = {}
        counter_last: dict[str, Any] = {}
        out: list[tuple[str, bytes, bytes, str, str]] = []
        allow_rollup = cfg.allow_rollup_hdrs and not cfg.deny_purge
        msg_size = getattr(store, "_msg_size", None)
        for i, (subject, hdr, msg) in enumerate(msgs):
            clseq = lseq + i
            if get(hdr, EXPECTED_LAST_MSG_ID):
                return ApiError.of("JSAtomicPublishUnsupportedHeaderBatchErr", header=EXPECTED_LAST_MSG_ID)
            if len(hdr) > MAX_HEADER_SIZE:
                return ApiError.of("JSStreamHeaderExceedsMaximumErr")
            incr = counters.check_incr(hdr, msg, cfg.allow_msg_counter)
            if isinstance(incr, ApiError):
                return incr
            sname = get(hdr, EXPECTED_STREAM)
            if sname and sname != cfg.name:
                return ApiError.of("JSStreamNotMatchErr")
            ttl = message_ttl(hdr)
            if isinstance(ttl, ApiError) or ttl != 0:
                if not cfg.allow_msg_ttl:
                    return ApiError.of("JSMessageTTLDisabledErr")
                if isinstance(ttl, ApiError):
                    return ttl
            msg_id = get(hdr, MSG_ID) or ""
            if msg_id:
                if msg_id in msg_ids or stream.dedupe.check(msg_id):
                    return ApiError.of("JSAtomicPublishContainsDuplicateMessageErr")
                msg_ids.add(msg_id)
            if cfg.allow_msg_counter:
                if incr is None:
                    return ApiError.of("JSMessageIncrMissingErr")
                view = _StagedView(store, counter_last)
                res = counters.apply(view, subject, hdr, incr)
                if isinstance(res, ApiError):
                    return res
                hdr, msg, _ = res
                maxp = stream.server.options.max_payload
                if cfg.max_msg_size >= 0:
                    maxp = min(maxp, cfg.max_msg_size)
                if len(hdr) > maxp or len(msg) > maxp - len(hdr):
                    return ApiError.of("JSStreamMessageExceedsMaximumErr")
                counter_last[subject] = _Last(hdr, msg)
            raw = get(hdr, EXPECTED_LAST_SEQ)
            if raw is not None and raw != "":
                if parse_int64(raw) != clseq:
                    return ApiError.of("JSStreamWrongLastSequenceErrF", seq=clseq)
                if inflight:  # only the first message of a batch may expect a last sequence
                    return ApiError.of("JSStreamWrongLastSequenceConstantErr")
            raw = get(hdr, EXPECTED_LAST_SUBJ_SEQ)
            if raw is not None and raw != "":
                want = parse_int64(raw)
                seq_subj = get(hdr, EXPECTED_LAST_SUBJ_SEQ_SUBJ) or subject
                if seq_subj in inflight:  # the batch already wrote to it: the expectation cannot hold
                    return ApiError.of("JSStreamWrongLastSequenceConstantErr")
                fseq = expected_per_subject.get(seq_subj)
                if fseq is None:
                    last = store.load_last_msg(seq_subj)
                    fseq = last.seq if last is not None else 0
                if fseq != want:
                    return ApiError.of("JSStreamWrongLastSequenceErrF", seq=fseq)
                expected_per_subject[seq_subj] = fseq
            elif get(hdr, EXPECTED_LAST_SUBJ_SEQ_SUBJ):
                return ApiError.of("JSStreamExpectedLastSeqPerSubjectInvalid")
            if b"Nats-Schedul" in hdr:
                if cfg.allow_msg_schedules:  # jetstream_batching.go checkMsgHeadersPreClusteredProposal
                    res = check_publish(stream, subject, hdr, stream.clock.time_ns())
                    if isinstance(res, ApiError):
                        return res
                    hdr = res  # a schedule is stored with Nats-Rollup: sub
                else:
                    err = schedule_refusal(subject, hdr)
                    if err is not None:
                        return err
            rollup = get(hdr, ROLLUP)
            kind = ""
            if rollup:
                rollup = rollup.lower()
                if not allow_rollup:
                    return ApiError.of("JSStreamRollupFailedF", err="rollup not permitted")
                if rollup == ROLLUP_SUB:
                    if subject in inflight:
                        return ApiError.of("JSStreamRollupFailedF", err="batch rollup sub invalid")
                elif rollup == ROLLUP_ALL:
                    if inflight:
                        return ApiError.of("JSStreamRollupFailedF", err="batch rollup all invalid")
                else:
                    return ApiError.of("JSStreamRollupFailedF", err=f"rollup value invalid: {jsonout.dumps(rollup)}")
                kind = rollup
            size = msg_size(len(subject.encode()), len(hdr), len(msg)) if msg_size else len(hdr) + len(msg)
            tot = inflight.setdefault(subject, [0, 0])
            tot[0] += 1
            tot[1] += size
            err = self._discard_new(subject, hdr, inflight, tot)
            if err is not None:
                return err
            out.append((subject, hdr, msg, msg_id, kind))
        return out

    def _discard_new(self, subject: str, hdr: bytes, inflight: dict[str, list[int]], tot: list[int]) -> ApiError | None:
        """Discard-new limits with the whole batch counted (the store would refuse half way otherwise)."""
        cfg = self.stream.config
        if cfg.discard != "new":
            return None
        store = self.stream.store
        if cfg.max_msgs > 0 or cfg.max_bytes > 0:
            msgs = store.msgs + sum(t[0] for t in inflight.values())
            nbytes = store.bytes + sum(t[1] for t in inflight.values())
            if cfg.max_msgs > 0 and msgs > cfg.max_msgs:
                return ApiError.of("JSStreamStoreFailedF", err="maximum messages exceeded")
            if cfg.max_bytes > 0 and nbytes > cfg.max_bytes:
                return ApiError.of("JSStreamStoreFailedF", err="maximum bytes exceeded")
        if cfg.discard_new_per_subject and cfg.max_msgs_per_subject > 0 and ROLLUP.encode() not in hdr:
            have = store.subjects_totals(subject).get(subject, 0) + tot[0]
            if have > cfg.max_msgs_per_subject:
                return ApiError.of("JSStreamStoreFailedF", err="maximum messages per subject exceeded")
        return None


class _Last(NamedTuple):
    hdr: bytes
    data: bytes


class _StagedView:
    """What counters.apply reads (the last message on a subject), with the batch's earlier increments on top."""

    __slots__ = ("_store", "_staged")

    def __init__(self, store: Any, staged: dict[str, _Last]) -> None:
        self._store = store
        self._staged = staged

    def load_last_msg(self, subject: str) -> Any:
        staged = self._staged.get(subject)
        return staged if staged is not None else self._store.load_last_msg(subject)


def roll_back_torn_batch(stream: "Stream") -> list[int]:
    """After a restart: remove the messages of a batch whose commit was cut short by a crash (the last stored
    message belongs to a batch and is not its commit).  Returns the removed sequences."""
    if not stream.config.allow_atomic:
        return []
    store = stream.store
    last = store.load_last_msg("")
    if last is None or not last.hdr:
        return []
    batch_id = headers.get_exact(last.hdr, BATCH_ID)
    bseq = parse_uint64(headers.get_exact(last.hdr, BATCH_SEQ))
    if not batch_id or bseq is None or headers.get_exact(last.hdr, BATCH_COMMIT):
        return []
    removed: list[int] = []
    seq = last.seq
    while bseq >= 1 and seq >= 1:
        m = store.load_msg(seq)
        if m is None or not m.hdr or headers.get_exact(m.hdr, BATCH_ID) != batch_id \
                or parse_uint64(headers.get_exact(m.hdr, BATCH_SEQ)) != bseq:
            break
        if store.remove_msg(seq):
            removed.append(seq)
        seq -= 1
        bseq -= 1
    return removed
