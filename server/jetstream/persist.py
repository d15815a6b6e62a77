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

Deleting a stream is one atomic step: :func:`move_stream_aside` renames ``streams/<name>`` to
``<store_dir>/jetstream/$G/.deleted/<name>.<random>`` (same file system, so ``rename(2)``): a ``kill -9`` at any
point leaves the stream with all its consumers, or nothing of it.  The files are removed afterwards by
:func:`remove_in_background` in a worker thread that keeps yielding the GIL (storage/remove.py: a stream with 1,000
consumers is 2,000+ files, up to seconds of unlink that must not stall the event loop), and :func:`remove_leftovers` removes at start
what a crash left in ``.deleted``.  Recovery lists ``streams/`` only, so nothing set aside can come back.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from skiff.protocol.jsapi.stream_config import StreamConfig
from skiff.storage.config import StoreConfig
from skiff.storage.layout import StoreRoot
from skiff.storage.remove import remove_tree_in_background

if TYPE_CHECKING:  # storage/base.py (the store ABCs) loads with the first store, not at start (issue #13)
    from skiff.storage.base import StreamStore

META_VERSION = 1
DELETED_DIR = ".deleted"  # in the account directory, next to streams/ (a "." name is never an account or stream)


def safe_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and name.isprintable() and len(name.encode()) <= 255 and not any(
        c in name for c in " /\\.*>")


def write_stream_meta(root: StoreRoot, config: StreamConfig, created_ns: int) -> None:
    root.write_stream_meta(config.name, stream_meta_doc(config, created_ns))


def stream_meta_doc(config: StreamConfig, created_ns: int) -> dict:
    """A stream's ``meta.inf`` document (built on the loop, where the config is)."""
    return {"v": META_VERSION, "config": config.to_json(), "created": created_ns}


def rewrite_stream_meta(root: StoreRoot, name: str, doc: dict) -> None:
    """Rewrite an existing stream's ``meta.inf`` (an update; any thread: the update writes it in a worker).  No
    directory is created: a stream deleted meanwhile (renamed aside) must not come back, the write fails instead."""
    from skiff.storage import meta

    meta.write_meta(root.stream_dir(name) / meta.META_FILE, doc)


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
    """The store for a stream: memory for ``storage: memory``, else the file store in the stream's directory.
    Each store's module loads with the first stream that needs it (a start with an empty store needs neither)."""
    if config.storage == "memory":
        from skiff.storage.memstore import MemoryStreamStore

        return MemoryStreamStore(sc, clock)
    from skiff.storage.filestore import FileStreamStore

    return FileStreamStore(root.stream_dir(config.name), sc, clock)


# ---------------------------------------------------------------------------------------------------- delete
def _deleted_dir(root: StoreRoot) -> Path:
    return root.streams_dir.parent / DELETED_DIR


def move_stream_aside(root: StoreRoot, name: str) -> Path | None:
    """Rename the stream's directory out of ``streams/`` (atomic); the new path, or None if it had none.

    Raises OSError when the rename fails: the stream is then untouched and the delete is refused."""
    src = root.stream_dir(name)
    trash = _deleted_dir(root)
    trash.mkdir(parents=True, exist_ok=True)
    dst = trash / f"{name}.{os.urandom(6).hex()}"
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        return None
    return dst


remove_in_background = remove_tree_in_background  # storage/remove.py: a thread that keeps yielding the GIL


def remove_leftovers(root: StoreRoot) -> list[Path]:
    """Start the removal of everything an interrupted delete left aside; returns what it found."""
    try:
        found = [Path(e.path) for e in os.scandir(_deleted_dir(root))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    for path in found:
        remove_in_background(path)
    return found
