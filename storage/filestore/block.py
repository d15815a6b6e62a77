"""Block files: the on-disk record format, how records are encoded, and how a block is scanned back.

Theory of operation
-------------------
A stream's messages live in append-only block files ``msgs/<index>.blk``.  A block is a sequence of records;
every record starts with a two-byte magic and ends with a CRC-32 of everything before it, so that a reader
can (1) tell a whole record from a torn one, (2) notice corruption, and (3) find the next record after a
corrupt one by searching for the magic and checking candidates' CRCs.

Record kinds:
    MSG        a message: seq, ts, ttl, subject, header block, payload
    TOMBSTONE  ``seq`` was removed (written to the newest block, like nats-server's tombstones)
    SKIP       sequences ``seq .. seq+count-1`` were consumed without a message (count in the payload)
    FLOOR      every sequence below ``seq`` was removed (purge / compact)
    ERASED     a MSG record overwritten in place by erase_msg (same length, zeroed body)
    BLOCK      first record of every block: ``seq`` is the first sequence the block may hold

Recovery rules (see recovery.py): a record that does not end within the file is a torn tail and is cut; a
complete record with a bad CRC loses that record only: the scanner resyncs on the next magic whose record
checks out, and reports the skipped byte range so the caller can name the lost sequences.
"""
from __future__ import annotations

import struct
import zlib
from typing import Callable, Iterator, NamedTuple

from skiff.protocol.accel import speedups

MAGIC = b"\xa5\x5a"
KIND_MSG = 1
KIND_TOMBSTONE = 2
KIND_SKIP = 3
KIND_FLOOR = 4
KIND_ERASED = 5
KIND_BLOCK = 6
_KINDS = frozenset((KIND_MSG, KIND_TOMBSTONE, KIND_SKIP, KIND_FLOOR, KIND_ERASED, KIND_BLOCK))

# Record layout, all integers little-endian:
#
#   offset  size  field
#        0     2  magic 0xA5 0x5A
#        2     1  kind (KIND_*)
#        3     1  flags (0, reserved)
#        4     4  rlen: total record length in bytes, magic and crc included
#        8     8  seq
#       16     8  ts: store time, ns since the epoch
#       24     4  ttl: per-message TTL in seconds (0 none, -1 never), signed
#       28     2  slen: subject length
#       30     4  hlen: header block length (0 = no headers)
#       34  slen  subject (UTF-8)
#           hlen  header block (raw NATS/1.0 header lines)
#              *  payload: rlen - 38 - slen - hlen bytes
#   rlen-4     4  crc: zlib.crc32 of bytes [0, rlen-4)
#
# The accounted size reported in stream info is nats-server's fileStoreMsgSize, not rlen:
# 22+slen+dlen+8, plus 4+hlen with headers (so rlen = size+8 without headers, size+4 with).
HEAD = struct.Struct("<2sBBIQqiHI")
HEAD_SIZE = HEAD.size  # 34
CRC = struct.Struct("<I")
OVERHEAD = HEAD_SIZE + CRC.size  # 38
#: zlib.crc32 of a whole record, its stored CRC included, when that CRC is right (the CRC-32 residue: for any
#: bytes m, crc32(m + crc32(m) as u32 LE) is this constant, and no other 4 bytes after m give it).  One crc32 call
#: checks a record without unpacking the stored CRC (FileStreamStore._read_run).
CRC_RESIDUE = 0x2144DF1C
U64 = struct.Struct("<Q")
_CODE = struct.Struct("<I")  # a slot's subject code (seqindex.py)
MAX_RECORD = 1 << 30  # sanity bound when scanning (nats-server rlBadThresh is 32MB + headers)

_pack_head = HEAD.pack
_pack_crc = CRC.pack
_crc32 = zlib.crc32


def file_msg_size(slen: int, hlen: int, dlen: int) -> int:
    """nats-server fileStoreMsgSizeRaw."""
    if hlen == 0:
        return 22 + slen + dlen + 8
    return 22 + slen + 4 + hlen + dlen + 8


