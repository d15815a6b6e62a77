"""The StreamStore contract: every test runs against the memory store and the file store.

Expected values follow nats-server's memstore/filestore (store.go, memstore.go) behaviour; where the file
store keeps state across a restart, the test restarts it and checks again.
"""
from __future__ import annotations

import pytest

from skiff.storage import (
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MemoryStreamStore,
    MsgTooLargeError,
    SequenceMismatchError,
    SimpleState,
    StoreConfig,
    TooManyResultsError,
)
from tests.storage.conftest import reopen

SEC = 10**9
HDR = b"NATS/1.0\r\nFoo: bar\r\n\r\n"


def size_of(store, subj: str, hdr: bytes, data: bytes) -> int:
    if isinstance(store, MemoryStreamStore):
        return len(subj) + len(hdr) + len(data) + 16
    return 22 + len(subj) + len(data) + 8 + (4 + len(hdr) if hdr else 0)


def fill(store, n: int, subjects=("foo",), data=b"hello", hdr=b"") -> list[int]:
    return [store.store_msg(subjects[i % len(subjects)], hdr, data) for i in range(n)]


# ---------------------------------------------------------------------------------------------------- basics
def test_empty_state(make_store):
    s = make_store()
    st = s.state()
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.first_ts, st.last_ts) == (0, 0, 0, 0, 0, 0)
    assert st.num_deleted == 0 and st.lost is None
    assert s.load_msg(1) is None
    assert s.load_next_msg("", 0) == (None, 0)
    assert s.load_last_msg("") is None
    assert s.num_pending(0) == 0


def test_store_and_load(make_store, clock):
    s = make_store()
    t0 = clock()
    assert s.store_msg("foo", b"", b"one") == 1
    clock.advance(SEC)
    assert s.store_msg("bar", HDR, b"two") == 2
    assert s.store_msg("baz", b"", b"three", ts=t0 + 5 * SEC) == 3
    m = s.load_msg(2)
    assert (m.subject, m.seq, m.ts, m.hdr, m.data) == ("bar", 2, t0 + SEC, HDR, b"two")
    assert s.load_msg(3).ts == t0 + 5 * SEC
    assert s.load_msg(4) is None and s.load_msg(0) is None
    st = s.state()
    assert (st.messages, st.first_seq, st.last_seq, st.first_ts, st.last_ts) == (3, 1, 3, t0, t0 + 5 * SEC)
    assert st.bytes == sum(size_of(s, *a) for a in [("foo", b"", b"one"), ("bar", HDR, b"two"),
                                                      ("baz", b"", b"three")])
    assert st.num_subjects == 3
    s2 = reopen(s)
    assert s2.state() == st
    assert s2.load_msg(2) == m


def test_byte_accounting_matches_nats(make_store):
    s = make_store()
    s.store_msg("foo.bar", b"", b"x" * 100)
    s.store_msg("foo.bar", HDR, b"x" * 100)
    assert s.state().bytes == size_of(s, "foo.bar", b"", b"x" * 100) + size_of(s, "foo.bar", HDR, b"x" * 100)


def test_accepts_bytearray_and_memoryview_payloads(make_store):
    s = make_store()
    s.store_msg("a", bytearray(HDR), memoryview(b"payload"))
    m = s.load_msg(1)
    assert m.hdr == HDR and m.data == b"payload"


