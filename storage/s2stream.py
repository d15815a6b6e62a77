"""The S2 stream format (klauspost/compress ``s2``) that nats-server wraps stream snapshots in.

Theory of operation
-------------------
An S2 stream is the Snappy framing format with its own stream identifier: a ``0xff`` chunk holding ``S2sTwO``,
then chunks of ``type(1) length(3, little endian) body``.  Type ``0x00`` is a compressed block and ``0x01`` an
uncompressed one, each body starting with the masked CRC-32C of the *uncompressed* bytes; ``0x80``-``0xfe`` are
skipped; ``0x02``-``0x7f`` are refused (s2 reader.go).  An S2 block is a Snappy block plus one encoding Snappy
does not have: a 2-byte copy with offset 0 repeats the previous offset (s2 decode_other.go).

Writing: every Snappy block is a valid S2 block, so :class:`S2Writer` lets ``cramjam`` write Snappy frames and
swaps the stream identifier; nats-server's ``s2.NewReader`` takes them as they are.

Reading: :class:`S2Decoder` is fed the bytes as they arrive (restore chunks) and returns what it decoded.  Each
block is first decoded by ``cramjam``'s Snappy decoder, which refuses (never misreads) an S2 repeat, and only such
blocks go through the pure Python decoder below.  The CRC is checked as the s2 reader checks it.  Errors carry
the s2 package's own texts, since nats-server puts them in its ``restore failed: ...`` replies.
"""
from __future__ import annotations

import cramjam

STREAM_IDENTIFIER = b"\xff\x06\x00\x00S2sTwO"
_SNAPPY_IDENTIFIER_LEN = 10  # cramjam's own b"\xff\x06\x00\x00sNaPpY"
MAX_BLOCK_SIZE = 4 << 20  # s2 maxBlockSize: the largest block a reader accepts

ERR_CORRUPT = "s2: corrupt input"
ERR_CRC = "s2: corrupt input, crc mismatch"
ERR_UNSUPPORTED = "s2: unsupported input"


class S2Error(ValueError):
    """A stream the s2 reader refuses; ``str()`` is the s2 package's error text."""


# ---------------------------------------------------------------------------------------------------- CRC-32C
_CASTAGNOLI = 0x82F63B78


def _gf2_times(mat: list[int], vec: int) -> int:
    s, i = 0, 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def _crc32c_combine(crc1: int, crc2: int, len2: int) -> int:
    """zlib's crc32_combine for the Castagnoli polynomial: the CRC of A+B from CRC(A), CRC(B) and len(B)."""
    if len2 <= 0:
        return crc1
    odd = [_CASTAGNOLI] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four zero bits
    while True:
        even = _gf2_square(odd)
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def _unmask(m: int) -> int:
    c = (m - 0xA282EAD8) & 0xFFFFFFFF
    return ((c >> 17) | (c << 15)) & 0xFFFFFFFF


def mask_crc(c: int) -> int:
    """The framing format's masked CRC (snappy framing_format.txt section 3)."""
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data``, computed in Rust: cramjam's Snappy framer stores the masked CRC-32C of every 64 KiB
    block it writes; longer inputs are combined block by block."""
    crc = 0
    for i in range(0, len(data), 65536):
        part = data[i:i + 65536]
        frame = bytes(cramjam.snappy.compress(part))
        m = int.from_bytes(frame[14:18], "little")
        crc = _crc32c_combine(crc, _unmask(m), len(part)) if i else _unmask(m)
    return crc


# ---------------------------------------------------------------------------------------------------- writing
class S2Writer:
    """Compresses bytes into S2 stream chunks; the first call's output starts with the stream identifier."""

    __slots__ = ("_started",)

    def __init__(self) -> None:
        self._started = False

    def encode(self, data: bytes) -> bytes:
        if not data:
            return b""
        body = bytes(cramjam.snappy.compress(data))[_SNAPPY_IDENTIFIER_LEN:]
        if self._started:
            return body
        self._started = True
        return STREAM_IDENTIFIER + body


# ---------------------------------------------------------------------------------------------------- reading
def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = v = 0
    while pos < len(buf):
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7
        if shift > 35:
            break
    raise S2Error(ERR_CORRUPT)


