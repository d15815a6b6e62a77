"""block.py ``read_run``: the compiled twin (protocol/_speedups.c) against the pure one (``read_run_py``), and both
against ``parse_msg``, the reference reader of one record.

A consumer's read of stored messages (FileStreamStore._read_run) takes every whole MSG record of a run of slots
from one buffer through ``read_run`` and reads the slots it stops at the slow way, so the two implementations must
take exactly the same records, hand out the same tuples and stop at the same slot with the same end offset, for
any buffer: records with and without headers, subjects that change or repeat, a buffer that starts inside the
block or ends inside a record, the unflushed tail, a removed slot, a record of another sequence, and any one byte
of a record changed.  Hypothesis draws the blocks and the damage.
"""
from __future__ import annotations

import zlib
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiff.protocol.accel import PURE_FORCED
from skiff.storage.filestore import block
from skiff.storage.filestore.block import KIND_BLOCK, append_msg, encode_control, parse_msg, read_run_py
from skiff.storage.records import StoredMsg
from tests.protocol.test_speedups import compiled


def _build(msgs: list[tuple[int, bytes, bytes]], first: int = 5) -> tuple[bytes, array, bytes, dict[int, str]]:
    """A block image (BLOCK header, then one MSG record per message), its slots' offsets and codes."""
    buf = bytearray(encode_control(KIND_BLOCK, first, 1))
    offsets = array("I")
    codes = array("I")
    names: dict[int, str] = {}
    for k, (code, hdr, data) in enumerate(msgs):
        names[code] = f"subj.{code}"
        offsets.append(len(buf))
        codes.append(code)
        append_msg(buf, first + k, 1_700_000_000_000_000_000 + k, 0, names[code].encode(), hdr, data)
    return bytes(buf), offsets, codes.tobytes(), names


def _both(buf: bytes, base: int, flushed: int, offsets: array, codes: bytes, i: int, j: int, seq: int,
          names: dict[int, str]):
    c = compiled()
    asked: list[list[int]] = [[], []]
    results = []
    for impl, log in ((read_run_py, asked[0]), (c.read_run, asked[1])):
        def subject_of(icode: int, log=log) -> str:
            log.append(icode)
            return names[icode]
        out: list = []
        ret = impl(out, buf, base, flushed, offsets, codes, i, j, seq, subject_of, StoredMsg)
        results.append((out, ret))
    assert results[0][1] == results[1][1]
    assert results[0][0] == results[1][0]
    assert all(type(m) is StoredMsg for m in results[1][0])
    assert asked[0] == asked[1]  # the subject is asked for once per change of code, by both
    return results[0]


def _check_against_parse_msg(out: list, buf: bytes, base: int, offsets: array, i: int, seq: int,
                             names: dict[int, str], codes: bytes) -> None:
    code_of = array("I", codes)
    for k, m in enumerate(out):
        r = parse_msg(buf, offsets[i + k] - base)
        assert r is not None and r[0] == seq + k
        assert m == StoredMsg(names[code_of[i + k]], seq + k, r[1], r[4], r[5])


