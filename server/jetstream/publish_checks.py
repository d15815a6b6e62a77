"""The header checks a stream applies to a publish before storing it (nats-server stream.go processJetStreamMsg).

Theory of operation
-------------------
:func:`check_headers` runs the consistency checks in nats-server's order and returns either the
:class:`~protocol.errors.ApiError` for the error PubAck, :data:`DUPLICATE` with the original sequence, or a
:class:`Checked` with what the store path needs (msg id, rollup kind).  The order matters because a client sees only
the first failure:

    Nats-Expected-Stream (10060) -> Nats-TTL on a stream without allow_msg_ttl (10166)
    -> Nats-Expected-Last-Subject-Sequence[-Subject] (10071 / 10193) -> Nats-Expected-Last-Sequence (10071)
    -> Nats-Schedule / -Time-Zone / -Next, Nats-Scheduler (10188 schedules disabled, 10212 invalid scheduler)
    -> Nats-Msg-Id duplicate (duplicate ack, not an error) -> Nats-Expected-Last-Msg-Id (10070)
    -> Nats-Rollup (10111 "rollup not permitted" / "rollup value invalid")

Message schedules: on a stream with ``allow_msg_schedules`` :func:`.schedules.check_publish` validates the
schedule headers and adds ``Nats-Rollup: sub`` to a schedule (returned in :attr:`Checked.hdr`); on any other stream
:func:`schedule_refusal` gives nats-server's "disabled" answers.  Messages a schedule fires are stored with
``sourced=True`` and skip these checks, as in nats-server.  Atomic batches (``Nats-Batch-Id``) and fast batches (a reply subject ending in ``.$FI``) are routed apart
before these checks, as nats-server does (stream.go internalLoop: getFastBatch, getBatchId): :func:`batch_refusal`
names the "disabled" error for a stream without ``allow_atomic`` / ``allow_batched``, and batching.py /
batching_fast.py handle the rest.

Size checks, TTL validity (10165) and the store's own limits come after, in :mod:`.stream`.

Numbers are read with Go's ``parseInt64`` (digits only, else -1), so a malformed expectation is a mismatch.
Header values are read as nats-server's ``getHeader`` reads them (:func:`protocol.headers.nats_values` and
``text``: leading spaces skipped, nothing else trimmed, so ``Nats-Msg-Id: a `` is another id than ``a``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from skiff.protocol import headers
from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.gojson import go_quote
from skiff.protocol.jsapi.timefmt import SECOND, DurationParseError, parse_go_duration

# Header names the schedule checks need too, written once in schedules.py (which imports from here only lazily).
from .schedules import (
    MSG_ID, MSG_TTL, ROLLUP, ROLLUP_SUB, SCHEDULE, SCHEDULE_TIME_ZONE, check_publish, purged_scheduler, slice_header,
)

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJ_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_SUBJ_SEQ_SUBJ = "Nats-Expected-Last-Subject-Sequence-Subject"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
MARKER_REASON = "Nats-Marker-Reason"
KV_OPERATION = "KV-Operation"
BATCH_ID = "Nats-Batch-Id"
FAST_BATCH_SUFFIX = ".$FI"

ROLLUP_ALL = "all"


class Checked(NamedTuple):
    msg_id: str
    rollup: str  # "", "sub" or "all"
    hdr: bytes | None = None  # the header to store when the checks changed it (a schedule's Nats-Rollup)


class Duplicate(NamedTuple):
    seq: int


def parse_int64(text: str | None) -> int:
    """Go's parseInt64: a non-negative decimal of digits only, else -1."""
    if not text or not text.isascii() or not text.isdigit():
        return -1
    return int(text)


def parse_message_ttl(text: str) -> int | ApiError:
    """nats-server parseMessageTTL: seconds (>0), -1 for ``never``, 0 for none; 10165 for invalid values."""
    if text.lower() == "never":
        return -1
    try:
        dur = parse_go_duration(text)
    except DurationParseError:
        t = parse_int64(text)
        if t < 0:
            return ApiError.of("JSMessageTTLInvalidErr")
        return t
    if dur < SECOND:
        return ApiError.of("JSMessageTTLInvalidErr")
    return dur // SECOND


