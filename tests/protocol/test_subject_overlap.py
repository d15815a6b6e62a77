"""Stream subject overlap found through an index gives exactly what nats-server's all-pairs loop gives.

checkStreamCfg compares every pair of a stream's subjects and jsAccount.subjectsOverlap every subject with every
subject of the other streams.  protocol.jsapi._subjects answers the same questions from a CollisionIndex; these
tests hold it against the all-pairs loop (SubjectsCollide quirks included) and bound its time.
"""
from __future__ import annotations

import random
import time

from skiff.protocol.jsapi._subjects import (
    CollisionIndex, any_collide, first_filter_overlap, first_overlap, is_valid_subject, subject_is_subset_match,
    subjects_collide,
)

# Tokens that exercise every branch of SubjectsCollide: wildcards, tokens that only start with '*' or '>',
# empty tokens (invalid subjects later in the list are compared before they are validated).
TOKENS = ["a", "b", "c", "*", ">", "*x", ">y", ""]


def all_pairs_outcome(subjects):
    """checkStreamCfg's loop: the first invalid subject or the first colliding pair, whichever comes first."""
    for i, s in enumerate(subjects):
        if not is_valid_subject(s):
            return "invalid", i
        for j in range(i + 1, len(subjects)):
            if subjects_collide(subjects[j], s):
                return "overlap", i, j
    return None


def indexed_outcome(subjects):
    """The same loop as stream_config.normalize_stream_config runs it, with first_overlap."""
    pair = first_overlap(subjects)
    for i, s in enumerate(subjects):
        if not is_valid_subject(s):
            return "invalid", i
        if pair is not None and pair[0] == i:
            return "overlap", i, pair[1]
    return None


def random_subject(rng, tokens=TOKENS):
    return ".".join(rng.choice(tokens) for _ in range(rng.randint(1, 4)))


def test_first_overlap_matches_all_pairs_on_random_lists():
    rng = random.Random(15)
    for _ in range(6000):
        subjects = [random_subject(rng) for _ in range(rng.randint(1, 8))]
        assert indexed_outcome(subjects) == all_pairs_outcome(subjects), subjects


def test_first_overlap_matches_all_pairs_on_mostly_literal_lists():
    rng = random.Random(16)
    literal = ["a", "b", "*x", ">y", ""]
    for _ in range(3000):
        subjects = [random_subject(rng, literal if rng.random() < 0.9 else TOKENS) for _ in range(rng.randint(1, 10))]
        assert indexed_outcome(subjects) == all_pairs_outcome(subjects), subjects


def test_candidates_never_miss_a_collision():
    rng = random.Random(8)
    pool = [random_subject(rng) for _ in range(400)]
    index = CollisionIndex(pool)
    for q in pool + [random_subject(rng) for _ in range(400)]:
        if not is_valid_subject(q):
            continue
        cand = index.candidates(q)
        for j, s in enumerate(pool):
            if subjects_collide(s, q):
                assert cand >> j & 1, (q, s)


def test_any_collide_matches_all_pairs():
    rng = random.Random(10)
    for _ in range(500):
        a = [s for s in (random_subject(rng) for _ in range(rng.randint(1, 12))) if is_valid_subject(s)]
        b = [s for s in (random_subject(rng) for _ in range(rng.randint(1, 12))) if is_valid_subject(s)]
        assert any_collide(a, b) == any(subjects_collide(x, y) for x in b for y in a), (a, b)


def test_known_pairs():
    assert first_overlap(["foo.*", "bar", "foo.bar"]) == (0, 2)
    assert first_overlap(["a", "b", "a"]) == (0, 2)  # so "duplicate subjects detected" is never reached, as in Go
    assert first_overlap(["a.>", "b.*", "b.c.d"]) is None
    assert first_overlap(["a.*b.*", "a.c.*"]) == (0, 1)  # '*b' counts as a wildcard when both sides have one
    assert first_overlap(["a.*b", "a.c"]) is None  # ... but not against a literal subject
    assert indexed_outcome(["x", "a..b"]) == ("invalid", 1)
    assert first_overlap(["a.b", "c", "a.*", "a.b"]) == (0, 2)  # a wildcard before the equal literal
    assert first_overlap(["a.b", "c", "a.b", "a.*"]) == (0, 2)


def test_five_thousand_subjects_are_fast():
    # nats-server: ~0.8 s on its own goroutine; the all-pairs loop here took 5 s on the event loop.
    for subjects in ([f"s.{i}" for i in range(5000)],
                     [f"s.{i}.*" for i in range(2500)] + [f"*.t{i}" for i in range(2500)],
                     [f"*{i}" for i in range(5000)],
                     [f"a{i}.>" for i in range(5000)]):
        t = time.process_time()  # this process's CPU: a loaded machine does not move it
        assert first_overlap(subjects) is None
        assert not any_collide(subjects, [f"z.{i}" for i in range(5000)])
        assert time.process_time() - t < 0.5


# -- consumer filter_subjects (checkConsumerCfg: no filter may be a subset of another) -----------------------------

def all_pairs_filter_outcome(filters):
    for i, s in enumerate(filters):
        if not is_valid_subject(s):
            return "invalid", i
        for j, t in enumerate(filters):
            if i != j and subject_is_subset_match(s, t):
                return "overlap", i
    return None


def indexed_filter_outcome(filters):
    first = first_filter_overlap(filters)
    for i, s in enumerate(filters):
        if not is_valid_subject(s):
            return "invalid", i
        if i == first:
            return "overlap", i
    return None


def test_first_filter_overlap_matches_all_pairs():
    rng = random.Random(42)
    for tokens in (TOKENS, ["a", "b", "*", ">", "", " "], ["a", "b", "*x"]):
        for _ in range(4000):
            filters = [random_subject(rng, tokens) for _ in range(rng.randint(1, 8))]
            assert indexed_filter_outcome(filters) == all_pairs_filter_outcome(filters), filters


def test_filter_overlap_known_cases():
    assert first_filter_overlap(["a.b", "a.*"]) == 0
    assert first_filter_overlap(["a.*", "a.b"]) == 1
    assert first_filter_overlap(["a.*", "*.b"]) == -1  # they collide, but neither holds the other
    assert first_filter_overlap(["a.*.z", "a.>.b"]) == 0  # a later, invalid filter still counts (Go's loop order)
    assert first_filter_overlap(["x", "y", "x"]) == 0


def test_five_thousand_filters_are_fast():
    # Every pair collides here and none is a subset: the all-pairs loop made 25M calls.
    filters = [f"a{i}.*" for i in range(2500)] + [f"*.b{i}" for i in range(2500)]
    t = time.process_time()  # this process's CPU: a loaded machine does not move it
    assert first_filter_overlap(filters) == -1
    assert first_filter_overlap([f"f.{i}" for i in range(5000)]) == -1
    assert time.process_time() - t < 0.5


def test_is_valid_subject_fast_path_matches_token_loop():
    from skiff.protocol.jsapi._subjects import _is_valid_subject_tokens

    rng = random.Random(3)
    alphabet = ["a", "bc", "*", ">", "", " ", "\t", "x y", "*x", ">>", ".", "\f"]
    for _ in range(20000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        s = s.replace("..", ".") if rng.random() < 0.5 else s
        assert is_valid_subject(s) == _is_valid_subject_tokens(s), repr(s)
