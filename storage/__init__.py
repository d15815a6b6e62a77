"""Stream and consumer storage for Skiff: one interface (``StreamStore`` / ``ConsumerStore``), a memory and a
file implementation, and the on-disk layout.  Never imports ``server``; everything here is synchronous.

The names below load with their module on first use (PEP 562): importing one submodule (``skiff.storage.layout``
at every JetStream start) must not load the file store, which a start with an empty store never needs (#13)."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "ConsumerStore": "base", "Expired": "base", "StreamStore": "base",
    "StoreConfig": "config",
    "FileConsumerStore": "consumer", "MemoryConsumerStore": "consumer",
    "CorruptMetadataError": "errors", "DiscardNewError": "errors", "InvalidPathError": "errors",
    "MaxBytesError": "errors", "MaxMsgsError": "errors", "MaxMsgsPerSubjectError": "errors",
    "MsgTooLargeError": "errors", "NoAckPolicyError": "errors", "SequenceMismatchError": "errors",
    "StoreClosedError": "errors", "StoreError": "errors", "StoreWriteError": "errors",
    "TooManyResultsError": "errors",
    "FileStreamStore": "filestore", "StoreRoot": "layout", "MemoryStreamStore": "memstore",
    "ConsumerState": "records", "LostStreamData": "records", "Pending": "records", "SequencePair": "records",
    "SimpleState": "records", "StoredMsg": "records", "StreamState": "records",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'skiff.storage' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"skiff.storage.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


if TYPE_CHECKING:
    from skiff.storage.base import ConsumerStore, Expired, StreamStore  # noqa: F401
    from skiff.storage.config import StoreConfig  # noqa: F401
    from skiff.storage.consumer import FileConsumerStore, MemoryConsumerStore  # noqa: F401
    from skiff.storage.filestore import FileStreamStore  # noqa: F401
    from skiff.storage.layout import StoreRoot  # noqa: F401
    from skiff.storage.memstore import MemoryStreamStore  # noqa: F401
    from skiff.storage.records import (  # noqa: F401
        ConsumerState, LostStreamData, Pending, SequencePair, SimpleState, StoredMsg, StreamState)