# ---------------------------------------------------------------------------------------------------- loads
def test_load_run_is_load_msg_per_sequence_up_to_the_first_gap(make_store, kind):
    """``load_run`` (a consumer's in-order read) gives what ``load_msg`` gives for each sequence, up to the first
    sequence without a message, at most ``limit``, never past the chunk (block) of its start; in the file store
    with records written and records still in the write buffer."""
    s = make_store(block_size=2048) if kind == "file" else make_store()
    fill(s, 40, subjects=("a.1", "a.2", "b"), hdr=HDR)
    fill(s, 20, subjects=("a.1",), data=b"x" * 7)
    if kind == "file":
        s.flush()
        fill(s, 5, subjects=("c",))  # unflushed: read from the block's buffer
    s.remove_msg(30)
    last = s.last_seq
    for start in (0, 1, 2, 25, 29, 30, 31, 50, last, last + 1, last + 5):
        for limit in (1, 3, 100):
            run = s.load_run(start, limit)
            assert 0 <= len(run) <= limit
            expect = []
            for q in range(start, start + limit):
                m = s.load_msg(q)
                if m is None:
                    break
                expect.append(m)
            assert run == expect[:len(run)], (start, limit)
            if len(run) < len(expect):  # only a chunk's end cuts a run short
                assert s.load_run(start + len(run), limit)[:1] == expect[len(run):len(run) + 1]
                assert kind == "file" or len(run) % 4096 == 0
    assert s.load_run(1, 100)[:3] == [s.load_msg(1), s.load_msg(2), s.load_msg(3)]
    assert s.load_run(30, 10) == []
    # accept: asked once per change of subject; the run ends before the first subject it refuses
    asked = []

    def only_a(subj):
        asked.append(subj)
        return subj.startswith("a.")

    assert [m.seq for m in s.load_run(1, 100, only_a)] == [1, 2]  # "b" at 3
    assert asked == ["a.1", "a.2", "b"]
    assert s.load_run(3, 100, only_a) == []
    assert [m.seq for m in s.load_run(41, 100, lambda subj: subj == "a.1")] == list(range(41, 61))[:len(
        s.load_run(41, 100))]
    s2 = reopen(s)
    assert s2.load_run(31, 10) == [s2.load_msg(q) for q in range(31, 41)]


def test_load_run_hands_out_bytes_that_outlive_the_block(make_store, kind):
    """What a run hands out is ``bytes`` of its own (the file store parses a run from one read buffer): erasing the
    messages in place, writing more to the same block, compacting and restarting change nothing a caller holds."""
    s = make_store(block_size=4096) if kind == "file" else make_store()
    fill(s, 30, subjects=("a", "b"), hdr=HDR, data=b"p" * 50)
    fill(s, 10, subjects=("a",), data=b"q" * 60)
    if kind == "file":
        s.flush()
        fill(s, 3, subjects=("a",), data=b"r" * 5)  # the block's unwritten tail too
    held = []
    seq = 1
    while True:
        run = s.load_run(seq, 7)
        if not run:
            break
        held += run
        seq = run[-1].seq + 1
    assert [m.seq for m in held] == list(range(1, s.last_seq + 1))
    assert all(type(m.hdr) is bytes and type(m.data) is bytes for m in held)
    expect = [(m.subject, m.seq, m.ts, bytes(m.hdr), bytes(m.data)) for m in held]
    assert expect[0][3:] == (HDR, b"p" * 50) and expect[35][3:] == (b"", b"q" * 60)
    for q in (2, 3, 36):
        assert s.erase_msg(q)
    fill(s, 20, subjects=("a",), data=b"z" * 40)
    s.compact(10)
    if kind == "file":
        s.flush()
        s = reopen(s)
    assert [(m.subject, m.seq, m.ts, m.hdr, m.data) for m in held] == expect


def test_load_next_literal_wildcard_and_all(make_store):
    s = make_store()
    for subj in ["a.1", "b.1", "a.2", "b.2", "a.1", "c"]:
        s.store_msg(subj, b"", b"")
    assert s.load_next_msg("a.1", 0)[1] == 1
    assert s.load_next_msg("a.1", 2)[1] == 5
    assert s.load_next_msg("a.1", 6) == (None, 6)
    assert s.load_next_msg("b.*", 3)[1] == 4
    assert s.load_next_msg("b.>", 0)[1] == 2
    assert s.load_next_msg(">", 6)[1] == 6
    assert s.load_next_msg("", 3)[1] == 3
    assert s.load_next_msg("nope", 0) == (None, 6)
    assert s.load_next_msg("*.3", 0) == (None, 6)
    s.remove_msg(2)
    s.remove_msg(3)
    assert s.load_next_msg("", 2)[1] == 4
    assert s.load_next_msg("a.*", 2)[1] == 5


