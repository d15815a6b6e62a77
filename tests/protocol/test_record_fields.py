"""protocol/record.py ``Fields``: the plain classes that replaced the dataclasses built at start (issue #13) keep
what the dataclasses gave them: keyword and positional construction with fresh mutable defaults, equality by class
and fields, no hash (but GoTime, frozen: immutable and hashable), a repr listing the fields, copies."""
from __future__ import annotations

import copy
import pickle

import pytest

from skiff.protocol.jsapi.timefmt import GoTime
from skiff.server.core.accounts import Account, Export
from skiff.server.core.auth import AuthUser
from skiff.storage.config import StoreConfig
from skiff.storage.records import ConsumerState, LostStreamData, SequencePair, StreamState


def test_defaults_are_fresh_and_arguments_go_in_field_order():
    a, b = ConsumerState(), ConsumerState()
    assert a == b and a.pending is not b.pending and a.delivered is not b.delivered
    assert ConsumerState(SequencePair(3, 4)).delivered == SequencePair(consumer_seq=3, stream_seq=4)
    assert LostStreamData().msgs == [] and LostStreamData().msgs is not LostStreamData().msgs
    st = StreamState(5, 10, 1, 2, 5, 6, consumer_count=2)
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.consumer_count, st.lost) == (5, 10, 1, 5, 2, None)
    assert Account("A").exports == [] and Account("A").sublist is not Account("A").sublist
    assert Export("x", True).revocations == {} and AuthUser("u").account == "$G"


def test_equality_is_by_class_and_fields_and_none_is_hashable():
    assert SequencePair(1, 2) == SequencePair(1, 2) and SequencePair(1, 2) != SequencePair(2, 1)
    assert SequencePair(1, 2) != (1, 2)  # not a tuple
    assert StreamState(lost=LostStreamData([3], 1)) == StreamState(lost=LostStreamData([3], 1))
    for obj in (SequencePair(), StreamState(), ConsumerState(), StoreConfig(), Account("A"), AuthUser("u")):
        with pytest.raises(TypeError):
            hash(obj)
    with pytest.raises(AttributeError):
        SequencePair().other = 1  # slotted, as the slots=True dataclasses were
    acc = Account("A")
    acc.extra = 1  # Account, Export and AuthUser were plain dataclasses: attributes of their own are allowed
    assert acc.extra == 1


def test_repr_lists_the_fields():
    assert repr(SequencePair(1, 2)) == "SequencePair(consumer_seq=1, stream_seq=2)"
    assert repr(GoTime(5)) == "GoTime(unix_ns=5, offset=0)"


def test_store_config_post_init_and_field_names():
    cfg = StoreConfig(max_msgs=0, discard="NEW", subjects=["a"], block_size=1)
    assert (cfg.max_msgs, cfg.discard, cfg.subjects, cfg.block_size) == (-1, "new", ("a",), 4096)
    assert StoreConfig.from_stream_config({"name": "S", "max_msgs_per": 3, "nope": 1}).max_msgs_per_subject == 3
    with pytest.raises(ValueError):
        StoreConfig(discard="later")


def test_go_time_is_frozen_hashable_and_copies():
    t = GoTime(1_000, 3600)
    with pytest.raises(AttributeError):
        t.unix_ns = 2
    with pytest.raises(AttributeError):
        del t.offset
    assert {t: 1}[GoTime(1_000, 3600)] == 1 and t != GoTime(1_000)
    for c in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert c == t and type(c) is GoTime


def _pair(base):
    class P(base):
        """doc"""
        x: int
        y: list[int] | None = None

        @property
        def z(self) -> int:
            return self.x + 1
    return P


def test_named_tuple_makes_the_class_typing_makes():
    """protocol.record.NamedTuple is typing.NamedTuple without its checks of the (string) annotations."""
    import typing

    from skiff.protocol.record import NamedTuple

    ours, theirs = _pair(NamedTuple), _pair(typing.NamedTuple)
    for attr in ("_fields", "_field_defaults", "__doc__", "__module__", "__qualname__", "__mro__"):
        a, b = getattr(ours, attr), getattr(theirs, attr)
        assert (a if attr != "__mro__" else [c.__name__ for c in a]) == \
            (b if attr != "__mro__" else [c.__name__ for c in b]), attr
    p = ours(1)
    assert p == (1, None) and p.z == 2 and repr(p) == "P(x=1, y=None)" and type(p._replace(x=2)) is ours
    assert list(ours.__annotations__) == ["x", "y"]
    with pytest.raises(TypeError, match="Non-default namedtuple field y cannot follow default field x"):
        class Bad(NamedTuple):
            x: int = 0
            y: int
    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _make"):
        class Bad2(NamedTuple):
            x: int

            def _make(self):
                pass
