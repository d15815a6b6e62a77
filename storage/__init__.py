"""Stream and consumer storage for Skiff: one interface (``StreamStore`` / ``ConsumerStore``), a memory and a
file implementation, and the on-disk layout.  Never imports ``server``; everything here is synchronous."""
from storage.base import ConsumerStore, Expired, StreamStore
from storage.config import StoreConfig
from storage.consumer import FileConsumerStore, MemoryConsumerStore
from storage.errors import (
    CorruptMetadataError,
    DiscardNewError,
    InvalidPathError,
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MsgTooLargeError,
    NoAckPolicyError,
    SequenceMismatchError,
    StoreClosedError,
    StoreError,
    StoreWriteError,
    TooManyResultsError,
)
from storage.filestore import FileStreamStore
from storage.layout import StoreRoot
from storage.memstore import MemoryStreamStore
from storage.records import (
    ConsumerState,
    LostStreamData,
    Pending,
    SequencePair,
    SimpleState,
    StoredMsg,
    StreamState,
)

__all__ = [
    "ConsumerState", "ConsumerStore", "CorruptMetadataError", "DiscardNewError", "Expired", "FileConsumerStore",
    "FileStreamStore", "InvalidPathError", "LostStreamData", "MaxBytesError", "MaxMsgsError",
    "MaxMsgsPerSubjectError", "MemoryConsumerStore", "MemoryStreamStore", "MsgTooLargeError",
    "NoAckPolicyError", "Pending", "SequenceMismatchError", "SequencePair", "SimpleState", "StoreClosedError",
    "StoreConfig", "StoreError", "StoreRoot", "StoreWriteError", "StoredMsg", "StreamState", "StreamStore",
    "TooManyResultsError",
]