def decode_block(src: bytes) -> bytes:
    """One S2 block (s2 decode_other.go s2Decode): Snappy's literals and copies plus the repeat-offset copy."""
    n, s = _uvarint(src, 0)
    if n > MAX_BLOCK_SIZE:
        raise S2Error(ERR_CORRUPT)
    try:
        out = cramjam.snappy.decompress_raw(src)
        if len(out) != n:
            raise S2Error(ERR_CORRUPT)
        return bytes(out)
    except cramjam.DecompressionError:
        pass  # an S2-only encoding (or a corrupt block): decode it here
    dst = bytearray()
    offset = 0
    end = len(src)
    while s < end:
        tag = src[s]
        kind = tag & 3
        if kind == 0:  # literal
            x = tag >> 2
            if x < 60:
                s += 1
            else:
                nb = x - 59
                if s + 1 + nb > end:
                    raise S2Error(ERR_CORRUPT)
                x = int.from_bytes(src[s + 1:s + 1 + nb], "little")
                s += 1 + nb
            length = x + 1
            if length > n - len(dst) or length > end - s:
                raise S2Error(ERR_CORRUPT)
            dst += src[s:s + length]
            s += length
            continue
        if kind == 1:  # copy with 1-byte offset; offset 0 = repeat the last offset
            if s + 2 > end:
                raise S2Error(ERR_CORRUPT)
            length = (tag >> 2) & 7
            toffset = ((tag & 0xE0) << 3) | src[s + 1]
            s += 2
            if toffset == 0:
                if length in (5, 6, 7):
                    nb = length - 4
                    if s + nb > end:
                        raise S2Error(ERR_CORRUPT)
                    v = int.from_bytes(src[s:s + nb], "little")
                    s += nb
                    length = v + (4, 1 << 8, 1 << 16)[nb - 1]
            else:
                offset = toffset
            length += 4
        elif kind == 2:  # copy with 2-byte offset
            if s + 3 > end:
                raise S2Error(ERR_CORRUPT)
            length = 1 + (tag >> 2)
            offset = src[s + 1] | (src[s + 2] << 8)
            s += 3
        else:  # copy with 4-byte offset
            if s + 5 > end:
                raise S2Error(ERR_CORRUPT)
            length = 1 + (tag >> 2)
            offset = int.from_bytes(src[s + 1:s + 5], "little")
            s += 5
        d = len(dst)
        if offset <= 0 or d < offset or length > n - d:
            raise S2Error(ERR_CORRUPT)
        if offset >= length:
            dst += dst[d - offset:d - offset + length]
        else:  # overlapping copy: the pattern repeats forwards
            pat = bytes(dst[d - offset:])
            dst += (pat * (length // offset + 1))[:length]
    if len(dst) != n:
        raise S2Error(ERR_CORRUPT)
    return bytes(dst)


class S2Decoder:
    """Push decoder of an S2 stream: ``feed`` returns the decoded bytes of every complete chunk so far."""

    __slots__ = ("_buf", "_started", "error")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._started = False
        self.error: str | None = None

    @property
    def at_chunk_boundary(self) -> bool:
        """True when no partial chunk is buffered (the stream may end here cleanly)."""
        return not self._buf

    def feed(self, data: bytes) -> list[bytes]:
        if self.error is not None:
            raise S2Error(self.error)
        try:
            return self._feed(data)
        except S2Error as e:
            self.error = str(e)
            raise

    def _feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        blen = len(buf)
        while blen - pos >= 4:
            ctype = buf[pos]
            clen = buf[pos + 1] | (buf[pos + 2] << 8) | (buf[pos + 3] << 16)
            if not self._started:
                if ctype != 0xFF:
                    raise S2Error(ERR_CORRUPT)
                self._started = True
            if ctype <= 0x01 and clen < 4:
                raise S2Error(ERR_CORRUPT)
            if 0x02 <= ctype <= 0x7F:
                raise S2Error(ERR_UNSUPPORTED)
            if blen - pos - 4 < clen:
                break
            body = bytes(buf[pos + 4:pos + 4 + clen])
            pos += 4 + clen
            if ctype == 0xFF:
                if body not in (b"S2sTwO", b"sNaPpY"):
                    raise S2Error(ERR_CORRUPT)
                continue
            if ctype >= 0x80:  # padding and reserved skippable chunks
                continue
            want = int.from_bytes(body[:4], "little")
            block = decode_block(body[4:]) if ctype == 0x00 else body[4:]
            if len(block) > MAX_BLOCK_SIZE:
                raise S2Error(ERR_CORRUPT)
            if mask_crc(crc32c(block)) != want:
                raise S2Error(ERR_CRC)
            out.append(block)
        del buf[:pos]
        return out