def append_msg_py(buf: bytearray, seq: int, ts: int, ttl: int, subj: bytes, hdr: bytes, data: bytes) -> int:
    """Append a MSG record (layout above) to ``buf``; returns its length.  The compiled twin is
    protocol/_speedups.c ``append_msg`` (same arguments, same bytes, struct.error for a field out of range:
    tests/storage/test_append_msg.py)."""
    rlen = OVERHEAD + len(subj) + len(hdr) + len(data)
    # Header, subject and header block joined (small), then the payload: two crc32 calls instead of four, and the
    # payload is still copied once.
    pre = _pack_head(MAGIC, KIND_MSG, 0, rlen, seq, ts, ttl, len(subj), len(hdr)) + subj + hdr
    buf += pre
    buf += data
    buf += _pack_crc(_crc32(data, _crc32(pre)))
    return rlen


# The compiled twin when the accelerator is built and not turned off (protocol/accel.py), else the one above.
append_msg = append_msg_py if speedups is None else speedups.append_msg


def encode_control(kind: int, seq: int, ts: int, payload: bytes = b"") -> bytes:
    """A TOMBSTONE / SKIP / FLOOR / BLOCK record (same layout, no subject or header)."""
    rlen = OVERHEAD + len(payload)
    rec = _pack_head(MAGIC, kind, 0, rlen, seq, ts, 0, 0, 0) + payload
    return rec + _pack_crc(_crc32(rec))


def encode_erased(seq: int, ts: int, rlen: int) -> bytes:
    """An ERASED record of exactly ``rlen`` bytes to overwrite a MSG record in place (``ts`` is kept: the
    stream's last timestamp may come from it)."""
    rec = _pack_head(MAGIC, KIND_ERASED, 0, rlen, seq, ts, 0, 0, 0) + bytes(rlen - OVERHEAD)
    return rec + _pack_crc(_crc32(rec))


# A good record found by ``scan`` is a plain tuple (cheaper than a NamedTuple on the recovery hot path):
#   (kind, pos, rlen, seq, ts, ttl, slen, hlen, extra)
# where ``extra`` is the subject (bytes) of a MSG record, the count of a SKIP record, else None.
Rec = tuple


class Bad(NamedTuple):
    """Bytes ``[pos, end)`` did not hold valid records.

    ``torn`` is True for an incomplete record at the very end of the data (a write cut short); otherwise the
    range held corrupt record(s) between/after good ones.  ``kind``/``seq`` are the header values of the
    first bad record when its header was at least readable (untrusted: use only as a hint).
    """

    pos: int
    end: int
    torn: bool
    kind: int
    seq: int


def _check(buf: memoryview | bytes, pos: int, end: int) -> tuple | None:
    """Header fields of a valid record at ``pos`` (complete within ``end``, CRC ok), else None."""
    if pos + OVERHEAD > end:
        return None
    h = HEAD.unpack_from(buf, pos)
    rlen = h[3]
    if h[0] != MAGIC or h[1] not in _KINDS or rlen < OVERHEAD or rlen > MAX_RECORD or pos + rlen > end:
        return None
    if OVERHEAD + h[7] + h[8] > rlen:
        return None
    if _crc32(buf[pos:pos + rlen - 4]) != CRC.unpack_from(buf, pos + rlen - 4)[0]:
        return None
    return h


def scan(data: bytes, start: int = 0) -> Iterator[tuple | Bad]:
    """Walk the records of a block image from ``start``, yielding record tuples (see ``Rec``) for good ones
    and ``Bad`` for byte ranges that hold no valid record."""
    mv = memoryview(data)
    end = len(data)
    pos = start
    unpack = HEAD.unpack_from
    crc_at = CRC.unpack_from
    while pos < end:
        # Fast path: a good record right here.
        if pos + OVERHEAD <= end:
            magic, kind, _f, rlen, seq, ts, ttl, slen, hlen = unpack(mv, pos)
            if (magic == MAGIC and kind in _KINDS and OVERHEAD + slen + hlen <= rlen <= MAX_RECORD
                    and pos + rlen <= end
                    and _crc32(mv[pos:pos + rlen - 4]) == crc_at(mv, pos + rlen - 4)[0]):
                if kind == KIND_MSG:
                    extra = data[pos + HEAD_SIZE:pos + HEAD_SIZE + slen]
                elif kind == KIND_SKIP and rlen >= OVERHEAD + 8:
                    extra = U64.unpack_from(mv, pos + HEAD_SIZE)[0]
                else:
                    extra = None
                yield (kind, pos, rlen, seq, ts, ttl, slen, hlen, extra)
                pos += rlen
                continue
        # Something is wrong at pos.  Classify, then resync on the next magic that starts a valid record.
        kind = seq = 0
        readable = pos + HEAD_SIZE <= end
        rlen = 0
        if readable:
            h = unpack(mv, pos)
            kind, rlen, seq = h[1], h[3], h[4]
        nxt = data.find(MAGIC, pos + 1)
        while nxt >= 0 and _check(mv, nxt, end) is None:
            nxt = data.find(MAGIC, nxt + 1)
        if nxt < 0:
            # Nothing valid follows.  A record whose declared length runs past the end of the data (or whose
            # header is cut) is a torn write; one that fits exactly is a complete record that got corrupted.
            complete = readable and rlen >= OVERHEAD and pos + rlen == end
            yield Bad(pos, end, not complete, kind, seq)
            return
        yield Bad(pos, nxt, False, kind, seq)
        pos = nxt


