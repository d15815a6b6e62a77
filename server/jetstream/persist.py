"""A stream's metadata on disk and the store behind it (the layout itself is storage/layout.py's ``StoreRoot``).

Theory of operation
-------------------
Layout (nats-server's, global account ``$G``)::

    <store_dir>/jetstream/$G/streams/<name>/meta.inf   {"v": 1, "config": <StreamConfig JSON>, "created": <ns>}
    <store_dir>/jetstream/$G/streams/<name>/msgs/...   the file store's blocks (storage/filestore)

``meta.inf`` is written atomically by ``StoreRoot.write_stream_meta`` (magic + crc + msgpack, temp file, fsync,
rename) when a stream is created or updated; recovery reads it back.  The config is kept as the exact JSON nats-server
would echo (``StreamConfig.to_json``) so a restart reproduces ``stream info`` byte for byte.  Memory streams have no
directory and do not survive a restart, as in nats-server.

Names are checked twice before they become paths: the API validates them (nats-server ``isValidName``: no
whitespace, ``.``, ``*``, ``>``, ``/``, ``\\``) and :func:`safe_name` additionally refuses non-printable names;
``StoreRoot`` refuses anything that would resolve outside the store directory.
"""
from __future__ import annotations

from typing import Callable

from protocol.jsapi.stream_config import StreamConfig
from storage.base import StreamStore
from storage.config import StoreConfig
from storage.filestore import FileStreamStore
from storage.layout import StoreRoot
from storage.memstore import MemoryStreamStore

META_VERSION = 1


def safe_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and name.isprintable() and len(name.encode()) <= 255 and not any(
        c in name for c in " /\\.*>")


def write_stream_meta(root: StoreRoot, config: StreamConfig, created_ns: int) -> None:
    root.write_stream_meta(config.name, {"v": META_VERSION, "config": config.to_json(), "created": created_ns})


def read_stream_meta(root: StoreRoot, name: str) -> tuple[StreamConfig, int]:
    """Raises FileNotFoundError, CorruptMetadataError, or ValueError/GoDecodeError for an unusable config."""
    meta = root.read_stream_meta(name)
    if not isinstance(meta, dict) or "config" not in meta:
        raise ValueError("stream metadata without a config")
    cfg = StreamConfig.from_json(meta["config"], strict=False)
    return cfg, int(meta.get("created") or 0)


def store_config(config: StreamConfig, *, sync_interval_ns: int, sync_always: bool) -> StoreConfig:
    return StoreConfig.from_stream_config(config, sync_interval=sync_interval_ns, sync_always=sync_always)


def open_store(config: StreamConfig, root: StoreRoot, clock: Callable[[], int], sc: StoreConfig) -> StreamStore:
    """The store for a stream: memory for ``storage: memory``, else the file store in the stream's directory."""
    if config.storage == "memory":
        return MemoryStreamStore(sc, clock)
    return FileStreamStore(root.stream_dir(config.name), sc, clock)
