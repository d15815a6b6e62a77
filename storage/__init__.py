"""Stream and consumer storage for Skiff: one interface (``StreamStore`` / ``ConsumerStore``), a memory and a
file implementation, and the on-disk layout.  Never imports ``server``; everything here is synchronous."""
from skiff.storage.base import ConsumerStore, Expired, StreamStore
from skiff.storage.config import StoreConfig
from skiff.storage.consumer import FileConsumerStore, MemoryConsumerStore
from skiff.storage.errors import (
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
from skiff.storage.filestore import FileStreamStore
from skiff.storage.layout import StoreRoot
from skiff.storage.memstore import MemoryStreamStore
from skiff.storage.records import (
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
