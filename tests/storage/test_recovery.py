"""File store recovery: torn tails, corrupt records, lost/stale/corrupt indexes, crashes, disk full.

"Crash" here means the store object is abandoned without ``stop()``: what was flushed is in the files (as
after ``kill -9``), nothing else.  One test does a real ``kill -9`` of a writer process.
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import textwrap
from pathlib import Path

import pytest

from skiff.storage import FileStreamStore, StoreConfig, StoreWriteError
from skiff.storage.filestore.block import HEAD

ROOT = Path(__file__).resolve().parents[2]


def crash(store: FileStreamStore) -> None:
    """Abandon a store like a killed process: close descriptors, write nothing more.  A killed process's threads
    die with it; this one's go on, so the crash comes once the threads unlinking dead blocks are done (a moment a
    kill -9 can hit too).  Left running, one of them unlinked a block the next store had just created under the
    same name (a CI failure of test_random_operations_with_crashes: two stores on one directory at once, which
    no process crash can make)."""
    store._wait_unlinks()
    store._close_fds()
    store._closed = True


def blocks(d) -> list[Path]:
    return sorted(Path(d, "msgs").glob("*.blk"), key=lambda p: int(p.stem))


def record_offsets(path: Path) -> list[tuple[int, int, int, int]]:
    """(offset, rlen, kind, seq) of every record in a clean block file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        _m, kind, _f, rlen, seq, *_ = HEAD.unpack_from(data, pos)
        out.append((pos, rlen, kind, seq))
        pos += rlen
    return out


def fill(s, n, start=0, subjects=("a", "b", "c"), size=40):
    for i in range(start, start + n):
        s.store_msg(subjects[i % len(subjects)], b"", f"msg-{i:05d}".encode().ljust(size, b"."))


def snapshot(s) -> tuple:
    st = s.state(deleted_details=True)
    msgs = []
    m, seq = s.load_next_msg("", 0)
    while m is not None:
        msgs.append((m.seq, m.subject, m.data))
        m, seq = s.load_next_msg("", seq + 1)
    return st, msgs, s.subjects_state()


# ---------------------------------------------------------------------------------------------------- torn tails
@pytest.mark.parametrize("clean_stop", [False, True], ids=["after-crash", "after-clean-stop"])
def test_truncate_at_every_byte_of_the_last_record(tmp_path, clean_stop):
    src = tmp_path / "src"
    s = FileStreamStore(src, StoreConfig(block_size=4096))
    fill(s, 30)
    s.flush()
    expected_prev = None
    s.remove_msg(30)  # to learn the expected state without the last message, on a copy
    s.flush()
    crash(s)
    # Rebuild the reference: same content without message 30 (and without its tombstone).
    ref = FileStreamStore(tmp_path / "ref", StoreConfig(block_size=4096))
    fill(ref, 29)
    expected_prev = snapshot(ref)
    ref.stop()

    # A source with all 30 messages, then cut the last record at every byte.
    shutil.rmtree(src)
    s = FileStreamStore(src, StoreConfig(block_size=4096))
    fill(s, 30)
    s.flush()
    if clean_stop:
        s.stop()
    else:
        crash(s)
    last_block = blocks(src)[-1]
    off, rlen, kind, seq = record_offsets(last_block)[-1]
    assert seq == 30
    for cut in range(off, off + rlen):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(src, work)
        os.truncate(work / "msgs" / last_block.name, cut)
        r = FileStreamStore(work, StoreConfig(block_size=4096))
        st, msgs, subjects = snapshot(r)
        if clean_stop:
            # The clean stop recorded last_seq 30 in the state file: message 30 was stored and is now lost, and
            # its sequence is not handed out again (issue #15 finding 4; nats-server keeps last_seq too).
            assert (st.messages, st.last_seq, st.lost.msgs, st.num_deleted) == (29, 30, [30], 1), cut
        else:
            # After a crash nothing says 30 was ever written (a torn record was never acknowledged).
            assert (st.messages, st.last_seq, st.lost) == (29, 29, None), cut
        assert msgs == expected_prev[1] and subjects == expected_prev[2]
        # The store keeps working from the cut point, and the file is clean again.
        nxt = 31 if clean_stop else 30
        assert r.store_msg("a", b"", b"again") == nxt
        r.stop()
        r = FileStreamStore(work, StoreConfig(block_size=4096))
        assert r.state().messages == 30 and r.load_msg(nxt).data == b"again"
        r.stop()
        shutil.rmtree(work)


