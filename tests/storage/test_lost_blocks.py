"""Blocks that are gone, empty or cut short (issue #15 findings 4 and 5): the last sequence never goes back, and every
lost sequence is reported in ``state().lost`` and in a log line naming the block and the sequences.

"Crash" means the store object is abandoned without ``stop()`` (as after ``kill -9``); the damage an OS crash or a
power loss leaves (a zero-length or missing block) is then made by hand.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from skiff.log import capture_logs

from skiff.storage import FileStreamStore, StoreConfig
from skiff.storage.filestore.state import STATE_FILE
from tests.storage.test_recovery import crash

CFG = StoreConfig(block_size=8192)


def blocks(d) -> list[Path]:
    return sorted(Path(d, "msgs").glob("*.blk"), key=lambda p: int(p.stem))


def fill(s, n, size=100):
    for i in range(n):
        s.store_msg(f"s.{i % 7}", b"", f"m{i}".encode().ljust(size, b"."))


def block_range(d, path: Path) -> tuple[int, int]:
    """(first, last) message sequence in a block, read with a throwaway store."""
    s = FileStreamStore(d, CFG)
    b = next(b for b in s._chunks if b.path == str(path))
    seqs = [b.first + i for i in range(b.nslots()) if b.live(i)]
    crash(s)
    return seqs[0], seqs[-1]


def lost_lines(logs) -> list[dict]:
    return [e for e in logs if e["log_level"] == "error" and "messages lost" in e["event"]]


def reopen(d):
    with capture_logs() as logs:
        r = FileStreamStore(d, CFG)
    return r, logs


@pytest.mark.parametrize("how", ["clean-stop", "sync-then-crash"])
def test_empty_newest_block_keeps_last_seq(tmp_path, how):
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.flush()
    if how == "clean-stop":
        s.stop()
    else:
        s.sync()  # the periodic fsync also records the stream state
        crash(s)
    newest = blocks(d)[-1]
    first, last = block_range(d, newest)
    assert last == 300
    os.truncate(newest, 0)  # what an OS crash can leave: the file exists, its data never reached the disk
    r, logs = reopen(d)
    st = r.state()
    assert st.last_seq == 300  # before: 8,058-style regression to the previous block's last sequence
    assert st.messages == first - 1 and st.num_deleted == 300 - (first - 1)
    assert st.lost.msgs == list(range(first, 301))
    (line,) = lost_lines(logs)
    assert line["block"] == str(newest) and (line["first_seq"], line["last_seq"]) == (first, 300)
    # New messages never get a sequence another message had.
    assert r.store_msg("s.new", b"", b"after") == 301
    r.stop()
    r, _ = reopen(d)
    assert r.state().last_seq == 301 and r.load_msg(301).data == b"after"
    assert r.state().lost.msgs == list(range(first, 301))  # still reported after another restart
    r.stop()


@pytest.mark.parametrize("damage", ["empty", "missing"])
@pytest.mark.parametrize("state_file", [True, False], ids=["with-state", "without-state"])
def test_middle_block_gone_is_reported(tmp_path, damage, state_file):
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.stop()
    mid = blocks(d)[1]
    first, last = block_range(d, mid)
    if not state_file:
        os.unlink(d / "msgs" / STATE_FILE)
    if damage == "empty":
        os.truncate(mid, 0)
    else:
        os.unlink(mid)
    r, logs = reopen(d)
    st = r.state()
    assert st.last_seq == 300 and st.messages == 300 - (last - first + 1)
    if damage == "missing" and not state_file:
        # Nothing on disk says the block ever existed (the store deletes blocks that empty): counted as deleted,
        # as nats-server does, but it cannot be named lost.
        assert st.lost is None and st.num_deleted == last - first + 1
        r.stop()
        return
    assert st.lost.msgs == list(range(first, last + 1))
    (line,) = lost_lines(logs)
    assert line["block"] == str(mid) and (line["first_seq"], line["last_seq"]) == (first, last)
    assert ("EMPTY" if damage == "empty" else "MISSING") in line["event"]
    r.stop()


def test_blocks_the_store_deleted_are_not_lost(tmp_path):
    """A block removed because all its messages were removed is not reported lost, even after a crash right after."""
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.flush()
    mid = blocks(d)[1]
    first, last = block_range(d, mid)
    for seq in range(first, last + 1):
        s.remove_msg(seq)
    s.flush()
    assert not mid.exists()
    crash(s)
    r, logs = reopen(d)
    assert r.state().lost is None and not lost_lines(logs)
    assert r.state().num_deleted == last - first + 1
    r.stop()


def test_purge_then_crash_reports_nothing(tmp_path):
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.stop()
    s = FileStreamStore(d, CFG)
    s.purge()
    s.flush()
    crash(s)
    r, logs = reopen(d)
    st = r.state()
    assert (st.messages, st.first_seq, st.last_seq, st.lost) == (0, 301, 300, None) and not lost_lines(logs)
    r.stop()


def test_empty_newest_block_created_just_before_a_crash_loses_nothing(tmp_path):
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.stop()
    n = int(blocks(d)[-1].stem) + 1
    (d / "msgs" / f"{n}.blk").write_bytes(b"")  # opened, header not written yet, then kill -9
    r, logs = reopen(d)
    assert r.state().last_seq == 300 and r.state().lost is None and not lost_lines(logs)
    assert any("empty newest block" in e["event"] for e in logs)
    r.stop()


def _flip_in_record(path: Path, seq: int) -> None:
    from skiff.storage.filestore.block import HEAD, KIND_MSG

    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        h = HEAD.unpack_from(data, pos)
        if h[1] == KIND_MSG and h[4] == seq:
            with open(path, "r+b") as f:
                f.seek(pos + h[3] // 2)
                b = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([b[0] ^ 0x10]))
            return
        pos += h[3]
    raise AssertionError(f"no record {seq}")


def test_bit_flip_under_an_intact_summary_is_found_and_reported(tmp_path):
    """Issue #15 finding 5: the summary still matches the block's tail, so start-up trusts it; the whole-block
    checksum (checked off the loop by the server) finds the damage and the lost record is reported."""
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.stop()
    mid = blocks(d)[1]
    first, last = block_range(d, mid)
    victim = (first + last) // 2
    _flip_in_record(mid, victim)
    r, logs = reopen(d)
    assert r.scanned_blocks == 0  # start-up did not read the blocks
    assert [b.path for b, _, _ in r.verify_blocks()] == [str(mid)]
    with capture_logs() as logs:
        assert r.check_blocks(r.verify_blocks()) == [victim]
    st = r.state()
    assert (st.messages, st.last_seq, st.lost.msgs, st.num_deleted) == (299, 300, [victim], 1)
    assert st.lost.bytes > 0
    assert any(e["event"].startswith("BLOCK CHECKSUM MISMATCH") and e["block"] == str(mid) for e in logs)
    assert any("CORRUPT RECORD" in e["event"] and e["seq"] == victim for e in logs)
    r.stop()
    r, _ = reopen(d)
    assert r.state().lost.msgs == [victim] and r.state().messages == 299  # stays reported
    r.stop()


def test_verify_finds_nothing_on_a_healthy_store(tmp_path):
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.erase_msg(5)  # an in-place rewrite: the block's checksum becomes unknown, never a false alarm
    s.stop()
    r, _ = reopen(d)
    assert len(r._to_verify) >= 2
    assert r.verify_blocks() == []
    fill(r, 50)
    r.flush()
    assert r.check_blocks(r.verify_blocks()) == []
    r.stop()


def test_purge_unlinks_in_a_thread_and_a_crash_before_it_loses_nothing(tmp_path, monkeypatch):
    """A purge of many blocks leaves their unlinks to a thread (storage/remove.py: ~30-60 ms of unlink for 1M
    messages must not stall the event loop).  A crash before that thread ran leaves every dead block on disk: the
    store comes back empty, with nothing reported lost; a clean stop waits for the unlinks."""
    import threading

    import skiff.storage.filestore.store as store_mod

    handed: list[list[str]] = []

    def hand_off(paths, done=None):  # the thread that would unlink them never runs
        handed.append(list(paths))
        t = threading.Thread(target=lambda: None)
        t.start()
        return t

    monkeypatch.setattr(store_mod, "unlink_in_background", hand_off)
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.stop()
    old = blocks(d)
    assert len(old) > store_mod.INLINE_UNLINKS // 2
    s = FileStreamStore(d, CFG)
    s.purge()
    s.flush()
    assert sorted(handed[0]) == sorted(str(p) for b in old for p in (b, b.with_suffix(".idx")))
    assert all(b.exists() for b in old)  # nothing unlinked on the calling thread
    crash(s)
    r, logs = reopen(d)
    st = r.state()
    assert (st.messages, st.first_seq, st.last_seq, st.lost) == (0, 301, 300, None) and not lost_lines(logs)
    r.stop()


def test_stop_waits_for_the_unlinks_of_a_purge(tmp_path):
    d = tmp_path / "s"
    s = FileStreamStore(d, CFG)
    fill(s, 300)
    s.flush()
    old = blocks(d)
    s.purge()
    s.flush()
    s.stop()
    assert not any(b.exists() or b.with_suffix(".idx").exists() for b in old)
