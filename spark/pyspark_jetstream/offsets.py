"""Offsets and sequence-range arithmetic for the data source.  Pure: no Spark, no I/O.

Theory of operation
-------------------
A JetStream stream numbers its messages 1, 2, 3 ...; deleted messages leave holes but the numbers never move.  That
makes the stream sequence a perfect Spark offset (like a Kafka offset for a one-partition topic):

* Every range here is *half-open*, ``[start, end)``: ``start`` is the first sequence to read, ``end`` the first
  one not to read.  A streaming offset is ``{"stream": <name>, "seq": <end>}`` - "everything below ``seq`` has
  been planned" - and a micro-batch reads ``[previous seq, seq)``.  Spark checkpoints these JSON offsets, so a
  replayed batch plans exactly the same range and reads exactly the same rows (minus any deleted meanwhile).
* The stream state gives ``first_seq``/``last_seq``.  nats-server reports ``0/0`` for a stream that never held a
  message and ``last+1/last`` after a purge, so the readable range is ``[max(first_seq, 1), last_seq + 1)``.
* ``startingOffsets`` / ``endingOffsets`` follow Spark's Kafka source: ``earliest``, ``latest`` or a number; the
  start is inclusive and the end exclusive (``endingOffsets=latest`` = ``last_seq + 1``).
* A start below ``first_seq`` means retention (limits, age, purge) removed messages the query wanted: with
  ``failOnDataLoss`` that is an error, otherwise the range starts at ``first_seq``.
* A stream deleted and re-created under the same name starts again at sequence 1, so a bare sequence would point
  into the wrong stream: the new messages below the checkpointed sequence would be skipped silently.  Offsets
  therefore carry the stream's ``created`` time (STREAM.INFO) - its *incarnation*.  A checkpoint from another
  incarnation, or one past the end of the stream (a re-created stream whose ``created`` the checkpoint predates,
  or a store restored from an older backup), is data loss: with ``failOnDataLoss`` an error
  (:class:`StreamReset`), otherwise reading restarts at the first message of the stream as it is now, and the
  offset ending that micro-batch records the restart point (``reset``) so a replay plans the same range.
* :func:`split_range` cuts ``[start, end)`` into contiguous, non-overlapping pieces that cover it exactly: at least
  ``min_partitions`` (when the range has that many sequences) and none longer than ``max_per_partition``.  The
  pieces differ in length by at most one sequence.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "EARLIEST", "LATEST", "StreamBounds", "OffsetError", "DataLoss", "StreamReset", "Position", "parse_offset_spec",
    "resolve_start", "resolve_end", "split_range", "limit_end", "encode_offset", "decode_offset", "decode_position",
    "check_start", "check_position",
]

EARLIEST = "earliest"
LATEST = "latest"


class OffsetError(ValueError):
    """A bad offset option or a checkpointed offset that does not belong to this stream."""


class DataLoss(Exception):
    """Messages in ``[start, first_seq)`` were removed from the stream before the query read them."""

    def __init__(self, stream: str, start: int, first_seq: int) -> None:
        super().__init__(
            f"stream {stream!r}: sequences {start}..{first_seq - 1} were removed (retention or purge) before they "
            f"were read; the stream now starts at {first_seq}. Set failOnDataLoss=false to skip them.")
        self.stream = stream
        self.start = start
        self.first_seq = first_seq


class StreamReset(DataLoss):
    """The checkpoint belongs to an earlier incarnation of the stream, or lies past its end."""

    def __init__(self, stream: str, reason: str, first_seq: int) -> None:
        Exception.__init__(
            self, f"stream {stream!r}: {reason}; messages the query had not read are lost and the sequences it "
                  f"checkpointed mean nothing now. Set failOnDataLoss=false to restart from the stream's first "
                  f"message ({first_seq}).")
        self.stream = stream
        self.start = 0
        self.first_seq = first_seq


@dataclass(frozen=True, slots=True)
class StreamBounds:
    """What STREAM.INFO says about the stored sequences, and when the stream was created (its incarnation)."""

    first_seq: int
    last_seq: int
    created: str | None = None

    @classmethod
    def from_state(cls, state: dict, created: str | None = None) -> "StreamBounds":
        return cls(int(state.get("first_seq", 0)), int(state.get("last_seq", 0)), created)

    @classmethod
    def from_info(cls, info: dict) -> "StreamBounds":
        return cls.from_state(info.get("state") or {}, info.get("created"))

    @property
    def start(self) -> int:
        """The first readable sequence (1 for a stream that never held a message)."""
        return max(self.first_seq, 1)

    @property
    def end(self) -> int:
        """One past the last stored sequence."""
        return self.last_seq + 1


def parse_offset_spec(value, name: str, allow_earliest: bool = True) -> str | int:
    """``earliest`` / ``latest`` / a positive sequence number, from an option string."""
    if value is None:
        raise OffsetError(f"{name} is not set")
    text = str(value).strip()
    low = text.lower()
    if low == LATEST:
        return LATEST
    if low == EARLIEST:
        if not allow_earliest:
            raise OffsetError(f"{name}: 'earliest' is not allowed here")
        return EARLIEST
    try:
        n = int(text)
    except ValueError:
        raise OffsetError(f"{name} must be 'earliest', 'latest' or a stream sequence, not {text!r}") from None
    if n < 1:
        raise OffsetError(f"{name}: stream sequences start at 1, got {n}")
    return n


def resolve_start(spec: str | int, bounds: StreamBounds) -> int:
    """The first sequence to read for a ``startingOffsets`` value (may be below ``first_seq``: see check_start)."""
    if spec == EARLIEST:
        return bounds.start
    if spec == LATEST:
        return bounds.end
    return int(spec)


def resolve_end(spec: str | int, bounds: StreamBounds) -> int:
    """The exclusive end for an ``endingOffsets`` value; never past what is stored now."""
    if spec == LATEST:
        return bounds.end
    if spec == EARLIEST:
        return bounds.start
    return min(int(spec), bounds.end)


def check_start(stream: str, start: int, bounds: StreamBounds, fail_on_data_loss: bool, end: int | None = None) -> int:
    """``start`` if nothing before ``first_seq`` is still wanted; else raise :class:`DataLoss` or skip ahead.

    Only sequences the range actually covers count: a range that ends at or below ``first_seq`` lost everything it
    wanted, one that starts at ``first_seq`` lost nothing.
    """
    first = bounds.start
    if start >= first:
        return start
    if bounds.first_seq == 0 and bounds.last_seq == 0:
        return start  # a stream that never held a message has lost nothing
    if fail_on_data_loss:
        raise DataLoss(stream, start, first)
    return first if end is None else min(first, end)


def split_range(start: int, end: int, min_partitions: int = 1, max_per_partition: int = 0) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` into contiguous half-open pieces covering it exactly, in order."""
    n = end - start
    if n <= 0:
        return []
    parts = max(1, min_partitions)
    if max_per_partition > 0:
        parts = max(parts, -(-n // max_per_partition))
    parts = min(parts, n)
    size, extra = divmod(n, parts)
    out = []
    s = start
    for i in range(parts):
        e = s + size + (1 if i < extra else 0)
        out.append((s, e))
        s = e
    return out


def limit_end(start: int, available_end: int, max_offsets: int | None) -> int:
    """The end of a micro-batch starting at ``start``: all that is available, or ``max_offsets`` sequences."""
    if available_end <= start:
        return start
    if max_offsets is not None and max_offsets > 0:
        return min(available_end, start + max_offsets)
    return available_end


@dataclass(frozen=True, slots=True)
class Position:
    """A decoded streaming offset: next sequence, the stream's incarnation, and where a reset restarted reading."""

    seq: int
    created: str | None = None
    reset: int | None = None


def encode_offset(stream: str, seq: int, created: str | None = None, reset: int | None = None) -> dict:
    off = {"stream": stream, "seq": int(seq)}
    if created:
        off["created"] = created
    if reset is not None:
        off["reset"] = int(reset)
    return off


def check_position(stream: str, pos: Position, bounds: StreamBounds, fail_on_data_loss: bool) -> tuple[int, bool]:
    """(sequence to continue from, whether the stream was reset) for a checkpointed position.

    A position from another incarnation of the stream, or past its end, is data loss (see the module docstring):
    raise :class:`StreamReset`, or restart at the stream's first readable sequence.  Within the same incarnation
    the ordinary retention check (:func:`check_start`) applies."""
    reason = None
    if pos.created and bounds.created and pos.created != bounds.created:
        reason = (f"it was deleted and re-created (the checkpoint is of the stream created {pos.created}, "
                  f"the stream now was created {bounds.created})")
    elif pos.seq > bounds.end and not (bounds.first_seq == 0 and bounds.last_seq == 0 and pos.seq == 1):
        reason = (f"the checkpoint is at sequence {pos.seq} but the stream ends at {bounds.last_seq} (it was "
                  f"re-created or restored from an older copy)")
    if reason is not None:
        if fail_on_data_loss:
            raise StreamReset(stream, reason, bounds.start)
        return bounds.start, True
    return check_start(stream, pos.seq, bounds, fail_on_data_loss), False


def decode_offset(offset, stream: str) -> int:
    """The sequence of a checkpointed offset (a dict, or its JSON text); it must name the same stream."""
    return decode_position(offset, stream).seq


def decode_position(offset, stream: str) -> Position:
    """A checkpointed offset (a dict, or its JSON text) as a :class:`Position`; it must name the same stream."""
    if isinstance(offset, str):
        offset = json.loads(offset)
    if not isinstance(offset, dict) or "seq" not in offset:
        raise OffsetError(f"not a jetstream offset: {offset!r}")
    if offset.get("stream", stream) != stream:
        raise OffsetError(f"the checkpoint holds an offset of stream {offset.get('stream')!r}, "
                          f"but this query reads {stream!r}")
    seq = offset["seq"]
    if not isinstance(seq, int) or seq < 1:
        raise OffsetError(f"bad sequence in offset {offset!r}")
    created = offset.get("created")
    reset = offset.get("reset")
    if (created is not None and not isinstance(created, str)) or \
            (reset is not None and (not isinstance(reset, int) or not 1 <= reset <= seq)):
        raise OffsetError(f"bad offset {offset!r}")
    return Position(seq, created, reset)