def message_ttl(hdr: bytes) -> int | ApiError:
    """getMessageTTL: 0 when the header is absent.  The value as getHeader gives it (get_exact): ``5s `` or a tab
    before it is an invalid TTL (10165) there, as measured on nats-server 2.15.1."""
    v = headers.get_exact(hdr, MSG_TTL)
    if not v:
        return 0
    return parse_message_ttl(v)


def is_subject_delete_marker(hdr: bytes) -> bool:
    """sdm.go isSubjectDeleteMarker: a marker (Nats-Marker-Reason) or a KV purge (KV-Operation: PURGE), both read
    with sliceHeader (``PURGE `` is not a purge there)."""
    if not hdr:
        return False
    return bool(headers.get_exact(hdr, MARKER_REASON)) or headers.get_exact(hdr, KV_OPERATION) == "PURGE"


def batch_refusal(reply: str, hdr: bytes) -> str | None:
    """The error constant for a batch publish, or None for a plain one (checked after ``sealed`` and the size).

    A reply subject ending in ``.$FI`` is a fast batch whatever the rest of it says (getFastBatch returns an error
    for a malformed one, and the stream still answers 10205 first); a non-empty ``Nats-Batch-Id`` is an atomic
    batch (refused unless the stream enables it)."""
    if len(reply) > 4 and reply.endswith(FAST_BATCH_SUFFIX):
        return "JSBatchPublishDisabledErr"
    if hdr and headers.get_exact(hdr, BATCH_ID):  # getBatchId: a tab is an id, blanks after it are kept
        return "JSAtomicPublishDisabledErr"
    return None


def _valid_time_zone(name: str) -> bool:
    """Go's time.LoadLocation succeeds ("UTC", "Local" or a tz database name)."""
    if name in ("UTC", "Local"):
        return True
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):
        return False
    return True


def schedule_refusal(subject: str, hdr: bytes) -> ApiError | None:
    """nats-server's message-schedule checks (stream.go processJetStreamMsg) on a stream without
    allow_msg_schedules: any schedule, valid or not, is 10188."""
    get = slice_header
    tz = get(hdr, SCHEDULE_TIME_ZONE)
    if tz is not None and (tz == "" or not _valid_time_zone(tz)):
        return ApiError.of("JSMessageSchedulesDisabledErr")  # TimeZoneInvalid, reported as disabled
    if get(hdr, SCHEDULE):
        return ApiError.of("JSMessageSchedulesDisabledErr")
    scheduler = purged_scheduler(subject, hdr)
    if scheduler is None or isinstance(scheduler, ApiError):
        return scheduler
    return ApiError.of("JSMessageSchedulesDisabledErr")  # a valid purge, on a stream without schedules


# The keys check_headers reads, as headers.nats_values() lists them: a publish reads its header block once (the
# Nats-* keys it carries, with their values) and each check below runs only for a key the block has (most
# publishes carry Nats-Msg-Id and perhaps Nats-Expected-Stream, nothing else of these).
_K_EXPECTED_STREAM = EXPECTED_STREAM.encode()
_K_MSG_TTL = MSG_TTL.encode()
_K_LAST_SUBJ_SEQ = EXPECTED_LAST_SUBJ_SEQ.encode()
_K_LAST_SUBJ_SEQ_SUBJ = EXPECTED_LAST_SUBJ_SEQ_SUBJ.encode()
_K_LAST_SEQ = EXPECTED_LAST_SEQ.encode()
_K_MSG_ID = MSG_ID.encode()
_K_LAST_MSG_ID = EXPECTED_LAST_MSG_ID.encode()
_K_ROLLUP = ROLLUP.encode()
_UNCHECKED = Checked("", "")


