"""Record types shared by every store: what a store hands out and what it reports.

These are plain values.  ``StoredMsg`` is a NamedTuple because it is created on every load (cheap to build,
unpacks like a tuple); the state objects are slotted dataclasses because the server fills some fields in
(``consumer_count``) and serialises them into JetStream JSON.

Field names follow nats-server's ``StoreMsg`` / ``StreamState`` / ``SimpleState`` / ``ConsumerState``
(server/store.go), in snake case.  Times are integer nanoseconds since the epoch; ``0`` is Go's zero time
(the server renders it as ``0001-01-01T00:00:00Z``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class StoredMsg(NamedTuple):
    """One message as stored: ``hdr`` is the raw NATS header block (``NATS/1.0\\r\\n...\\r\\n\\r\\n``) or b""."""

    subject: str
    seq: int
    ts: int
    hdr: bytes
    data: bytes


class SimpleState(NamedTuple):
    """Per-subject (or filtered) state, nats-server ``SimpleState``: message count, first and last sequence."""

    msgs: int = 0
    first: int = 0
    last: int = 0


@dataclass(slots=True)
class LostStreamData:
    """Messages lost to corruption, as nats-server reports them in stream state (``lost``)."""

    msgs: list[int] = field(default_factory=list)
    bytes: int = 0


@dataclass(slots=True)
class StreamState:
    """nats-server ``StreamState``.

    ``num_deleted`` counts the gaps between ``first_seq`` and ``last_seq`` (interior deletes, lost messages);
    ``deleted`` and ``subjects`` are only filled on request; ``consumer_count`` is left to the server.
    """

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: int = 0
    last_seq: int = 0
    last_ts: int = 0
    num_subjects: int = 0
    num_deleted: int = 0
    deleted: list[int] | None = None
    subjects: dict[str, int] | None = None
    lost: LostStreamData | None = None
    consumer_count: int = 0


@dataclass(slots=True)
class SequencePair:
    """A consumer sequence and the stream sequence of the same delivery (nats-server ``SequencePair``)."""

    consumer_seq: int = 0
    stream_seq: int = 0


class Pending(NamedTuple):
    """An outstanding delivery: the consumer (delivery) sequence of the first delivery and its timestamp (ns)."""

    sequence: int
    timestamp: int


@dataclass(slots=True)
class ConsumerState:
    """nats-server ``ConsumerState``: ``pending`` and ``redelivered`` are keyed by stream sequence."""

    delivered: SequencePair = field(default_factory=SequencePair)
    ack_floor: SequencePair = field(default_factory=SequencePair)
    pending: dict[int, Pending] = field(default_factory=dict)
    redelivered: dict[int, int] = field(default_factory=dict)
