"""The storage interface the server is written against: ``StreamStore`` and ``ConsumerStore``.

Theory of operation
-------------------
A stream store holds the messages of one stream, numbered by a sequence that only grows.  Everything is
synchronous and runs to completion on the event-loop thread (DESIGN.md: "state changes never await"); the one
exception is ``sync()``, which the server runs in a worker thread.

Publishing::

    seq = store.store_msg(subject, hdr, data, ts)   # raises DiscardNewError subclasses, MsgTooLargeError
    ...                                               # more publishes in the same loop iteration
    store.flush()                                     # once per iteration, before PubAcks; may raise StoreWriteError
    # config.sync_always: await loop.run_in_executor(None, store.sync) before the PubAcks (group commit)
    # otherwise: a timer runs store.sync() in a thread every config.sync_interval

``store_msg`` makes the message visible at once (loads, state, pending counts); ``flush`` hands everything
buffered to the OS in one write per block file, so that it survives ``kill -9``.  If that write fails the store
rolls back to what is on disk and ``StoreWriteError.seqs`` names the publishes that must get error PubAcks.

Not-found convention: loads return ``None`` (never raise) when there is no such message; ``load_next_msg``
returns ``(None, last_seq)`` at the end of the stream, like nats-server's ErrStoreEOF with its skip value.

Removal notification: ``on_remove(seq, subject)`` (set by the server) is called for every message removed
one by one — limits (max_msgs, max_bytes, max_msgs_per_subject), ``expire``, ``remove_msg``/``erase_msg``.
Bulk removals (``purge``, ``compact``) do not call it; they return the count and the server tells its
consumers, as nats-server's ``mset.purge`` does.

Byte accounting follows nats-server: memory store msg size = len(subj)+len(hdr)+len(data)+16; file store
= 22+len(subj)+len(data)+8, plus 4+len(hdr) when there are headers.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Iterable, Sequence

from skiff.protocol.record import NamedTuple  # typing's, without its annotation checks (start-up)

from skiff.storage.config import StoreConfig
from skiff.storage.records import ConsumerState, SimpleState, StoredMsg, StreamState

Clock = Callable[[], int]
RemoveCallback = Callable[[int, str], None]


class Expired(NamedTuple):
    """One message removed by ``expire``.

    ``last_of_subject`` is True when the removal left its subject without messages; ``hdr`` is the removed
    message's header block, filled only when ``subject_delete_marker_ttl`` is configured (the server needs it
    to skip markers and KV purge messages when it decides to place a subject delete marker, ADR-43).
    """

    seq: int
    subject: str
    last_of_subject: bool
    hdr: bytes = b""


class StreamStore(ABC):
    """One stream's messages.  See the module docstring for the calling conventions."""

    config: StoreConfig
    on_remove: RemoveCallback | None

    # -- writing -------------------------------------------------------------------------------------------
    @abstractmethod
    def store_msg(self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0) -> int:
        """Append a message, assign and return the next sequence.

        ``ts`` is the receive time in ns (default: the store's clock).  ``ttl`` is the per-message TTL in
        seconds as parsed from ``Nats-TTL`` (0 none, -1 ``never``: also exempt from ``max_age``).  Discard-new
        limits raise ``MaxMsgsError`` / ``MaxBytesError`` / ``MaxMsgsPerSubjectError``; discard-old limits
        evict the oldest messages (``on_remove`` is called for each).
        """

    @abstractmethod
    def store_raw(self, seq: int, subject: str, hdr: bytes, data: bytes, ts: int, ttl: int = 0,
                  discard_new_check: bool = False) -> None:
        """Append with an explicit sequence (must be ``last_seq + 1``, or 0 for next); SequenceMismatchError."""

    @abstractmethod
    def skip_msg(self, seq: int = 0, ts: int | None = None) -> int:
        """Consume the next sequence without storing (interest retention with no interest); returns it.
        ``ts`` (if given) becomes ``last_ts``."""

    @abstractmethod
    def skip_msgs(self, seq: int, num: int) -> None:
        """Consume ``num`` sequences starting at ``seq`` (which must be ``last_seq + 1``)."""

    # -- reading -------------------------------------------------------------------------------------------
    @abstractmethod
    def load_msg(self, seq: int) -> StoredMsg | None: ...

    @abstractmethod
    def load_next_msg(self, filter: str = "", start_seq: int = 0) -> tuple[StoredMsg | None, int]:
        """First message at or after ``start_seq`` whose subject matches ``filter`` (wildcards allowed, "" = all).
        Returns ``(msg, msg.seq)`` or ``(None, last_seq)`` when there is none."""

    @abstractmethod
    def load_last_msg(self, filter: str = "") -> StoredMsg | None:
        """The newest message matching ``filter`` (literal or wildcard)."""

    @abstractmethod
    def load_prev_msg(self, filter: str, start_seq: int) -> StoredMsg | None:
        """Newest message at or before ``start_seq`` matching ``filter``."""

    @abstractmethod
    def subject_for_seq(self, seq: int) -> str | None: ...

    @abstractmethod
    def get_seq_from_time(self, ts: int) -> int:
        """First sequence stored at or after ``ts`` (ns); ``last_seq + 1`` if none (nats GetSeqFromTime)."""

    # -- removing ------------------------------------------------------------------------------------------
    @abstractmethod
    def remove_msg(self, seq: int) -> bool:
        """Remove one message; False if it was not there."""

    @abstractmethod
    def erase_msg(self, seq: int) -> bool:
        """Remove one message and overwrite its bytes on disk (``MSG.DELETE`` without ``no_erase``)."""

    @abstractmethod
    def purge(self, subject: str | None = None, seq: int = 0, keep: int = 0) -> int:
        """nats-server PurgeEx: remove messages matching ``subject`` (None/""/">" = all), below ``seq`` if
        given, keeping the newest ``keep`` if given.  Returns the number removed.  A full purge leaves
        ``first_seq = last_seq + 1``."""

    @abstractmethod
    def compact(self, seq: int) -> int:
        """Remove every message below ``seq``; past the end it behaves like a purge that restarts at ``seq``."""

    @abstractmethod
    def expire(self, now: int | None = None) -> list[Expired]:
        """Apply ``max_age`` and per-message TTLs at time ``now`` (ns, default the clock)."""

    @abstractmethod
    def next_expiry(self) -> int | None:
        """When (ns) ``expire`` next has work, or None; the server arms its timer with this."""

    # -- state ---------------------------------------------------------------------------------------------
    @abstractmethod
    def state(self, deleted_details: bool = False, subjects_filter: str | None = None) -> StreamState: ...

    @property
    @abstractmethod
    def first_seq(self) -> int: ...

    @property
    @abstractmethod
    def last_seq(self) -> int: ...

    @property
    @abstractmethod
    def msgs(self) -> int: ...

    @property
    @abstractmethod
    def bytes(self) -> int: ...

    @abstractmethod
    def filtered_state(self, seq: int, filter: str = "") -> SimpleState:
        """Count, first and last of messages at or after ``seq`` matching ``filter``."""

    @abstractmethod
    def subjects_state(self, filter: str = "") -> dict[str, SimpleState]: ...

    @abstractmethod
    def subjects_totals(self, filter: str = "") -> dict[str, int]: ...

    @abstractmethod
    def num_pending(self, start_seq: int, filter: str = "", last_per_subject: bool = False) -> int:
        """Messages at or after ``start_seq`` matching ``filter``; with ``last_per_subject``, the number of
        matching subjects whose last message is at or after ``start_seq``."""

    @abstractmethod
    def multi_last_seqs(self, filters: Iterable[str], max_seq: int = 0, max_allowed: int = 0) -> list[int]:
        """Sorted last sequences (at or below ``max_seq``, 0 = last) of every subject matching any filter;
        ``TooManyResultsError`` beyond ``max_allowed`` (0 = unlimited)."""

    # -- lifecycle -----------------------------------------------------------------------------------------
    @abstractmethod
    def update_config(self, config: StoreConfig) -> None:
        """Apply new limits (evicts at once for max_msgs/max_bytes/max_msgs_per_subject)."""

    @abstractmethod
    def flush(self) -> None:
        """Hand buffered writes to the OS.  Raises StoreWriteError after rolling back (see module doc)."""

    @abstractmethod
    def sync(self) -> None:
        """fsync what was flushed before the call.  Thread-safe with respect to the loop thread."""

    @property
    def needs_sync(self) -> bool:
        """True when something was flushed since the last sync (group commit can skip clean stores)."""
        return False

    @abstractmethod
    def stop(self) -> None:
        """Flush, sync, write indexes, close.  Idempotent."""

    @abstractmethod
    def delete(self) -> None:
        """Stop and remove all data."""

    @abstractmethod
    def consumer_store(self, name: str, ack_policy: str = "explicit", max_deliver: int = -1) -> "ConsumerStore":
        """Create or open the state store of consumer ``name`` (file stores read ``obs/<name>/o.dat``)."""

    def stored_consumers(self) -> tuple[int, list]:
        """The consumers kept with the stream, for recovery: the count of deleted consumer directories a crash left
        (removed now), then ``(name, metadata document or None, error or None)`` per consumer in name order.  A
        store that keeps none (memory) has none."""
        return 0, []


