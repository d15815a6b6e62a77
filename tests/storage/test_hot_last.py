"""The cache of last messages (storage/queries.py HOT_MSG): ``load_last_msg`` of a literal subject answers from memory
what the store holds now, never a message that is gone or a sequence given out again after a rolled-back write."""
from __future__ import annotations

import pytest

from skiff.storage import queries
from skiff.storage.errors import StoreWriteError
from skiff.storage.filestore.store import FileStreamStore
from skiff.storage.config import StoreConfig

from tests.storage.conftest import reopen
from tests.storage.test_recovery import FaultyWrite


def test_last_message_follows_puts_removals_and_purges(make_store):
    s = make_store(max_msgs_per_subject=2)
    s.store_msg("kv.a", b"", b"1")
    s.store_msg("kv.b", b"", b"b")
    first = s.load_last_msg("kv.a")
    assert (first.seq, first.data) == (1, b"1")
    assert 1 in s._hot  # kept: the next load of kv.a reads no block
    assert s.load_last_msg("kv.a") is first
    s.store_msg("kv.a", b"H", b"2")  # a newer revision: the cache holds the old sequence, the index the new one
    assert (s.load_last_msg("kv.a").seq, s.load_last_msg("kv.a").data) == (3, b"2")
    s.remove_msg(3)  # the last revision goes: the one before it is the answer again
    assert s.load_last_msg("kv.a").seq == 1
    s.flush()
    s = reopen(s)
    assert s.load_last_msg("kv.a").data == b"1"
    s.purge("kv.a")
    assert s.load_last_msg("kv.a") is None and s.load_last_msg("kv.b").data == b"b"
    s.purge()
    assert s.load_last_msg("kv.b") is None and not s._hot


def test_budget_empties_the_cache_and_big_messages_stay_out(make_store, monkeypatch):
    monkeypatch.setattr(queries, "HOT_BYTES", 10)
    s = make_store()
    for i in range(4):
        s.store_msg(f"k.{i}", b"", b"xxxx")
    for i in range(4):
        assert s.load_last_msg(f"k.{i}").data == b"xxxx"
    assert sorted(s._hot) == [3, 4] and s._hot_bytes == 8  # two fit in 10 bytes: the third emptied it
    s.store_msg("big", b"", b"y" * (queries.HOT_MSG + 1))
    assert s.load_last_msg("big").data == b"y" * (queries.HOT_MSG + 1)
    assert 5 not in s._hot


def test_a_sequence_given_out_again_after_a_rolled_back_write(tmp_path):
    """A write that fails rolls the store back to what is on disk: the sequences of the lost batch are given out
    again, to other messages, and the cache must not answer with the old ones."""
    w = FaultyWrite()
    s = FileStreamStore(tmp_path / "s", StoreConfig(), write=w)
    s.store_msg("k", b"", b"kept")
    s.flush()
    w.armed = True
    assert s.store_msg("k", b"", b"lost") == 2
    assert s.load_last_msg("k").data == b"lost"  # read from the pending tail, and kept
    with pytest.raises(StoreWriteError):
        s.flush()
    assert s.load_last_msg("k").data == b"kept"
    w.armed = False
    assert s.store_msg("k", b"", b"again") == 2
    assert s.load_last_msg("k").data == b"again"
    s.stop()