def test_load_next_wildcard_many_subjects(make_store):
    s = make_store()
    for i in range(200):
        s.store_msg(f"kv.k{i}", b"", b"v")
        s.store_msg("other", b"", b"o")
    assert s.load_next_msg("kv.*", 0)[1] == 1
    assert s.load_next_msg("kv.*", 2)[1] == 3
    assert s.load_next_msg("kv.>", 400) == (None, 400)
    assert s.load_last_msg("kv.*").seq == 399
    assert s.load_prev_msg("kv.*", 398).seq == 397


def test_load_last_and_prev(make_store):
    s = make_store()
    for subj in ["a", "b", "a", "b", "c"]:
        s.store_msg(subj, b"", subj.encode())
    assert s.load_last_msg("a").seq == 3
    assert s.load_last_msg("").seq == 5
    assert s.load_last_msg(">").seq == 5
    assert s.load_last_msg("*").seq == 5
    assert s.load_last_msg("zz") is None
    assert s.load_prev_msg("b", 3).seq == 2
    assert s.load_prev_msg("", 4).seq == 4
    assert s.load_prev_msg("a", 1).seq == 1
    assert s.load_prev_msg("c", 4) is None
    s.remove_msg(5)
    assert s.load_last_msg("").seq == 4
    s.remove_msg(3)
    assert s.load_last_msg("a").seq == 1
    s2 = reopen(s)
    assert s2.load_last_msg("a").seq == 1 and s2.load_last_msg("").seq == 4


def test_subject_for_seq_and_seq_from_time(make_store, clock):
    s = make_store()
    t0 = clock()
    for i in range(10):
        s.store_msg(f"s{i}", b"", b"")
        clock.advance(SEC)
    assert s.subject_for_seq(4) == "s3"
    assert s.subject_for_seq(11) is None
    assert s.get_seq_from_time(t0) == 1
    assert s.get_seq_from_time(t0 + 3 * SEC) == 4
    assert s.get_seq_from_time(t0 + 3 * SEC + 1) == 5
    assert s.get_seq_from_time(t0 + 100 * SEC) == 11
    s.remove_msg(4)
    assert s.get_seq_from_time(t0 + 3 * SEC) == 5


# ---------------------------------------------------------------------------------------------------- removal
def test_remove_and_erase(make_store):
    s = make_store()
    fill(s, 10, subjects=("a", "b"))
    assert s.remove_msg(1)
    assert not s.remove_msg(1)
    assert s.remove_msg(5)
    assert s.erase_msg(6)
    assert not s.erase_msg(42)
    st = s.state(deleted_details=True)
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted, st.deleted) == (7, 2, 10, 2, [5, 6])
    assert s.load_msg(6) is None
    assert s.subjects_state() == {"a": SimpleState(3, 3, 9), "b": SimpleState(4, 2, 10)}
    s2 = reopen(s)
    st2 = s2.state(deleted_details=True)
    assert st2 == st
    assert s2.load_msg(6) is None and s2.load_msg(7).seq == 7
    assert s2.subjects_state() == {"a": SimpleState(3, 3, 9), "b": SimpleState(4, 2, 10)}


def test_remove_everything_one_by_one(make_store):
    s = make_store()
    fill(s, 5)
    for seq in range(1, 6):
        assert s.remove_msg(seq)
    st = s.state()
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.num_deleted) == (0, 0, 6, 5, 0)
    assert s.store_msg("foo", b"", b"") == 6
    s2 = reopen(s)
    assert (s2.state().first_seq, s2.state().last_seq, s2.state().messages) == (6, 6, 1)


def test_on_remove_callback(make_store):
    s = make_store(max_msgs=3)
    seen = []
    s.on_remove = lambda seq, subj: seen.append((seq, subj))
    fill(s, 5, subjects=("x", "y"))
    assert seen == [(1, "x"), (2, "y")]
    s.remove_msg(4)
    assert seen[-1] == (4, "y")
    s.purge()
    assert len(seen) == 3  # bulk removals do not call back


