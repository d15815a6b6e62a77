"""Exceptions raised by the stores.

Where nats-server has a sentinel error (server/store.go) the exception carries the same text, because the
server puts that text into API errors and PubAcks (e.g. 10077 "maximum messages exceeded").
"""
from __future__ import annotations


class StoreError(Exception):
    """Base class of every storage error."""


class StoreClosedError(StoreError):
    def __init__(self) -> None:
        super().__init__("store is closed")


class DiscardNewError(StoreError):
    """A limit is reached and the stream's discard policy is ``new`` (JSStreamStoreFailedF, err_code 10077)."""


class MaxMsgsError(DiscardNewError):
    def __init__(self) -> None:
        super().__init__("maximum messages exceeded")


class MaxBytesError(DiscardNewError):
    def __init__(self) -> None:
        super().__init__("maximum bytes exceeded")


class MaxMsgsPerSubjectError(DiscardNewError):
    def __init__(self) -> None:
        super().__init__("maximum messages per subject exceeded")


class MsgTooLargeError(StoreError):
    def __init__(self) -> None:
        super().__init__("message too large")


class SequenceMismatchError(StoreError):
    def __init__(self) -> None:
        super().__init__("expected sequence does not match store")


class TooManyResultsError(StoreError):
    def __init__(self) -> None:
        super().__init__("too many matching results for request")


class NoAckPolicyError(StoreError):
    def __init__(self) -> None:
        super().__init__("ack policy is none")


class StoreWriteError(StoreError):
    """Handing buffered records to the OS failed (ENOSPC, EIO, ...).

    The store has rolled itself back to what is on disk: ``seqs`` are the sequences stored since the last
    successful flush that are *not* in the store any more (their publishers get error PubAcks).  Removals
    made since the last flush may have been undone too (the messages are back); ``undone_removals`` lists them.
    Nothing that was flushed before is lost.  ``errno`` is the OS error number.
    """

    def __init__(self, seqs: list[int], cause: OSError, undone_removals: list[int] | None = None) -> None:
        self.seqs = seqs
        self.undone_removals = undone_removals or []
        self.errno = cause.errno
        self.cause = cause
        super().__init__(f"write failed: {cause.strerror or cause}; {len(seqs)} message(s) not stored")


class CorruptMetadataError(StoreError):
    """A metadata file (stream or consumer ``meta.inf``, consumer ``o.dat``) failed its checksum or decode."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"corrupt metadata {path}: {reason}")


class InvalidPathError(StoreError):
    """A stream or consumer name would place files outside the store directory."""