def test_truncate_block_header_only_block(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig(block_size=4096))
    fill(s, 5)
    s.flush()
    crash(s)
    blk = blocks(tmp_path / "s")[-1]
    os.truncate(blk, 10)  # even the block header record is torn
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=4096))
    assert r.state().messages == 0
    assert r.store_msg("x", b"", b"") == 1
    r.stop()


# ---------------------------------------------------------------------------------------------------- corruption
def test_flip_a_bit_anywhere_in_a_middle_record(tmp_path):
    src = tmp_path / "src"
    s = FileStreamStore(src, StoreConfig(block_size=1 << 20))
    fill(s, 21)
    s.flush()
    crash(s)
    blk = blocks(src)[0]
    recs = {seq: (off, rlen) for off, rlen, kind, seq in record_offsets(blk) if kind == 1}
    off, rlen = recs[10]
    for pos in range(off, off + rlen, 3):  # every third byte of the record: header, subject, payload, crc
        for bit in (0, 7):
            work = tmp_path / f"flip{pos}-{bit}"
            shutil.copytree(src, work)
            p = work / "msgs" / blk.name
            data = bytearray(p.read_bytes())
            data[pos] ^= 1 << bit
            p.write_bytes(data)
            r = FileStreamStore(work, StoreConfig(block_size=1 << 20))
            st = r.state(deleted_details=True)
            assert st.lost is not None and st.lost.msgs == [10], (pos, bit)
            assert st.lost.bytes > 0
            assert (st.messages, st.first_seq, st.last_seq, st.num_deleted, st.deleted) == (20, 1, 21, 1, [10])
            assert r.load_msg(10) is None
            assert [r.load_msg(q).data[:9] for q in (9, 11, 21)] == [b"msg-00008", b"msg-00010", b"msg-00020"]
            assert r.store_msg("a", b"", b"next") == 22
            r.stop()
            # Still reported after a restart (the loss is remembered in the block summary).
            r = FileStreamStore(work, StoreConfig(block_size=1 << 20))
            assert r.state().lost.msgs == [10] and r.state().messages == 21
            r.stop()
            shutil.rmtree(work)


def test_corrupt_run_of_records_and_tail_of_a_sealed_block(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig(block_size=4096))
    fill(s, 200)
    s.stop()
    first = blocks(tmp_path / "s")[0]
    recs = [r for r in record_offsets(first) if r[2] == 1]
    # Zero out the last three records of the first (sealed) block: a corrupt tail that is not the stream's end.
    data = bytearray(first.read_bytes())
    start = recs[-3][0]
    data[start:] = bytes(len(data) - start)
    first.write_bytes(data)
    lost = [r[3] for r in recs[-3:]]
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=4096))
    st = r.state()
    assert st.lost.msgs == lost
    assert st.messages == 197 and st.last_seq == 200
    for q in lost:
        assert r.load_msg(q) is None
    assert r.load_msg(lost[-1] + 1) is not None
    r.stop()


def test_corruption_found_on_read_is_reported_not_raised(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig())
    fill(s, 10)
    s.flush()
    blk = blocks(tmp_path / "s")[0]
    off, rlen, _, seq = [r for r in record_offsets(blk) if r[3] == 5 and r[2] == 1][0]
    with open(blk, "r+b") as f:  # corrupt under the running store
        f.seek(off + rlen - 10)
        f.write(b"\x00\x01\x02")
    assert s.load_msg(5) is None
    assert s.state().lost.msgs == [5]
    assert s.load_next_msg("", 5)[1] == 6
    s.stop()
    r = FileStreamStore(tmp_path / "s", StoreConfig())
    assert r.state().lost.msgs == [5] and r.state().messages == 9
    r.stop()


