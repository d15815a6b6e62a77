"""The subject index: wildcard matching, queue groups merged by name, cache invalidation, pruning."""
from protocol.subjects import is_subset, is_valid_subject, subject_matches, subjects_overlap
from server.core.sublist import Sublist
from server.core.subscription import Subscription


def sub(subject, queue="", sid="1"):
    return Subscription(object(), subject, queue, sid)


def subjects(result):
    plain, queues = result
    return sorted(s.subject for s in plain), sorted(sorted(m.subject for m in g) for g in queues)


def test_literal_and_wildcards():
    sl = Sublist()
    for s in ["foo.bar", "foo.*", "foo.>", ">", "*.bar", "foo", "foo.bar.baz"]:
        sl.insert(sub(s))
    assert subjects(sl.match("foo.bar")) == (sorted(["foo.bar", "foo.*", "foo.>", ">", "*.bar"]), [])
    assert subjects(sl.match("foo")) == ([">", "foo"], [])
    assert subjects(sl.match("foo.bar.baz")) == (sorted(["foo.>", ">", "foo.bar.baz"]), [])
    assert subjects(sl.match("bar")) == ([">"], [])


def test_queue_groups_merge_by_name():
    sl = Sublist()
    a, b, c = sub("foo.*", "q"), sub("foo.bar", "q"), sub("foo.bar", "other")
    for s in (a, b, c):
        sl.insert(s)
    plain, queues = sl.match("foo.bar")
    assert plain == []
    assert sorted(len(g) for g in queues) == [1, 2]


def test_cache_is_invalidated_by_insert_and_remove():
    sl = Sublist()
    a = sub("foo.bar")
    sl.insert(a)
    assert len(sl.match("foo.bar")[0]) == 1
    w = sub("foo.*")
    sl.insert(w)
    assert len(sl.match("foo.bar")[0]) == 2
    assert sl.remove(w)
    assert len(sl.match("foo.bar")[0]) == 1
    assert sl.remove(a)
    assert sl.match("foo.bar") == ([], [])
    assert not sl.remove(a)


def test_remove_prunes_nodes():
    sl = Sublist()
    subs = [sub(f"_INBOX.{i}.x") for i in range(100)]
    for s in subs:
        sl.insert(s)
    for s in subs:
        sl.remove(s)
    assert sl._root.empty() and sl.count == 0


def test_subject_helpers():
    assert subject_matches("foo.*", "foo.bar") and not subject_matches("foo.*", "foo")
    assert subject_matches("foo.>", "foo.a.b") and not subject_matches("foo.>", "foo")
    assert not subject_matches("foo*", "foo.x")
    assert is_valid_subject("foo.>") and not is_valid_subject("foo.>.bar") and not is_valid_subject("foo..bar")
    assert is_valid_subject("foo*.bar")  # a literal token
    assert subjects_overlap("foo.*", "*.bar") and not subjects_overlap("foo.*", "foo")
    assert subjects_overlap("foo.>", "foo.bar.baz") and not subjects_overlap("foo.>", "foo")
    assert is_subset("foo.bar", "foo.*") and not is_subset("foo.*", "foo.bar") and is_subset("a.b.c", ">")