# ---------------------------------------------------------------------------------------------------- purge
def test_purge_all(make_store, clock):
    s = make_store()
    fill(s, 10)
    assert s.purge() == 10
    st = s.state()
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.first_ts, st.num_deleted) == (0, 0, 11, 10, 0, 0)
    assert s.store_msg("foo", b"", b"") == 11
    assert s.state().first_seq == 11
    s2 = reopen(s)
    assert (s2.state().first_seq, s2.state().last_seq, s2.state().messages) == (11, 11, 1)


def test_purge_subject_keep_and_seq(make_store):
    s = make_store()
    for i in range(1, 21):
        s.store_msg("a" if i % 2 else "b", b"", b"")
    assert s.purge("a", keep=3) == 7
    assert s.subjects_state("a") == {"a": SimpleState(3, 15, 19)}
    assert s.purge("b", seq=11) == 5  # b's below 11: 2,4,6,8,10
    assert s.subjects_state("b")["b"] == SimpleState(5, 12, 20)
    assert s.purge(">", keep=2) == 6
    st = s.state()
    assert (st.messages, st.first_seq, st.last_seq) == (2, 19, 20)
    assert s.purge("zzz") == 0
    assert s.purge(seq=1) == 0
    s2 = reopen(s)
    assert (s2.state().messages, s2.state().first_seq) == (2, 19)


def test_purge_with_wildcard(make_store):
    s = make_store()
    for subj in ["x.1", "x.2", "y.1", "x.1"]:
        s.store_msg(subj, b"", b"")
    assert s.purge("x.*") == 3
    assert s.subjects_totals() == {"y.1": 1}
    assert s.state().first_seq == 3


def test_purge_up_to_seq_is_compact(make_store):
    s = make_store()
    fill(s, 10)
    assert s.purge(seq=5) == 4
    assert (s.state().first_seq, s.state().messages) == (5, 6)


def test_compact(make_store):
    s = make_store()
    fill(s, 10, subjects=("a", "b"))
    assert s.compact(4) == 3
    st = s.state()
    assert (st.first_seq, st.last_seq, st.messages) == (4, 10, 7)
    assert s.subjects_state() == {"a": SimpleState(3, 5, 9), "b": SimpleState(4, 4, 10)}
    assert s.compact(2) == 0
    assert s.compact(20) == 7
    st = s.state()
    assert (st.first_seq, st.last_seq, st.messages) == (20, 19, 0)
    assert s.store_msg("a", b"", b"") == 20
    s2 = reopen(s)
    assert (s2.state().first_seq, s2.state().last_seq) == (20, 20)


def test_compact_across_many_chunks(make_store):
    s = make_store(block_size=4096)
    fill(s, 10_000, subjects=("a", "b", "c"))
    assert s.compact(7_001) == 7_000
    assert s.state().first_seq == 7_001
    assert s.num_pending(0, "a") == 1000
    assert s.load_next_msg("b", 0)[1] == 7_001
    s2 = reopen(s)
    assert (s2.state().first_seq, s2.state().messages) == (7_001, 3_000)
    assert s2.subjects_state("c") == {"c": SimpleState(1000, 7_002, 9_999)}


# ---------------------------------------------------------------------------------------------------- limits
def test_max_msgs_discard_old(make_store):
    s = make_store(max_msgs=5)
    fill(s, 12)
    st = s.state()
    assert (st.messages, st.first_seq, st.last_seq) == (5, 8, 12)


def test_max_msgs_discard_new(make_store):
    s = make_store(max_msgs=3, discard="new")
    fill(s, 3)
    with pytest.raises(MaxMsgsError, match="^maximum messages exceeded$"):
        s.store_msg("foo", b"", b"")
    assert s.state().last_seq == 3
    s.remove_msg(1)
    assert s.store_msg("foo", b"", b"") == 4


