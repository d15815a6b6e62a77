"""block.py ``append_msg``: the compiled twin (protocol/_speedups.c) against the pure one (``append_msg_py``), and
what either writes against ``parse_msg``, the reference reader of one record.

Every stored message of a file stream is written by ``append_msg``, so the two must write exactly the same bytes and
return the same length for any message (any sequence, time stamp and TTL in range, any subject, header block and
payload, appended to a buffer that already holds records), and refuse the same out-of-range fields with
``struct.error`` without touching the buffer.  Hypothesis draws the messages.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.protocol.accel import PURE_FORCED
from skiff.storage.filestore import block
from skiff.storage.filestore.block import CRC_RESIDUE, OVERHEAD, append_msg_py, parse_msg
from tests.protocol.test_speedups import compiled

U64 = (1 << 64) - 1
I64 = 1 << 63
I32 = 1 << 31

records = st.tuples(
    st.integers(0, U64), st.integers(-I64, I64 - 1), st.integers(-I32, I32 - 1),
    st.binary(max_size=300), st.binary(max_size=200), st.binary(max_size=3000))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.lists(records, min_size=1, max_size=5))
def test_compiled_and_pure_write_the_same_records(prefix, recs):
    c = compiled()
    pure, comp = bytearray(prefix), bytearray(prefix)
    for seq, ts, ttl, subj, hdr, data in recs:
        start = len(pure)
        n = append_msg_py(pure, seq, ts, ttl, subj, hdr, data)
        assert c.append_msg(comp, seq, ts, ttl, subj, hdr, data) == n == OVERHEAD + len(subj) + len(hdr) + len(data)
        assert comp == pure
        rec = bytes(pure[start:])
        assert block.zlib.crc32(rec) == CRC_RESIDUE  # the stored CRC is the record's
        assert parse_msg(rec) == (seq, ts, ttl, subj, hdr, data)


@pytest.mark.parametrize("field,value", [(1, -1), (1, U64 + 1), (2, I64), (2, -I64 - 1), (3, I32), (3, -I32 - 1),
                                         (4, b"s" * 65536)])
def test_out_of_range_fields_fail_alike_and_write_nothing(field, value):
    c = compiled()
    args = [None, 7, 1, 0, b"a.b", b"", b"data"]
    args[field] = value
    for impl in (append_msg_py, c.append_msg):
        buf = bytearray(b"keep")
        with pytest.raises(struct.error):
            impl(buf, *args[1:])
        assert buf == b"keep"


def test_compiled_takes_buffers_and_refuses_other_types():
    c = compiled()
    buf = bytearray()
    assert c.append_msg(buf, 1, 2, 3, memoryview(b"a"), bytearray(b"h"), memoryview(b"xyz")[1:]) == OVERHEAD + 4
    assert buf == (lambda b: (append_msg_py(b, 1, 2, 3, b"a", b"h", b"yz"), b)[1])(bytearray())
    with pytest.raises(TypeError):
        c.append_msg(b"", 1, 2, 3, b"a", b"", b"")  # bytes cannot grow: the pure twin would lose the record
    with pytest.raises(TypeError):
        c.append_msg(bytearray(), 1, 2, 3, "a", b"", b"")
    with pytest.raises(TypeError):
        c.append_msg(bytearray(), 1.0, 2, 3, b"a", b"", b"")
    with pytest.raises(TypeError):
        c.append_msg(bytearray(), 1, 2, 3, b"a", b"")
    view_held = bytearray(b"x")
    with memoryview(view_held):
        with pytest.raises(BufferError):  # a bytearray with a view on it cannot be resized, as with +=
            c.append_msg(view_held, 1, 2, 3, b"a", b"", b"")
    assert view_held == b"x"


def test_the_store_uses_the_compiled_one_unless_turned_off():
    from skiff.storage.filestore import store

    expected = append_msg_py if PURE_FORCED else compiled().append_msg
    assert block.append_msg is expected and store.append_msg is expected