class ConsumerStore(ABC):
    """Delivery and ack state of one consumer (nats-server ``ConsumerStore``).

    ``update_delivered`` / ``update_acks`` follow nats-server's consumerMemStore semantics exactly (ack floor
    advance, AckAll, redelivered counts, max_deliver dropping from pending).  ``flush`` persists (file variant)
    only when something changed.
    """

    __slots__ = ()
    ack_policy: str
    max_deliver: int
    #: Set when stored state could not be read (file variant): a description; the store started empty.
    recovery_error: str | None

    @abstractmethod
    def update_delivered(self, dseq: int, sseq: int, dc: int, ts: int) -> None: ...

    def update_delivered_run(self, dseq: int, msgs: Sequence[StoredMsg]) -> None:
        """First deliveries (delivery count 1) of ``msgs``, in stream order, with delivery sequences ``dseq``,
        ``dseq + 1``, ...: ``update_delivered`` for each, which a store may do in one pass."""
        for m in msgs:
            self.update_delivered(dseq, m.seq, 1, m.ts)
            dseq += 1

    @abstractmethod
    def update_acks(self, dseq: int, sseq: int) -> bool:
        """Record an ack; False when ``sseq`` was not pending.  NoAckPolicyError for ack policy none."""

    @abstractmethod
    def state(self) -> ConsumerState:
        """A copy of the state."""

    @abstractmethod
    def set_state(self, state: ConsumerState, force: bool = False) -> None:
        """Replace the state (nats Update / ForceUpdate).  Without ``force`` an older state is rejected
        (``ValueError``) as nats-server's ErrStoreOldUpdate."""

    @abstractmethod
    def flush(self) -> bool:
        """Persist if dirty; returns True if it wrote."""

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def delete(self) -> None: ...