def test_corruption_found_by_a_run_read_ends_the_run_and_is_reported(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig())
    fill(s, 10)
    s.flush()
    blk = blocks(tmp_path / "s")[0]
    off, rlen, _, seq = [r for r in record_offsets(blk) if r[3] == 5 and r[2] == 1][0]
    with open(blk, "r+b") as f:  # corrupt under the running store
        f.seek(off + rlen - 10)
        f.write(b"\x00\x01\x02")
    run = s.load_run(2, 100)
    assert [m.seq for m in run] == [2, 3, 4]
    assert s.state().lost.msgs == [5]
    assert [m.seq for m in s.load_run(6, 100)] == [6, 7, 8, 9, 10]
    assert s.load_run(5, 100) == []
    s.stop()


def test_crc_residue_checks_a_record_and_its_stored_crc():
    """A run read checks each record with one crc32 over the whole record, its stored CRC included (block.py
    CRC_RESIDUE): right for every record, wrong after any change of one byte anywhere, the stored CRC's too."""
    import zlib

    from skiff.storage.filestore.block import CRC_RESIDUE, append_msg

    for hdr, data in ((b"", b""), (b"", b"x" * 128), (b"NATS/1.0\r\nA: b\r\n\r\n", bytes(range(256)))):
        rec = bytearray()
        append_msg(rec, 7, 1_700_000_000 * 10**9, 0, b"a.b", hdr, data)
        assert zlib.crc32(rec) == CRC_RESIDUE
        for i in range(len(rec)):
            bad = bytearray(rec)
            bad[i] ^= 0x5A
            assert zlib.crc32(bad) != CRC_RESIDUE, i


def test_a_run_read_checks_the_stored_crc_itself(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig())
    fill(s, 10)
    s.flush()
    blk = blocks(tmp_path / "s")[0]
    off, rlen, _, seq = [r for r in record_offsets(blk) if r[3] == 4 and r[2] == 1][0]
    with open(blk, "r+b") as f:  # the last byte of the record: its stored CRC
        f.seek(off + rlen - 1)
        last = f.read(1)
        f.seek(off + rlen - 1)
        f.write(bytes([last[0] ^ 1]))
    assert [m.seq for m in s.load_run(1, 100)] == [1, 2, 3]
    assert s.state().lost.msgs == [4]
    s.stop()


# ---------------------------------------------------------------------------------------------------- index
def _with_summaries(tmp_path, n=3000):
    s = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192, max_msgs_per_subject=50))
    fill(s, n, subjects=[f"k.{i}" for i in range(90)])
    for q in range(100, 2000, 7):
        s.remove_msg(q)
    s.skip_msgs(s.last_seq + 1, 3)
    s.store_msg("k.0", b"", b"tail")
    ref = snapshot(s)
    s.stop()
    assert list(Path(tmp_path, "s", "msgs").glob("*.idx"))
    return ref


def test_missing_index_is_rebuilt(tmp_path):
    ref = _with_summaries(tmp_path)
    for p in Path(tmp_path, "s", "msgs").glob("*.idx"):
        p.unlink()
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192, max_msgs_per_subject=50))
    assert r.scanned_blocks == len(blocks(tmp_path / "s"))
    assert snapshot(r) == ref
    r.stop()
    assert list(Path(tmp_path, "s", "msgs").glob("*.idx"))  # written again
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192, max_msgs_per_subject=50))
    assert r.scanned_blocks == 0  # and used: nothing is read record by record any more
    assert snapshot(r) == ref
    r.stop()


def test_restart_after_crash_scans_only_the_newest_block(tmp_path):
    cfg = StoreConfig(block_size=8192)
    s = FileStreamStore(tmp_path / "s", cfg)
    fill(s, 2000)
    s.flush()
    crash(s)
    r = FileStreamStore(tmp_path / "s", cfg)
    assert len(blocks(tmp_path / "s")) > 5 and r.scanned_blocks == 1
    assert r.state().messages == 2000
    r.stop()
    r = FileStreamStore(tmp_path / "s", cfg)
    assert r.scanned_blocks == 0
    r.stop()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bitflip", "empty", "other-block"])
