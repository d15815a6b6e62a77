"""The snapshot codecs without a server: the S2 stream (storage/s2stream.py) and the NATSARC1 archive
(storage/snaparchive.py), fed at every split point as restore chunks arrive."""
from __future__ import annotations

import os

import pytest

from skiff.storage.s2stream import S2Decoder, S2Error, S2Writer, crc32c, decode_block, mask_crc
from skiff.storage.snaparchive import MAGIC, ArchiveError, ArchiveReader, encode_end, encode_entry


def _bitwise_crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for x in data:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def test_crc32c():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    data = os.urandom(150_000)  # three 64 KiB pieces combined
    assert crc32c(data) == _bitwise_crc32c(data)


def test_s2_repeat_offset_block():
    """An S2-only encoding (copy1 with offset 0 = repeat the last offset, with the 1-byte length extension) that
    a Snappy decoder refuses: 'abcd' literal, copy 4 at offset 4, repeat 8 more, repeat 5+4+4=13 more."""
    block = bytes([29]) + bytes([3 << 2]) + b"abcd" + bytes([0x01, 4]) + bytes([(4 << 2) | 1, 0]) + \
        bytes([(5 << 2) | 1, 0, 5])
    assert decode_block(block) == b"abcd" * 7 + b"a"
    with pytest.raises(S2Error, match="s2: corrupt input"):
        decode_block(bytes([8]) + bytes([0x01, 0]))  # a repeat before any offset


def test_s2_stream_every_split():
    payload = b"".join(os.urandom(50) * 3 for _ in range(20))
    w = S2Writer()
    data = w.encode(payload) + w.encode(b"tail" * 100)
    for cut in range(0, len(data), 7):
        d = S2Decoder()
        out = b"".join(d.feed(data[:cut]) + d.feed(data[cut:]))
        assert out == payload + b"tail" * 100 and d.at_chunk_boundary


def test_s2_stream_refusals():
    good = S2Writer().encode(b"hello" * 100)
    with pytest.raises(S2Error, match="^s2: corrupt input$"):
        S2Decoder().feed(b"hello")  # no stream identifier first
    with pytest.raises(S2Error, match="^s2: unsupported input$"):
        S2Decoder().feed(good[:10] + b"\x05\x01\x00\x00x")  # reserved unskippable chunk type
    bad = bytearray(good)
    bad[14] ^= 1  # the CRC
    with pytest.raises(S2Error, match="crc mismatch"):
        S2Decoder().feed(bytes(bad))
    assert mask_crc(0) == 0xA282EAD8


def test_archive_entries_every_split():
    buf = bytearray(MAGIC)
    encode_entry(buf, b"state.json", 7, 0, b"", b"{}")
    encode_entry(buf, b"subj.a", -3, 42, b"NATS/1.0\r\n\r\n", b"body")
    encode_end(buf)
    data = bytes(buf)
    for cut in range(len(data) + 1):
        r = ArchiveReader()
        es = r.feed(data[:cut]) + r.feed(data[cut:])
        assert [(e.name, e.timestamp, e.sequence, e.header_size, e.data) for e in es] == [
            ("state.json", 7, 0, 0, b"{}"), ("subj.a", -3, 42, 12, b"NATS/1.0\r\n\r\nbody"), ("", 0, 0, 0, b"")]
        assert es[-1].is_end and r.at_entry_boundary


def test_archive_refusals():
    with pytest.raises(ArchiveError, match="archive: invalid archive stream"):
        ArchiveReader().feed(b"NOTMAGIC")
    huge = bytearray(MAGIC) + bytes([0x80, 0x80, 0x80, 0x01])  # a 2 MiB name
    with pytest.raises(ArchiveError):
        ArchiveReader().feed(bytes(huge) + b"\x00" * 4)
    seen = []

    def check(e):
        seen.append(e.payload_size)
        raise ArchiveError("too big")

    buf = bytearray(MAGIC)
    encode_entry(buf, b"x", 0, 1, b"", b"y" * 1000)
    with pytest.raises(ArchiveError, match="too big"):
        ArchiveReader(check).feed(bytes(buf[:20]))  # refused before the body is there
    assert seen == [1000]
