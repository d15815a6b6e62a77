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
* :func:`split_range` cuts ``[start, end)`` into contiguous, non-overlapping pieces that cover it exactly: at least
  ``min_partitions`` (when the range has that many sequences) and none longer than ``max_per_partition``.  The
  pieces differ in length by at most one sequence.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "EARLIEST", "LATEST", "StreamBounds", "OffsetError", "DataLoss", "parse_offset_spec", "resolve_start",
    "resolve_end", "split_range", "limit_end", "encode_offset", "decode_offset", "check_start",
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


@dataclass(frozen=True, slots=True)
class StreamBounds:
    """What STREAM.INFO says about the stored sequences."""

    first_seq: int
    last_seq: int

    @classmethod
    def from_state(cls, state: dict) -> "StreamBounds":
        return cls(int(state.get("first_seq", 0)), int(state.get("last_seq", 0)))

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


def encode_offset(stream: str, seq: int) -> dict:
    return {"stream": stream, "seq": int(seq)}


def decode_offset(offset, stream: str) -> int:
    """The sequence of a checkpointed offset (a dict, or its JSON text); it must name the same stream."""
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
    return seq