messages = st.lists(st.tuples(st.integers(1, 4), st.sampled_from([b"", b"NATS/1.0\r\nA: b\r\n\r\n"]),
                              st.binary(max_size=300)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=messages, data=st.data())
def test_compiled_and_pure_agree_on_random_blocks(msgs, data):
    first = 5
    buf, offsets, codes, names = _build(msgs, first)
    n = len(msgs)
    i = data.draw(st.integers(0, n - 1), label="i")
    j = data.draw(st.integers(i, n), label="j")
    # The buffer: from the slot's record (or the block start), cut anywhere after it; flushed anywhere.
    base = data.draw(st.sampled_from([0, offsets[i]]), label="base")
    cut = data.draw(st.integers(base, len(buf)), label="cut")
    flushed = data.draw(st.sampled_from([len(buf), cut, offsets[min(j, n - 1)], offsets[i]]), label="flushed")
    view = bytearray(buf[base:cut])
    damage = data.draw(st.sampled_from(["none", "byte", "seq"]), label="damage")
    if damage == "byte" and view:
        at = data.draw(st.integers(0, len(view) - 1), label="at")
        view[at] ^= data.draw(st.integers(1, 255), label="xor")
    seq = first + i + (1 if damage == "seq" else 0)
    out, (stop, seq_after, end) = _both(bytes(view), base, flushed, offsets, codes, i, j, seq, names)
    assert stop == i + len(out) and seq_after == seq + len(out)
    assert end == (-1 if not out else offsets[stop - 1] + len(_record(buf, offsets, stop - 1)))
    _check_against_parse_msg(out, bytes(view), base, offsets, i, seq, names, codes)
    if damage == "none" and cut == len(buf) and flushed == len(buf):
        assert stop == j  # nothing in the way: the whole run


def _record(buf: bytes, offsets: array, k: int) -> bytes:
    end = offsets[k + 1] if k + 1 < len(offsets) else len(buf)
    return buf[offsets[k]:end]


def test_every_one_byte_change_of_a_record_stops_the_run_there():
    msgs = [(1, b"", b"x" * 20), (2, b"NATS/1.0\r\nA: b\r\n\r\n", b"payload"), (1, b"", b"")]
    buf, offsets, codes, names = _build(msgs)
    for at in range(offsets[1], offsets[2]):
        bad = bytearray(buf)
        bad[at] ^= 0x40
        out, (stop, _seq, _end) = _both(bytes(bad), 0, len(bad), offsets, codes, 0, 3, 5, names)
        assert stop == 1 and [m.seq for m in out] == [5], at


def test_the_checksum_is_zlibs():
    c = compiled()
    msgs = [(1, b"", bytes(range(256)) * 3)]
    buf, offsets, codes, names = _build(msgs)
    rec = _record(buf, offsets, 0)
    assert zlib.crc32(rec) == block.CRC_RESIDUE
    out: list = []
    assert c.read_run(out, buf, 0, len(buf), offsets, codes, 0, 1, 5, names.get, StoredMsg)[0] == 1


def test_a_removed_slot_or_the_unflushed_tail_stops_it():
    msgs = [(1, b"", b"a"), (1, b"", b"b"), (1, b"", b"c")]
    buf, offsets, codes, names = _build(msgs)
    removed = array("I", offsets)
    removed[1] = 0  # a removed slot's offset (the index's filler): the BLOCK record is there
    out, (stop, _seq, _end) = _both(buf, 0, len(buf), removed, codes, 0, 3, 5, names)
    assert stop == 1
    out, (stop, _seq, end) = _both(buf, 0, offsets[2], offsets, codes, 0, 3, 5, names)
    assert stop == 2 and end == offsets[2]


def test_wrong_argument_types_raise():
    c = compiled()
    buf, offsets, codes, names = _build([(1, b"", b"a")])
    with pytest.raises(TypeError):
        c.read_run([], bytearray(buf), 0, len(buf), offsets, codes, 0, 1, 5, names.get, StoredMsg)
    with pytest.raises(TypeError):
        c.read_run([], buf, 0, len(buf), list(offsets), codes, 0, 1, 5, names.get, StoredMsg)
    with pytest.raises(TypeError):
        c.read_run([], buf, 0, len(buf), offsets, codes, 0, 1, 5, names.get, dict)
    with pytest.raises(KeyError):  # subject_of's error comes through, nothing half-appended
        out: list = []
        c.read_run(out, buf, 0, len(buf), offsets, codes, 0, 1, 5, {}.__getitem__, StoredMsg)
    assert out == []


def test_the_store_uses_the_compiled_one_unless_turned_off():
    expected = read_run_py if PURE_FORCED else compiled().read_run
    assert block.read_run is expected