def test_max_bytes_discard_old_and_new(make_store):
    s = make_store()
    one = size_of(s, "foo", b"", b"hello")
    s.update_config(StoreConfig(max_bytes=one * 3))
    fill(s, 5)
    assert (s.state().messages, s.state().first_seq, s.state().bytes) == (3, 3, one * 3)
    s.update_config(StoreConfig(max_bytes=one * 3, discard="new"))
    with pytest.raises(MaxBytesError, match="^maximum bytes exceeded$"):
        s.store_msg("foo", b"", b"hello")


def test_max_msgs_per_subject_evicts_even_with_discard_new(make_store):
    s = make_store(max_msgs_per_subject=2, discard="new", max_msgs=100)
    for i in range(5):
        s.store_msg("k", b"", str(i).encode())
    assert s.subjects_state("k") == {"k": SimpleState(2, 4, 5)}
    assert s.load_last_msg("k").data == b"4"
    s2 = reopen(s)
    assert s2.subjects_state("k") == {"k": SimpleState(2, 4, 5)}


def test_subject_first_last_when_one_message_is_left(make_store):
    # KV puts (max_msgs_per_subject 1) remove a key's previous value every time: the subject's first/last must
    # follow whichever end went, also when the other end was already out of date, and across a restart.
    s = make_store(max_msgs_per_subject=1)
    for i in range(4):
        s.store_msg("k", b"", str(i).encode())
        s.store_msg("other", b"", b"")
    assert s.subjects_state("k") == {"k": SimpleState(1, 7, 7)}
    assert s.load_last_msg("k").data == b"3"
    t = make_store()
    a, b, c = (t.store_msg("k", b"", str(i).encode()) for i in range(3))
    t.store_msg("x", b"", b"")
    t.remove_msg(c)  # the last goes: last is out of date, two are left
    t.remove_msg(a)  # then the first: one left, with a stale last
    assert t.subjects_state("k") == {"k": SimpleState(1, b, b)}
    assert t.load_last_msg("k").seq == b and t.load_next_msg("k", 0)[0].seq == b
    u = make_store()
    a, b = (u.store_msg("k", b"", b"") for _ in range(2))
    u.remove_msg(b)  # the last of two goes
    assert u.subjects_state("k") == {"k": SimpleState(1, a, a)}
    assert reopen(u).subjects_state("k") == {"k": SimpleState(1, a, a)}