def test_corrupt_index_is_rebuilt(tmp_path, damage):
    ref = _with_summaries(tmp_path)
    idx = sorted(Path(tmp_path, "s", "msgs").glob("*.idx"), key=lambda p: int(p.stem))
    for p in idx:
        raw = bytearray(p.read_bytes())
        if damage == "garbage":
            raw = bytearray(os.urandom(len(raw)))
        elif damage == "truncated":
            raw = raw[: len(raw) // 2]
        elif damage == "bitflip":
            raw[len(raw) // 2] ^= 0x10
        elif damage == "empty":
            raw = bytearray()
        elif damage == "other-block":
            raw = bytearray(idx[0].read_bytes()) if p != idx[0] else bytearray(idx[1].read_bytes())
        p.write_bytes(raw)
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192, max_msgs_per_subject=50))
    assert snapshot(r) == ref
    r.stop()


def test_stale_index_after_crash(tmp_path):
    cfg = StoreConfig(block_size=8192)
    s = FileStreamStore(tmp_path / "s", cfg)
    fill(s, 500)
    s.stop()  # summaries for every block
    s = FileStreamStore(tmp_path / "s", cfg)
    fill(s, 300, start=500)
    for q in (3, 4, 250, 600):
        s.remove_msg(q)
    s.erase_msg(5)
    s.compact(2)
    s.flush()
    ref = snapshot(s)
    crash(s)
    r = FileStreamStore(tmp_path / "s", cfg)
    assert snapshot(r) == ref
    r.stop()


def test_leftover_files_are_ignored(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig())
    fill(s, 10)
    s.stop()
    m = Path(tmp_path, "s", "msgs")
    (m / "99.idx").write_bytes(b"orphan")
    (m / "7.blk.tmp").write_bytes(b"tmp")
    (m / "50.blk").write_bytes(b"")
    (m / "notes.txt").write_text("hello")
    r = FileStreamStore(tmp_path / "s", StoreConfig())
    assert r.state().messages == 10
    assert not (m / "99.idx").exists() and not (m / "50.blk").exists() and not (m / "7.blk.tmp").exists()
    assert r.store_msg("z", b"", b"") == 11
    r.stop()


# ---------------------------------------------------------------------------------------------------- crashes
def test_crash_after_flush_keeps_everything_flushed(tmp_path):
    cfg = StoreConfig(block_size=4096)
    s = FileStreamStore(tmp_path / "s", cfg)
    fill(s, 100)
    s.flush()
    fill(s, 5, start=100)  # stored but never flushed: gone after the crash (never acked)
    crash(s)
    r = FileStreamStore(tmp_path / "s", cfg)
    assert (r.state().messages, r.state().last_seq) == (100, 100)
    r.stop()


def test_purge_and_compact_survive_crash(tmp_path):
    cfg = StoreConfig(block_size=4096)
    s = FileStreamStore(tmp_path / "s", cfg)
    fill(s, 300)
    s.purge()
    fill(s, 10, start=300)
    s.compact(305)
    s.flush()
    crash(s)
    r = FileStreamStore(tmp_path / "s", cfg)
    st = r.state()
    assert (st.messages, st.first_seq, st.last_seq) == (6, 305, 310)
    assert len(blocks(tmp_path / "s")) == 1
    r.stop()


def test_deleting_an_interior_block_does_not_resurrect(tmp_path):
    """An emptied block is deleted; tombstones it held for older blocks are carried forward first."""
    cfg = StoreConfig(block_size=4096)
    s = FileStreamStore(tmp_path / "s", cfg)
    fill(s, 60)  # ~51 records per block: blocks 1 and 2
    s.flush()
    first_blocks = blocks(tmp_path / "s")
    assert len(first_blocks) >= 2
    b2_first = s._chunks[1].first
    s.remove_msg(1)  # tombstone lands in the newest block (block 2 or later)
    tomb_block = s._chunks[-1]
    fill(s, 120, start=60)
    s.flush()
    assert s._chunks[-1] is not tomb_block
    for q in range(tomb_block.first, tomb_block.end):
        s.remove_msg(q)
    s.flush()
    assert not Path(tomb_block.path).exists()
    crash(s)
    r = FileStreamStore(tmp_path / "s", cfg)
    assert r.load_msg(1) is None
    assert r.load_msg(2) is not None
    assert r.state().first_seq == 2
    assert all(r.load_msg(q) is None for q in range(tomb_block.first, tomb_block.end))
    assert b2_first > 1
    r.stop()