def check_headers(stream: "Stream", subject: str, hdr: bytes, sourced: bool = False,
                  values: dict[bytes, bytes] | None = None) -> Checked | Duplicate | ApiError:
    """``sourced`` (nats-server processJetStreamMsg ``sourced``): a message a source brought in (its
    Nats-Expected-* headers removed) or a fired schedule is stored as it was: no TTL-enabled, schedule or roll-up
    permission check.  ``values``: ``headers.nats_values(hdr)`` when the caller has it; ``headers.text(raw)`` of
    a value there is what ``headers.get_exact`` (nats-server getHeader) reads."""
    if values is None:
        values = headers.nats_values(hdr)
    if not values:
        return _UNCHECKED
    cfg = stream.config
    text = headers.text
    raw = values.get(_K_EXPECTED_STREAM)
    if raw:
        sname = text(raw)
        if sname and sname != cfg.name:
            return _returning(ApiError.of("JSStreamNotMatchErr"), "expected stream does not match")

    if _K_MSG_TTL in values:
        ttl = message_ttl(hdr)
        if isinstance(ttl, int) and ttl != 0 and not cfg.allow_msg_ttl and not sourced:
            return _returning(ApiError.of("JSMessageTTLDisabledErr"), "message TTL disabled")

    raw = values.get(_K_LAST_SUBJ_SEQ)
    if raw:  # a raw value starts after the blanks: non-empty raw, non-empty text
        want = parse_int64(text(raw))
        raw = values.get(_K_LAST_SUBJ_SEQ_SUBJ)
        seq_subj = text(raw) if raw else subject
        last = stream.store.load_last_msg(seq_subj)
        fseq = last.seq if last is not None else 0
        if fseq != want:
            return _returning(ApiError.of("JSStreamWrongLastSequenceErrF", seq=fseq),
                              f"last sequence by subject mismatch: {want & _U64} vs {fseq}")
    elif values.get(_K_LAST_SUBJ_SEQ_SUBJ):
        return ApiError.of("JSStreamExpectedLastSeqPerSubjectInvalid")

    raw = values.get(_K_LAST_SEQ)
    if raw:
        want = parse_int64(text(raw))
        # Go compares uint64(parseInt64(v)): -1 becomes 2^64-1 and never matches.
        if want != stream.last_seq:
            return _returning(ApiError.of("JSStreamWrongLastSequenceErrF", seq=stream.last_seq),
                              f"last sequence mismatch: {want & _U64} vs {stream.last_seq}")

    new_hdr = None
    if b"Nats-Schedul" in hdr and not sourced:  # one substring test keeps plain publishes fast
        if cfg.allow_msg_schedules:
            res = check_publish(stream, subject, hdr, stream.clock.time_ns())
            if isinstance(res, ApiError):
                return res
            if res is not hdr:
                hdr = new_hdr = res
                values = headers.nats_values(hdr)
        else:
            err = schedule_refusal(subject, hdr)
            if err is not None:
                return err

    raw = values.get(_K_MSG_ID)
    msg_id = text(raw) if raw else ""
    if msg_id:
        dup = stream.dedupe.check(msg_id)
        if dup:
            return Duplicate(dup)

    raw = values.get(_K_LAST_MSG_ID)
    if raw:
        lmsg_id = text(raw)
        if lmsg_id and lmsg_id != stream.last_msg_id:
            return _returning(ApiError.of("JSStreamWrongLastMsgIDErrF", id=stream.last_msg_id),
                              f"last msgid mismatch: {go_quote(lmsg_id)} vs {go_quote(stream.last_msg_id)}")

    kind = ""
    raw = values.get(_K_ROLLUP)
    rollup = text(raw) if raw else ""
    if rollup:
        rollup = rollup.lower()
        if not (cfg.allow_rollup_hdrs and not cfg.deny_purge) and not sourced:
            return ApiError.of("JSStreamRollupFailedF", err="rollup not permitted")
        if rollup not in (ROLLUP_SUB, ROLLUP_ALL):
            return ApiError.of("JSStreamRollupFailedF", err=f"rollup value invalid: {go_quote(rollup)}")
        kind = rollup
    if not msg_id and not kind and new_hdr is None:
        return _UNCHECKED
    return Checked(msg_id, kind, new_hdr)


_U64 = (1 << 64) - 1  # Go prints the expected sequence as the uint64 it compares (-1: 18446744073709551615)


def _returning(err: ApiError, text: str) -> ApiError:
    """``err``, for the PubAck, with the plain error processJetStreamMsg returns beside it (stream.go), which a
    message trace's ``js`` event reports."""
    err.go_returned = text
    return err