def test_discard_new_per_subject(make_store):
    s = make_store(max_msgs_per_subject=1, discard="new", discard_new_per_subject=True)
    s.store_msg("k", b"", b"1")
    with pytest.raises(MaxMsgsPerSubjectError, match="^maximum messages per subject exceeded$"):
        s.store_msg("k", b"", b"2")
    # A rollup passes and replaces.
    s.store_msg("k", b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n", b"3")
    assert s.subjects_state("k") == {"k": SimpleState(1, 2, 2)}


def test_max_msgs_at_subject_limit_replaces(make_store):
    # nats-server: discard new + max_msgs reached is fine when the subject is at its limit (it replaces).
    s = make_store(max_msgs=2, max_msgs_per_subject=1, discard="new")
    s.store_msg("a", b"", b"")
    s.store_msg("b", b"", b"")
    s.store_msg("a", b"", b"")
    with pytest.raises(MaxMsgsError):
        s.store_msg("c", b"", b"")
    assert s.state().messages == 2


def test_max_msg_size(make_store):
    s = make_store(max_msg_size=10)
    s.store_msg("a", b"", b"x" * 10)
    with pytest.raises(MsgTooLargeError):
        s.store_msg("a", b"", b"x" * 11)


def test_update_config_shrinks(make_store):
    s = make_store()
    for i in range(10):
        s.store_msg(f"s{i % 2}", b"", b"")
    s.update_config(StoreConfig(max_msgs_per_subject=2))
    assert s.state().messages == 4
    s.update_config(StoreConfig(max_msgs_per_subject=2, max_msgs=1))
    assert (s.state().messages, s.state().first_seq) == (1, 10)


# ---------------------------------------------------------------------------------------------------- expiry
def test_max_age_expire(make_store, clock):
    s = make_store(max_age=10 * SEC)
    fill(s, 3)
    clock.advance(5 * SEC)
    fill(s, 2)
    assert s.next_expiry() == clock() - 5 * SEC + 10 * SEC
    assert s.expire(clock()) == []
    clock.advance(6 * SEC)
    removed = s.expire()
    assert [e.seq for e in removed] == [1, 2, 3]
    assert removed[-1].last_of_subject is False
    assert s.state().first_seq == 4
    clock.advance(5 * SEC)
    removed = s.expire()
    assert [e.seq for e in removed] == [4, 5] and removed[-1].last_of_subject
    assert s.next_expiry() is None
    assert s.state().messages == 0


def test_ttl_expire_and_never(make_store, clock):
    s = make_store(max_age=100 * SEC, allow_msg_ttl=True)
    s.store_msg("a", b"", b"", ttl=5)
    s.store_msg("b", b"", b"", ttl=-1)
    s.store_msg("c", b"", b"")
    assert s.next_expiry() == clock() + 5 * SEC
    clock.advance(5 * SEC)
    assert [(e.seq, e.subject) for e in s.expire()] == [(1, "a")]
    clock.advance(200 * SEC)
    assert [e.seq for e in s.expire()] == [3]  # "never" is exempt from max_age
    assert s.state().messages == 1 and s.load_msg(2) is not None


def test_ttl_survives_restart(make_store, clock):
    s = make_store(allow_msg_ttl=True)
    s.store_msg("a", b"", b"", ttl=30)
    s.store_msg("b", b"", b"")
    s = reopen(s)
    assert s.next_expiry() == clock() + 30 * SEC
    clock.advance(31 * SEC)
    assert [e.seq for e in s.expire()] == [1]


def test_expire_reports_headers_for_marker_decision(make_store, clock):
    s = make_store(max_age=SEC, subject_delete_marker_ttl=60 * SEC)
    s.store_msg("k", HDR, b"")
    clock.advance(2 * SEC)
    (e,) = s.expire()
    assert e.hdr == HDR and e.last_of_subject


# ---------------------------------------------------------------------------------------------------- pending
def test_num_pending(make_store):
    s = make_store()
    subs = ["a.1", "a.2", "b.1", "a.1", "b.2", "a.1", "c"]
    for subj in subs:
        s.store_msg(subj, b"", b"")
    assert s.num_pending(0) == 7
    assert s.num_pending(4) == 4
    assert s.num_pending(0, "a.1") == 3
    assert s.num_pending(5, "a.1") == 1
    assert s.num_pending(0, "a.*") == 4
    assert s.num_pending(3, "a.*") == 2
    assert s.num_pending(0, "*.1") == 4
    assert s.num_pending(0, ">") == 7
    assert s.num_pending(8) == 0
    assert s.num_pending(0, "a.1", last_per_subject=True) == 1
    assert s.num_pending(0, "", last_per_subject=True) == 5
    assert s.num_pending(5, "a.*", last_per_subject=True) == 1
    assert s.num_pending(3, "", last_per_subject=True) == 4
    s.remove_msg(4)
    assert s.num_pending(2, "a.1") == 1
    assert s.filtered_state(2, "a.*") == SimpleState(2, 2, 6)
    assert s.filtered_state(0, "zzz") == SimpleState()


def test_num_pending_many_partials(make_store):
    s = make_store()
    for rnd in range(3):
        for i in range(100):
            s.store_msg(f"p.{i}", b"", b"")
    assert s.num_pending(150, "p.*") == 151
    assert s.num_pending(150, "p.>", last_per_subject=True) == 100
    assert s.num_pending(250, "p.*", last_per_subject=True) == 51


def test_subjects_state_and_totals(make_store):
    s = make_store()
    for subj in ["x.a", "x.b", "y.a", "x.a"]:
        s.store_msg(subj, b"", b"")
    assert s.subjects_state("x.*") == {"x.a": SimpleState(2, 1, 4), "x.b": SimpleState(1, 2, 2)}
    assert s.subjects_totals("*.a") == {"x.a": 2, "y.a": 1}
    assert s.subjects_state("nope") == {}
    assert s.state(subjects_filter=">").subjects == {"x.a": 2, "x.b": 1, "y.a": 1}


def test_multi_last_seqs(make_store):
    s = make_store()
    for subj in ["a.1", "a.2", "b.1", "a.1", "b.1", "a.2"]:
        s.store_msg(subj, b"", b"")
    assert s.multi_last_seqs(["a.*"]) == [4, 6]
    assert s.multi_last_seqs(["a.*", "b.*"]) == [4, 5, 6]
    assert s.multi_last_seqs(["a.*"], max_seq=5) == [2, 4]
    assert s.multi_last_seqs(["b.1"], max_seq=2) == []
    with pytest.raises(TooManyResultsError):
        s.multi_last_seqs([">"], max_allowed=2)


# ---------------------------------------------------------------------------------------------------- sequences
def test_skip_msgs_and_first_seq(make_store):
    s = make_store(first_seq=100)
    st = s.state()
    assert (st.first_seq, st.last_seq, st.messages) == (100, 99, 0)
    assert s.store_msg("a", b"", b"") == 100
    assert s.skip_msg() == 101
    s.skip_msgs(102, 5000)
    assert s.store_msg("a", b"", b"") == 5102
    with pytest.raises(SequenceMismatchError):
        s.skip_msgs(1, 1)
    st = s.state()
    assert (st.first_seq, st.last_seq, st.messages, st.num_deleted) == (100, 5102, 2, 5001)
    s2 = reopen(s)
    st2 = s2.state()
    assert (st2.first_seq, st2.last_seq, st2.messages, st2.num_deleted) == (100, 5102, 2, 5001)
    assert s2.store_msg("a", b"", b"") == 5103


def test_skip_on_empty_moves_first(make_store):
    s = make_store()
    s.skip_msgs(1, 10)
    assert (s.state().first_seq, s.state().last_seq) == (11, 10)
    s2 = reopen(s)
    assert (s2.state().first_seq, s2.state().last_seq) == (11, 10)
    assert s2.store_msg("x", b"", b"") == 11


def test_store_raw(make_store, clock):
    s = make_store()
    s.store_raw(1, "a", b"", b"x", clock())
    s.store_raw(0, "a", b"", b"y", clock())
    with pytest.raises(SequenceMismatchError):
        s.store_raw(7, "a", b"", b"z", clock())
    assert s.state().last_seq == 2


def test_deleted_details_with_gaps(make_store):
    s = make_store()
    fill(s, 5)
    s.skip_msgs(6, 3)
    fill(s, 2)
    s.remove_msg(2)
    st = s.state(deleted_details=True)
    assert st.deleted == [2, 6, 7, 8] and st.num_deleted == 4


# ---------------------------------------------------------------------------------------------------- model check
def test_random_operations_against_a_model(make_store, clock):
    """Random stores/removals/purges/compacts compared with a dict model after every step."""
    import random

    rnd = random.Random(7)
    s = make_store(block_size=4096, max_msgs_per_subject=6)
    model: dict[int, str] = {}
    subjects = [f"m.{i}.{j}" for i in range(4) for j in range(3)]
    filters = ["m.0.0", "m.1.*", "m.*.2", "m.>", "", "m.3.1"]
    last = 0
    for step in range(1500):
        op = rnd.random()
        if op < 0.7:
            subj = rnd.choice(subjects)
            seq = s.store_msg(subj, b"", b"d" * rnd.randint(0, 40))
            last = seq
            model[seq] = subj
            per = sorted(q for q, v in model.items() if v == subj)
            for q in per[:-6]:
                del model[q]
        elif op < 0.85 and model:
            q = rnd.choice(list(model))
            assert s.remove_msg(q)
            del model[q]
        elif op < 0.9:
            subj = rnd.choice(subjects)
            keep = rnd.randint(0, 2)
            qs = sorted(q for q, v in model.items() if v == subj)
            gone = qs[:-keep] if keep else qs
            assert s.purge(subj, keep=keep) == len(gone)
            for q in gone:
                del model[q]
        elif op < 0.92 and last:
            c = rnd.randint(max(1, last - 50), last + 1)
            s.compact(c)
            for q in [q for q in model if q < c]:
                del model[q]
            if c > last:
                last = c - 1
        if step % 25 == 0 or step == 1499:
            if step % 500 == 0 and step:
                s.flush()
                s = reopen(s)
            st = s.state()
            assert st.messages == len(model)
            if model:
                assert st.first_seq == min(model)
            for f in filters:
                start = rnd.randint(0, last + 1)
                from skiff.storage.subjects import match

                exp = sorted(q for q, v in model.items() if q >= start and match(v, f))
                assert s.num_pending(start, f) == len(exp), (step, f, start)
                m, seq = s.load_next_msg(f, start)
                assert (m.seq if m else None) == (exp[0] if exp else None), (step, f, start)
                lp = {v for q, v in model.items() if match(v, f) and q >= start}
                assert s.num_pending(start, f, last_per_subject=True) == len(lp)
                allm = sorted(q for q, v in model.items() if match(v, f))
                lm = s.load_last_msg(f)
                assert (lm.seq if lm else None) == (allm[-1] if allm else None)
            totals = {}
            for v in model.values():
                totals[v] = totals.get(v, 0) + 1
            assert s.subjects_totals() == totals
            for subj, ss in s.subjects_state().items():
                qs = sorted(q for q, v in model.items() if v == subj)
                assert ss == SimpleState(len(qs), qs[0], qs[-1])


def test_purge_keep_all_subjects_is_a_compact(make_store):
    s = make_store(block_size=4096)
    fill(s, 500, subjects=("a", "b"))
    s.remove_msg(499)
    assert s.purge(keep=10) == 489
    st = s.state()
    assert (st.messages, st.first_seq, st.last_seq) == (10, 490, 500)
    assert s.subjects_totals() == {"a": 4, "b": 6}  # 490..500 without 499
    s2 = reopen(s)
    assert (s2.state().messages, s2.state().first_seq) == (10, 490)


def test_too_long_subject_is_refused_without_side_effects(make_store):
    from skiff.storage import StoreError

    s = make_store()
    with pytest.raises(StoreError):
        s.store_msg("x" * 70_000, b"", b"")
    st = s.state()
    assert (st.messages, st.num_subjects, st.last_seq) == (0, 0, 0)
    assert s.store_msg("ok", b"", b"") == 1


def test_last_ts_survives_purge_and_restart(make_store, clock):
    s = make_store()
    fill(s, 5)
    t_last = s.state().last_ts
    clock.advance(10 * SEC)
    s.purge()
    s = reopen(s)
    st = s.state()
    assert (st.first_seq, st.last_seq, st.last_ts, st.first_ts) == (6, 5, t_last, 0)
    s.compact(50)
    s = reopen(s)
    assert (s.state().first_seq, s.state().last_seq, s.state().last_ts) == (50, 49, t_last)


def test_work_queue_pattern_keeps_few_chunks(make_store):
    """Store and remove at once (a work queue acked as it goes): emptied chunks/blocks go away."""
    s = make_store(block_size=4096)
    for i in range(20_000):
        seq = s.store_msg("wq", b"", b"job-%d" % i)
        s.remove_msg(seq)
        if i % 100 == 0:
            s.flush()
    s.flush()
    assert s.state().messages == 0 and s.state().first_seq == 20_001
    assert len(s._chunks) <= 2
    s2 = reopen(s)
    assert (s2.state().first_seq, s2.state().last_seq) == (20_001, 20_000)
    assert s2.store_msg("wq", b"", b"next") == 20_001
