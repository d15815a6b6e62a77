"""Subjects a restart finds stay asleep until asked for (storage/seqindex.py), and answer exactly as awake ones.

Every query is run on a reopened file store (subjects asleep) and on the store that wrote the data (all awake);
the answers must be the same, and after each query the reopened store must still agree on everything else.
"""
from __future__ import annotations

import pytest

from skiff.storage import FileStreamStore, StoreConfig


def _fill(d, block_size=4096):
    """Many subjects over several blocks; some subjects come back in later blocks, some messages are removed."""
    fs = FileStreamStore(d, StoreConfig(name="S", block_size=block_size))
    for i in range(600):
        fs.store_msg(f"a.{i % 250}.{'x' if i % 3 else 'y'}", b"", b"p" * (i % 7), ts=1_000 + i)
    for seq in (5, 6, 7, 300, 301, 599):
        fs.remove_msg(seq)
    for i in range(50):
        fs.store_msg(f"b.{i}", b"", b"q", ts=2_000 + i)
    fs.flush()
    return fs


def _answers(fs) -> dict:
    st = fs.state(subjects_filter=">")
    return {
        "state": (st.messages, st.bytes, st.first_seq, st.last_seq, st.num_subjects, st.num_deleted),
        "subjects": st.subjects,
        "subjects_state": {k: (v.msgs, v.first, v.last) for k, v in fs.subjects_state("a.*.y").items()},
        "totals_lit": fs.subjects_totals("a.7.x"),
        "pending": [fs.num_pending(s, f, lps) for s in (1, 200, 640) for f in ("", "a.>", "a.3.y", "b.*", "c")
                    for lps in (False, True)],
        "last_seqs": fs.multi_last_seqs(["a.*.x", "b.3"]),
        "next": [fs.load_next_msg(f, s)[1] for f in ("a.9.y", "a.*.y", "b.>") for s in (1, 300)],
        "last": [(m.seq, m.subject) if m else None for m in
                 (fs.load_last_msg("a.12.x"), fs.load_last_msg("a.*.x"), fs.load_last_msg("zz"))],
        "subject_for_seq": [fs.subject_for_seq(s) for s in (1, 5, 250, 620)],
    }


@pytest.fixture
def pair(tmp_path):
    src = _fill(tmp_path / "s")
    src.stop()
    awake = FileStreamStore(tmp_path / "s", StoreConfig(name="S", block_size=4096))
    awake._wake_all()
    expected = _answers(awake)
    awake.stop()
    reopened = FileStreamStore(tmp_path / "s", StoreConfig(name="S", block_size=4096))
    yield reopened, expected
    reopened.stop()


def test_restart_leaves_subjects_asleep(pair):
    fs, expected = pair
    # Nothing was asked yet: no per-subject object was made (before: one SubjState per subject at every start).
    assert len(fs._fss) == 0
    assert fs._num_subjects() == expected["state"][4] > 300
    assert fs.state().num_subjects == expected["state"][4]
    assert len(fs._fss) == 0


def test_every_query_answers_as_with_awake_subjects(pair):
    fs, expected = pair
    assert _answers(fs) == expected


@pytest.mark.parametrize("query", [
    lambda fs: fs.load_last_msg("a.5.x"),
    lambda fs: fs.subjects_state("a.*.x"),
    lambda fs: fs.num_pending(1, "a.>", True),
    lambda fs: fs.purge("a.11.y"),
    lambda fs: fs.remove_msg(100),
    lambda fs: fs.store_msg("a.20.x", b"", b"new", ts=5_000),
    lambda fs: fs.store_msg("brand.new", b"", b"new", ts=5_000),
    lambda fs: fs.compact(150),
])
def test_one_touch_then_everything_still_agrees(tmp_path, query):
    """Wake some subjects by one operation, do it on an awake twin too, and compare every answer after."""
    a = _fill(tmp_path / "a")
    a.stop()
    awake = FileStreamStore(tmp_path / "a", StoreConfig(name="S", block_size=4096))
    awake._wake_all()
    b = _fill(tmp_path / "b")
    b.stop()
    asleep = FileStreamStore(tmp_path / "b", StoreConfig(name="S", block_size=4096))
    ra, rb = query(awake), query(asleep)
    if hasattr(ra, "seq"):
        ra, rb = (ra.seq, ra.subject, ra.data), (rb.seq, rb.subject, rb.data)
    elif isinstance(ra, dict):
        ra = {k: (v.msgs, v.first, v.last) for k, v in ra.items()}
        rb = {k: (v.msgs, v.first, v.last) for k, v in rb.items()}
    assert ra == rb
    assert _answers(asleep) == _answers(awake)
    # And across one more restart (summaries written for asleep subjects name them right).
    awake.stop()
    asleep.stop()
    again = FileStreamStore(tmp_path / "b", StoreConfig(name="S", block_size=4096))
    twin = FileStreamStore(tmp_path / "a", StoreConfig(name="S", block_size=4096))
    assert _answers(again) == _answers(twin)
    again.stop()
    twin.stop()


def test_max_msgs_per_subject_lowered_after_restart(tmp_path):
    fs = _fill(tmp_path / "s")
    fs.stop()
    fs = FileStreamStore(tmp_path / "s", StoreConfig(name="S", block_size=4096))
    fs.update_config(StoreConfig(name="S", block_size=4096, max_msgs_per_subject=1))
    assert all(n == 1 for n in fs.subjects_totals(">").values())
    assert fs.state().messages == fs.state().num_subjects
    fs.stop()
