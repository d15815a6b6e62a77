"""Record types shared by every store: what a store hands out and what it reports.

These are plain values.  ``StoredMsg`` is a NamedTuple because it is created on every load (cheap to build,
unpacks like a tuple); the state objects are slotted plain classes (``protocol.record.Fields``: a dataclass's
``__init__``, equality and ``repr``, without the code a dataclass generates at import) because the server fills
some fields in (``consumer_count``) and serialises them into JetStream JSON.

Field names follow nats-server's ``StoreMsg`` / ``StreamState`` / ``SimpleState`` / ``ConsumerState``
(server/store.go), in snake case.  Times are integer nanoseconds since the epoch; ``0`` is Go's zero time
(the server renders it as ``0001-01-01T00:00:00Z``).
"""
from __future__ import annotations


from skiff.protocol.record import Fields, NamedTuple  # NamedTuple: typing's, without its annotation checks


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


class LostStreamData(Fields):
    """Messages lost to corruption, as nats-server reports them in stream state (``lost``)."""

    __slots__ = _fields = ("msgs", "bytes")

    def __init__(self, msgs: list[int] | None = None, bytes: int = 0) -> None:
        self.msgs = [] if msgs is None else msgs
        self.bytes = bytes


class StreamState(Fields):
    """nats-server ``StreamState``.

    ``num_deleted`` counts the gaps between ``first_seq`` and ``last_seq`` (interior deletes, lost messages);
    ``deleted`` and ``subjects`` are only filled on request; ``consumer_count`` is left to the server.
    """

    __slots__ = _fields = ("messages", "bytes", "first_seq", "first_ts", "last_seq", "last_ts", "num_subjects",
                           "num_deleted", "deleted", "subjects", "lost", "consumer_count")

    def __init__(self, messages: int = 0, bytes: int = 0, first_seq: int = 0, first_ts: int = 0, last_seq: int = 0,
                 last_ts: int = 0, num_subjects: int = 0, num_deleted: int = 0, deleted: list[int] | None = None,
                 subjects: dict[str, int] | None = None, lost: LostStreamData | None = None,
                 consumer_count: int = 0) -> None:
        self.messages = messages
        self.bytes = bytes
        self.first_seq = first_seq
        self.first_ts = first_ts
        self.last_seq = last_seq
        self.last_ts = last_ts
        self.num_subjects = num_subjects
        self.num_deleted = num_deleted
        self.deleted = deleted
        self.subjects = subjects
        self.lost = lost
        self.consumer_count = consumer_count


class SequencePair(Fields):
    """A consumer sequence and the stream sequence of the same delivery (nats-server ``SequencePair``)."""

    __slots__ = _fields = ("consumer_seq", "stream_seq")

    def __init__(self, consumer_seq: int = 0, stream_seq: int = 0) -> None:
        self.consumer_seq = consumer_seq
        self.stream_seq = stream_seq


class Pending(NamedTuple):
    """An outstanding delivery: the consumer (delivery) sequence of the first delivery and its timestamp (ns)."""

    sequence: int
    timestamp: int


class ConsumerState(Fields):
    """nats-server ``ConsumerState``: ``pending`` and ``redelivered`` are keyed by stream sequence."""

    __slots__ = _fields = ("delivered", "ack_floor", "pending", "redelivered")

    def __init__(self, delivered: SequencePair | None = None, ack_floor: SequencePair | None = None,
                 pending: dict[int, Pending] | None = None, redelivered: dict[int, int] | None = None) -> None:
        self.delivered = SequencePair() if delivered is None else delivered
        self.ack_floor = SequencePair() if ack_floor is None else ack_floor
        self.pending = {} if pending is None else pending
        self.redelivered = {} if redelivered is None else redelivered
