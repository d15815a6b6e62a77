"""Small files written atomically: stream/consumer metadata, consumer state, block summaries.

Format: ``b"SKM1"`` + crc32 (u32 little-endian) of the body + body (msgpack).  A file that fails the magic,
the checksum or the decode raises ``CorruptMetadataError``; callers decide whether that is fatal (it never is
for the server: a corrupt consumer state is reported, a corrupt block summary is rebuilt).

Writes go to ``<name>.tmp`` in the same directory, are fsynced, renamed over the target, and the directory
is fsynced, so a reader sees the old file or the new one, never a mix (the nats-server pattern for meta.inf).
"""
from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

from skiff.storage.errors import CorruptMetadataError

MAGIC = b"SKM1"
_CRC = struct.Struct("<I")
META_FILE = "meta.inf"  # nats-server JetStreamMetaFile


# File layout:
#   offset  size  field
#        0     4  magic b"SKM1"
#        4     4  crc32 (zlib) of the body, little-endian
#        8     *  body: msgpack (use_bin_type=True)
def encode(obj: Any) -> bytes:
    # msgpack is imported by the first metadata file, not at start: a server with an empty store needs none
    # (~1 ms and ~0.2 MiB of idle RSS)
    import msgpack

    body = msgpack.packb(obj, use_bin_type=True)
    return MAGIC + _CRC.pack(zlib.crc32(body)) + body


def decode(raw: bytes, path: str = "?") -> Any:
    if len(raw) < 8 or raw[:4] != MAGIC:
        raise CorruptMetadataError(path, "bad magic or truncated")
    body = raw[8:]
    if zlib.crc32(body) != _CRC.unpack_from(raw, 4)[0]:
        raise CorruptMetadataError(path, "checksum mismatch")
    import msgpack

    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several types
        raise CorruptMetadataError(path, f"undecodable: {e}") from None


def fsync_dir(path: str | os.PathLike) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to ``path`` via temp file + (fsync) + rename (+ directory fsync)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def write_meta(path: str | os.PathLike, obj: Any, durable: bool = True) -> None:
    write_atomic(path, encode(obj), durable)


def read_meta(path: str | os.PathLike) -> Any:
    """Decode a file written by ``write_meta``; FileNotFoundError if absent, CorruptMetadataError if bad."""
    with open(path, "rb") as f:
        raw = f.read()
    return decode(raw, str(path))