def read_run_py(out: list, buf: bytes, base: int, flushed: int, offsets, codes, i: int, j: int, seq: int,
                subject_of: Callable[[int], str], cls: type) -> tuple[int, int, int]:
    """The MSG records of slots ``i`` .. ``j - 1`` (sequences from ``seq``) that lie whole in ``buf`` (the block's
    bytes from file offset ``base``; only offsets below ``flushed`` are looked at), appended to ``out`` as ``cls``
    tuples (StoredMsg's field order: subject, seq, ts, hdr, data).  ``offsets`` are the slots' record offsets
    (array 'I'), ``codes`` their 4-byte subject codes (``subject_of`` names a code; asked once per change).

    ``parse_msg``'s checks, with the sequence: magic, kind, length, the CRC-32 of the whole record (as
    ``CRC_RESIDUE``).  It stops at the first slot that is not such a record in ``buf`` (a removed slot, the tail
    not yet flushed, a corrupt record) and returns ``(i, seq, end)``: where it stopped and the file offset just
    after the last record it took (-1 for none); FileStreamStore._read_run goes on from there the slow way.
    ``hdr`` and ``data`` are copies (``bytes``); a message without headers gets the shared ``b""``.  The compiled
    twin is protocol/_speedups.c ``read_run`` (same arguments, same results: tests/storage/test_read_run.py)."""
    nbuf = len(buf)
    mv = memoryview(buf)
    unpack_head = HEAD.unpack_from
    unpack_code = _CODE.unpack_from
    crc32 = _crc32
    new = tuple.__new__
    append = out.append
    end = -1
    last = -1
    subject = ""
    try:
        while i < j:
            off = offsets[i]
            pos = off - base
            if off >= flushed or pos < 0 or pos + OVERHEAD > nbuf:
                break
            magic, kind, _f, rlen, rseq, ts, _ttl, slen, hlen = unpack_head(buf, pos)
            rend = pos + rlen
            if not (rseq == seq and magic == MAGIC and kind == KIND_MSG and rend <= nbuf
                    and OVERHEAD + slen + hlen <= rlen and crc32(mv[pos:rend]) == CRC_RESIDUE):
                break
            end = off + rlen
            rend -= 4
            h = pos + HEAD_SIZE + slen
            if hlen:
                d = h + hlen
                hdr, data = buf[h:d], buf[d:rend]
            else:
                hdr, data = b"", buf[h:rend]
            icode = unpack_code(codes, i << 2)[0]
            if icode != last:
                subject = subject_of(icode)
                last = icode
            append(new(cls, (subject, seq, ts, hdr, data)))
            i += 1
            seq += 1
    finally:
        mv.release()
    return i, seq, end


# The compiled twin when the accelerator is built and not turned off (protocol/accel.py), else the one above.
read_run = read_run_py if speedups is None else speedups.read_run


def parse_msg(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int, int, bytes, bytes, bytes] | None:
    """Decode and verify the MSG record at ``pos``: (seq, ts, ttl, subj, hdr, data), or None if invalid."""
    if len(buf) - pos < OVERHEAD:
        return None
    magic, kind, _f, rlen, seq, ts, ttl, slen, hlen = HEAD.unpack_from(buf, pos)
    if magic != MAGIC or kind != KIND_MSG or rlen > len(buf) - pos or OVERHEAD + slen + hlen > rlen:
        return None
    end = pos + rlen - 4
    if _crc32(buf[pos:end]) != CRC.unpack_from(buf, end)[0]:
        return None
    p = pos + HEAD_SIZE
    return seq, ts, ttl, bytes(buf[p:p + slen]), bytes(buf[p + slen:p + slen + hlen]), bytes(buf[p + slen + hlen:end])