def test_erase_overwrites_the_bytes(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig())
    s.store_msg("a", b"", b"SECRET-ONE")
    s.flush()
    s.store_msg("a", b"", b"SECRET-TWO")
    s.store_msg("a", b"", b"public")
    s.erase_msg(1)  # flushed: overwritten on disk at the next flush
    s.erase_msg(2)  # still buffered: overwritten before it is written
    s.flush()
    raw = b"".join(p.read_bytes() for p in blocks(tmp_path / "s"))
    assert b"SECRET" not in raw and b"public" in raw
    crash(s)
    r = FileStreamStore(tmp_path / "s", StoreConfig())
    assert r.state().messages == 1 and r.state().lost is None
    r.stop()


def test_kill_9_loses_nothing_that_was_flushed(tmp_path):
    d = tmp_path / "s"
    code = textwrap.dedent(f"""
        import sys
        from skiff.storage import FileStreamStore, StoreConfig
        s = FileStreamStore({str(d)!r}, StoreConfig(block_size=16384))
        i = 0
        while True:
            for _ in range(50):
                i += 1
                s.store_msg("k.%d" % (i % 7), b"", b"x" * 100)
            s.flush()
            print(s.last_seq, flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=ROOT, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    acked = 0
    for line in p.stdout:
        acked = int(line)
        if acked >= 5000:
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    r = FileStreamStore(d, StoreConfig(block_size=16384))
    st = r.state()
    assert st.messages >= acked and st.lost is None and st.first_seq == 1
    assert st.messages == st.last_seq
    assert r.load_msg(acked).data == b"x" * 100
    r.stop()


# ---------------------------------------------------------------------------------------------------- disk full
class FaultyWrite:
    """pwrite that fails with ENOSPC once armed, optionally after writing part of the buffer."""

    def __init__(self) -> None:
        self.armed = False
        self.partial = 0
        self.calls = 0

    def __call__(self, fd, data, off):
        self.calls += 1
        if self.armed:
            if self.partial:
                n = os.pwrite(fd, bytes(data[: self.partial]), off)
                self.partial = 0
                return n
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.pwrite(fd, data, off)


@pytest.mark.parametrize("partial", [0, 37], ids=["nothing-written", "part-written"])
def test_disk_full_rolls_back_and_loses_nothing(tmp_path, partial):
    w = FaultyWrite()
    cfg = StoreConfig(block_size=4096)
    s = FileStreamStore(tmp_path / "s", cfg, write=w)
    fill(s, 50)
    s.flush()
    before = snapshot(s)
    w.armed, w.partial = True, partial
    fill(s, 40, start=50)  # crosses into new blocks
    s.remove_msg(3)
    with pytest.raises(StoreWriteError) as ei:
        s.flush()
    err = ei.value
    assert err.errno == errno.ENOSPC
    assert err.seqs == list(range(51, 91))
    assert err.undone_removals == [3]
    assert snapshot(s) == before
    # Disk has room again: the store carries on where it was.
    w.armed = False
    assert s.store_msg("a", b"", b"after") == 51
    s.flush()
    s.stop()
    r = FileStreamStore(tmp_path / "s", cfg)
    st = r.state()
    assert (st.messages, st.last_seq, st.lost) == (51, 51, None)
    assert r.load_msg(51).data == b"after" and r.load_msg(3) is not None
    r.stop()


def test_disk_full_during_purge_keeps_the_data(tmp_path):
    w = FaultyWrite()
    s = FileStreamStore(tmp_path / "s", StoreConfig(block_size=4096), write=w)
    fill(s, 100)
    s.flush()
    s.purge()
    w.armed = True
    with pytest.raises(StoreWriteError):
        s.flush()
    assert s.state().messages == 100  # the purge did not happen
    w.armed = False
    s.stop()
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=4096))
    assert r.state().messages == 100
    r.stop()


def test_sync_from_a_thread_while_appending(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192))
    stop = threading.Event()
    errors = []

    def syncer():
        while not stop.is_set():
            try:
                s.sync()
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

    t = threading.Thread(target=syncer)
    t.start()
    try:
        for i in range(40):
            fill(s, 100, start=i * 100)
            s.flush()
            if i % 10 == 0:
                s.remove_msg(i * 100 + 1)
    finally:
        stop.set()
        t.join()
    assert not errors
    assert not s.needs_sync or s.sync() is None
    s.stop()
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192))
    assert r.state().messages == 3996
    r.stop()


def test_group_commit_one_fsync_for_everything_flushed(tmp_path):
    """sync_always: publishes flushed while no sync ran share the next fsync (one per block file)."""
    synced = []

    def fsync(fd):
        synced.append(fd)
        os.fsync(fd)

    s = FileStreamStore(tmp_path / "s", StoreConfig(sync_always=True), fsync=fsync)
    s.sync()
    synced.clear()
    for batch in range(10):  # ten loop iterations' worth of publishes
        fill(s, 20, start=batch * 20)
        s.flush()
    assert s.needs_sync
    s.sync()
    assert len(synced) == 1  # one block file, one fsync for all 200 messages
    assert not s.needs_sync
    s.sync()
    assert len(synced) == 1  # nothing new: no fsync at all
    s.stop()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_with_crashes(tmp_path, seed):
    """Random stores/removals/purges/compacts/skips/erases with crashes and clean restarts at random points:
    after every restart the store equals what it was at its last flush (state, messages, subjects)."""
    import random

    rnd = random.Random(seed)
    cfg = StoreConfig(block_size=4096, max_msgs_per_subject=8)
    d = tmp_path / "s"
    s = FileStreamStore(d, cfg)
    subjects = [f"r.{i}" for i in range(12)]
    flushed = snapshot(s)
    for step in range(600):
        op = rnd.random()
        if op < 0.55:
            for _ in range(rnd.randint(1, 6)):
                s.store_msg(rnd.choice(subjects), HDR_OR_NOT[rnd.randint(0, 1)], os.urandom(rnd.randint(0, 60)))
        elif op < 0.70 and s.msgs:
            for _ in range(rnd.randint(1, 4)):
                if not s.msgs:
                    break
                q = rnd.randint(s.first_seq, s.last_seq)
                (s.erase_msg if rnd.random() < 0.2 else s.remove_msg)(q)
        elif op < 0.74:
            s.purge(rnd.choice(subjects), keep=rnd.randint(0, 3))
        elif op < 0.76 and s.last_seq:
            s.compact(rnd.randint(s.first_seq, s.last_seq + 2))
        elif op < 0.77:
            s.purge()
        elif op < 0.79:
            s.skip_msgs(s.last_seq + 1, rnd.choice([1, 5, 2000]))
        if rnd.random() < 0.5:
            s.flush()
            flushed = snapshot(s)
        r = rnd.random()
        if r < 0.04:
            crash(s)
            s = FileStreamStore(d, cfg)
            assert snapshot(s) == flushed, step
        elif r < 0.06:
            s.stop()
            s = FileStreamStore(d, cfg)
            flushed = snapshot(s)
    s.flush()
    flushed = snapshot(s)
    crash(s)
    s = FileStreamStore(d, cfg)
    assert snapshot(s) == flushed
    assert s.state().lost is None
    s.stop()


HDR_OR_NOT = [b"", b"NATS/1.0\r\nK: v\r\n\r\n"]


@pytest.mark.parametrize("seed", [11, 12])
def test_random_write_failures_roll_back_to_the_last_flush(tmp_path, seed):
    import random

    rnd = random.Random(seed)
    w = FaultyWrite()
    cfg = StoreConfig(block_size=4096, max_msgs=400)
    d = tmp_path / "s"
    s = FileStreamStore(d, cfg, write=w)
    flushed = snapshot(s)
    failures = 0
    for step in range(200):
        for _ in range(rnd.randint(1, 8)):
            s.store_msg(f"w.{rnd.randint(0, 5)}", b"", os.urandom(rnd.randint(0, 80)))
        if s.msgs and rnd.random() < 0.3:
            s.remove_msg(rnd.randint(s.first_seq, s.last_seq))
        if rnd.random() < 0.05:
            s.purge(f"w.{rnd.randint(0, 5)}")
        w.armed = rnd.random() < 0.2
        w.partial = rnd.choice([0, 0, 5, 100])
        try:
            s.flush()
            flushed = snapshot(s)
        except StoreWriteError:
            failures += 1
            assert snapshot(s) == flushed, step
        w.armed = False
        if rnd.random() < 0.03:
            crash(s)
            s = FileStreamStore(d, cfg, write=w)
            assert snapshot(s) == flushed, step
    assert failures > 5
    s.stop()
    s = FileStreamStore(d, cfg)
    assert snapshot(s) == flushed and s.state().lost is None
    s.stop()


def test_unreadable_block_is_skipped_not_fatal(tmp_path):
    s = FileStreamStore(tmp_path / "s", StoreConfig())
    fill(s, 10)
    s.stop()
    (tmp_path / "s" / "msgs" / "7.blk").mkdir()  # something no scan can read
    r = FileStreamStore(tmp_path / "s", StoreConfig())
    assert r.state().messages == 10
    r.store_msg("a", b"", b"more")  # new blocks do not collide with the unreadable one
    r.stop()
    r = FileStreamStore(tmp_path / "s", StoreConfig())
    assert r.state().messages == 11
    r.stop()


def test_compaction_gives_back_space_and_keeps_everything(tmp_path):
    """KV-like use: a few keys written once (pinning old blocks), others overwritten many times."""
    cfg = StoreConfig(block_size=8192, max_msgs_per_subject=1)
    d = tmp_path / "s"
    s = FileStreamStore(d, cfg)
    for k in range(5):
        s.store_msg(f"kv.pinned.{k}", b"", b"P" * 50)
    s.remove_msg(2)  # a tombstone for an older block, held by the current one
    for i in range(3000):
        s.store_msg(f"kv.hot.{i % 4}", b"", b"v%05d" % i + b"." * 60)
        if i % 50 == 0:
            s.flush()
    for _ in range(20):  # one block per flush
        s.flush()
    ref = snapshot(s)
    size = sum(p.stat().st_size for p in blocks(d))
    assert size < 4 * 8192, size  # ~300 KB were written; only a handful of records are live
    assert s.load_msg(1).subject == "kv.pinned.0" and s.load_msg(2) is None
    crash(s)
    r = FileStreamStore(d, cfg)
    assert snapshot(r) == ref and r.load_msg(2) is None
    r.stop()
    r = FileStreamStore(d, cfg)
    assert snapshot(r) == ref and r.scanned_blocks == 0
    r.stop()


def test_version_1_summaries_are_still_used(tmp_path):
    """Summaries written before v2 (subjects as a list, stats as [[n, first, last], ...]) load without a scan."""
    from array import array

    from skiff.storage import meta

    ref = _with_summaries(tmp_path)
    for p in Path(tmp_path, "s", "msgs").glob("*.idx"):
        doc = meta.decode(p.read_bytes())
        stats = array("Q", doc["stats"])
        doc["v"] = 1
        doc["subjects"] = doc["subjects"].split("\n") if doc["subjects"] else []
        doc["stats"] = [list(stats[i:i + 3]) for i in range(0, len(stats), 3)]
        p.write_bytes(meta.encode(doc))
    r = FileStreamStore(tmp_path / "s", StoreConfig(block_size=8192, max_msgs_per_subject=50))
    assert r.scanned_blocks == 0
    assert snapshot(r) == ref
    r.stop()
