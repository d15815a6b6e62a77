"""nats-server's stream backup archive (``NATSARC1``, server/archive/archive.go; stream_backup.go), sans I/O.

Layout (inside the S2 stream, see :mod:`storage.s2stream`)::

    "NATSARC1"                                    magic, once
    entry*:
        uvarint  len(name)                         at most 1 MiB
        varint   timestamp (ns, zigzag)
        uvarint  sequence                          0 = unset
        uvarint  header size
        uvarint  payload size
        name bytes
        header size + payload size bytes           e.g. a message's raw headers then its body

A stream backup is ``state.json`` (the StreamState, ``consumer_count`` = consumers that follow), one
``consumers/<name>`` entry per consumer (``{"config": ..., "state": ...}``), one entry per message (name = subject,
its sequence and timestamp), then an all-zero entry that marks the end: a backup without it was truncated.

:class:`ArchiveReader` is a push parser: ``feed`` returns the complete entries so far.  Before an entry's body is
buffered, ``check`` (given by the caller) sees its header and may refuse it, so a corrupt or hostile size never
makes the reader hold more than one permitted entry.  Errors use archive.go's texts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

MAGIC = b"NATSARC1"
MAX_NAME_LEN = 1 << 20
ERR_INVALID = "archive: invalid archive stream"
_I64_MAX = (1 << 63) - 1


class ArchiveError(ValueError):
    pass


@dataclass(slots=True)
class Entry:
    name: str
    timestamp: int
    sequence: int
    header_size: int
    payload_size: int
    data: bytes = b""

    @property
    def is_end(self) -> bool:
        """The all-zero end-of-backup sentinel (stream_backup.go RestoreStreamV2)."""
        return (self.sequence == 0 and self.timestamp == 0 and self.header_size == 0 and self.payload_size == 0
                and not self.name)


def _put_uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_entry(out: bytearray, name: bytes, timestamp: int, sequence: int, hdr: bytes, payload: bytes) -> None:
    """Append one entry (archive.go Writer.WriteHeader + Write) to ``out``."""
    _put_uvarint(out, len(name))
    _put_uvarint(out, timestamp << 1 if timestamp >= 0 else ((~timestamp) << 1) | 1)  # zigzag (Go PutVarint)
    _put_uvarint(out, sequence)
    _put_uvarint(out, len(hdr))
    _put_uvarint(out, len(payload))
    out += name
    out += hdr
    out += payload


def encode_end(out: bytearray) -> None:
    out += b"\x00\x00\x00\x00\x00"


class _Short(Exception):
    """Not enough bytes buffered yet."""


class ArchiveReader:
    __slots__ = ("_buf", "_magic", "_pending", "check", "error")

    def __init__(self, check: Callable[[Entry], None] | None = None) -> None:
        self._buf = bytearray()
        self._magic = False
        self._pending: Entry | None = None  # header parsed, body not complete yet
        self.check = check
        self.error: str | None = None

    @property
    def at_entry_boundary(self) -> bool:
        return not self._buf and self._pending is None

    @property
    def started(self) -> bool:
        return self._magic

    def feed(self, data: bytes) -> list[Entry]:
        if self.error is not None:
            raise ArchiveError(self.error)
        self._buf += data
        out: list[Entry] = []
        try:
            self._parse(out)
        except ArchiveError as e:
            self.error = str(e)
            raise
        return out

    def _parse(self, out: list[Entry]) -> None:
        buf = self._buf
        pos = 0
        if not self._magic:
            if len(buf) < len(MAGIC):
                return
            if bytes(buf[:8]) != MAGIC:
                raise ArchiveError(ERR_INVALID)
            self._magic = True
            pos = 8
        n = len(buf)
        while True:
            e = self._pending
            if e is None:
                try:
                    e, pos = self._header(buf, pos, n)
                except _Short:
                    break
                if self.check is not None:
                    self.check(e)
                self._pending = e
            total = e.header_size + e.payload_size
            if n - pos < total:
                break
            e.data = bytes(buf[pos:pos + total])
            pos += total
            self._pending = None
            out.append(e)
        del buf[:pos]

    @staticmethod
    def _header(buf: bytearray, pos: int, n: int) -> tuple[Entry, int]:
        vals = []
        for _ in range(5):
            shift = v = 0
            while True:
                if pos >= n:
                    raise _Short
                b = buf[pos]
                pos += 1
                if shift == 63 and b > 1:
                    raise ArchiveError(ERR_INVALID)  # encoding/binary: varint overflows a 64-bit integer
                v |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise ArchiveError(ERR_INVALID)
            vals.append(v)
        name_len, zts, seq, hsz, psz = vals
        ts = (zts >> 1) ^ -(zts & 1)
        if name_len > MAX_NAME_LEN or hsz > _I64_MAX or psz > _I64_MAX or hsz + psz > _I64_MAX:
            raise ArchiveError(ERR_INVALID)
        if n - pos < name_len:
            raise _Short
        name = bytes(buf[pos:pos + name_len]).decode("utf-8", "surrogateescape")
        return Entry(name, ts, seq, hsz, psz), pos + name_len
