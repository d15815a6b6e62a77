"""Subject and name checks exactly as nats-server's JetStream config validation uses them.

These are private to protocol/jsapi on purpose: config validation must reproduce nats-server's quirks
(``sublist.go`` ``IsValidSubject``, ``subjectIsLiteral``, ``SubjectsCollide`` which only looks at a token's first
byte when the other side has wildcards, ``subjectIsSubsetMatch``; ``jetstream.go`` ``isValidName`` /
``isValidAssetName``), and the shared ``protocol.subjects`` module is free to be stricter or faster for routing.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter
import re

_WS = " \t\r\n\f"
PWC = "*"
FWC = ">"


def is_valid_asset_name(name: str) -> bool:
    """Stream / consumer names: no whitespace, '.', '*', '>', path separators."""
    return bool(name) and not any(c in name for c in " \t\r\n\f.*>\\/")


_HAS_WS = re.compile("[" + _WS + "]").search


def is_valid_subject(subject: str) -> bool:
    # The same answer as _is_valid_subject_tokens, without a Python loop over the tokens (a 5,000-subject stream
    # config checks each of them): no empty token, no whitespace anywhere, no token after an exact '>'.
    if not subject or subject[0] == "." or subject[-1] == "." or ".." in subject or _HAS_WS(subject):
        return False
    if ">" in subject:
        tokens = subject.split(".")
        return FWC not in tokens[:-1]
    return True


def _is_valid_subject_tokens(subject: str) -> bool:
    """IsValidSubject token by token, as sublist.go reads it (kept as the reference for is_valid_subject)."""
    if not subject:
        return False
    sfwc = False
    for t in subject.split("."):
        if not t or sfwc:
            return False
        if len(t) > 1:
            if any(c in t for c in _WS):
                return False
            continue
        if t == FWC:
            sfwc = True
        elif t in _WS:
            return False
    return True


def subject_is_literal(subject: str) -> bool:
    return all(t not in (PWC, FWC) for t in subject.split("."))


def is_valid_publish_subject(subject: str) -> bool:
    return is_valid_subject(subject) and subject_is_literal(subject)


def _analyze(tokens: list[str]) -> tuple[bool, bool]:
    return PWC in tokens, FWC in tokens


def _subset_tokens(tokens: list[str], test: list[str]) -> bool:
    for i, t2 in enumerate(test):
        if i >= len(tokens):
            return False
        if not t2:
            return False
        if t2 == FWC:
            return True
        t1 = tokens[i]
        if not t1 or t1 == FWC:
            return False
        if t1 == PWC:
            if t2 != PWC:
                return False
            continue
        if t2 != PWC and t1 != t2:
            return False
    return len(tokens) == len(test)


def subject_is_subset_match(subject: str, test: str) -> bool:
    """Is everything ``subject`` matches also matched by ``test``? (``subjectIsSubsetMatch``)"""
    return _subset_tokens(subject.split("."), test.split("."))


def subjects_collide(a: str, b: str) -> bool:
    """Could one literal subject match both? (``SubjectsCollide``, quirks included)"""
    if a == b:
        return True
    t1, t2 = a.split("."), b.split(".")
    p1, f1 = _analyze(t1)
    p2, f2 = _analyze(t2)
    l1, l2 = not (p1 or f1), not (p2 or f2)
    if l1 and l2:
        return a == b
    if l1 and not l2:
        return _subset_tokens(t1, t2)
    if l2 and not l1:
        return _subset_tokens(t2, t1)
    if not f1 and not f2 and len(t1) != len(t2):
        return False
    if len(t1) != len(t2):
        if (len(t1) < len(t2) and not f1) or (len(t2) < len(t1) and not f2):
            return False
    for x, y in zip(t1, t2):
        if not x or not y:
            return False
        if x[0] in "*>" or y[0] in "*>":
            continue
        if x != y:
            return False
    return True


# ---------------------------------------------------------------------------------------------------------------
# Overlap checks without all pairs.
#
# nats-server compares every pair of subjects (checkStreamCfg; jsAccount.subjectsOverlap).  In Go 5,000 subjects
# take under a second on another goroutine; here the same 12.5M calls took 5-40 s on the event loop, freezing every
# other client.  ``CollisionIndex`` keeps, per token position, bitsets (Python ints, bit j = subject j) of the
# subjects that could collide with a given token there; ANDing them for a query leaves a small superset of the
# subjects that collide with it, which ``subjects_collide`` then checks exactly.  The superset rules below follow
# ``subjects_collide`` case by case (quirks included: a token that only *starts* with '*' or '>' counts as a
# wildcard when both sides have wildcards), so results - and error texts naming the first colliding pair - are the
# same as the all-pairs loop.  tests/protocol/test_subject_overlap.py checks them against that loop on random input.
# ---------------------------------------------------------------------------------------------------------------


class CollisionIndex:
    """Which of ``subjects`` collide (``subjects_collide``) with a query subject, in index order."""

    __slots__ = ("subjects", "positions", "_tok", "_pwcfwc", "_wildish", "_fwc_before", "_ended", "_len",
                 "_hasfwc", "_nonlit", "_all", "_lit_extra", "_wild_extra", "_fwc_at")

    def __init__(self, subjects: list[str], positions: list[int] | None = None) -> None:
        """``positions`` (ascending): the index each subject stands for in a longer list (default: its own)."""
        self.subjects = list(subjects)
        self.positions = positions
        tok: dict[tuple[int, str], list[int]] = {}
        pwcfwc: dict[int, list[int]] = {}
        wildish: dict[int, list[int]] = {}
        fwc_at: dict[int, list[int]] = {}
        by_len: dict[int, list[int]] = {}
        hasfwc: list[int] = []
        nonlit: list[int] = []
        for j, s in enumerate(self.subjects):
            tokens = s.split(".")
            by_len.setdefault(len(tokens), []).append(j)
            lit = True
            fwc = False
            for p, t in enumerate(tokens):
                tok.setdefault((p, t), []).append(j)
                if t == PWC or t == FWC:
                    lit = False
                    pwcfwc.setdefault(p, []).append(j)
                    if t == FWC:
                        fwc_at.setdefault(p, []).append(j)
                        fwc = True
                if t and t[0] in "*>":
                    wildish.setdefault(p, []).append(j)
            if not lit:
                nonlit.append(j)
            if fwc:
                hasfwc.append(j)
        n = len(self.subjects)
        self._all = (1 << n) - 1
        self._tok = {k: _bits(v, n) for k, v in tok.items()}
        self._pwcfwc = {p: _bits(v, n) for p, v in pwcfwc.items()}
        self._wildish = {p: _bits(v, n) for p, v in wildish.items()}
        self._len = {ln: _bits(v, n) for ln, v in by_len.items()}
        self._hasfwc = _bits(hasfwc, n)
        self._nonlit = _bits(nonlit, n)
        # _fwc_before[p]: subjects with an exact '>' token at a position < p; _ended[p]: subjects of <= p tokens.
        depth = max(by_len, default=0) + 1
        self._fwc_before = [0] * (depth + 1)
        self._ended = [0] * (depth + 1)
        self._fwc_at = {p: _bits(v, n) for p, v in fwc_at.items()}
        acc_f = acc_e = 0
        for p in range(depth + 1):
            self._fwc_before[p] = acc_f
            acc_e |= self._len.get(p, 0)
            self._ended[p] = acc_e
            acc_f |= self._fwc_at.get(p, 0)
        # What a query token admits besides subjects holding that same token, per position (see candidates()):
        # for a literal query, an exact '*' or '>' there or a '>' before; for a wildcard query, a wildcard-ish
        # token of a wildcard subject there, or a shorter subject that ends in '>'.
        self._lit_extra = [self._pwcfwc.get(p, 0) | self._fwc_before[p] for p in range(depth + 1)]
        self._wild_extra = [(self._wildish.get(p, 0) & self._nonlit) | (self._ended[p] & self._hasfwc)
                            for p in range(depth + 1)]

    def candidates(self, q: str) -> int:
        """A bitset holding every subject that collides with ``q`` (and few that do not).  ``q`` must be valid."""
        tokens = q.split(".")
        lq = len(tokens)
        get = self._tok.get
        has_fwc = FWC in tokens
        if not (has_fwc or PWC in tokens):
            # Literal query: an equal subject, or a wildcard one that matches it (subset rules).
            extra = self._lit_extra
            last = len(extra) - 1
            c = self._len.get(lq, 0) | self._fwc_before[min(lq, last)]
            for p, t in enumerate(tokens):
                c &= get((p, t), 0) | extra[min(p, last)]
                if not c:
                    return 0
            return c
        c = self._all if has_fwc else (self._len.get(lq, 0) | self._hasfwc)
        nonlit = self._nonlit
        wextra = self._wild_extra
        last = len(wextra) - 1
        for p, t in enumerate(tokens):
            if t == PWC or t == FWC:
                continue
            if t[:1] in ("*", ">"):
                # Literal subjects must hold the same token; against wildcard ones it counts as a wildcard.
                c &= get((p, t), 0) | nonlit
            else:
                c &= get((p, t), 0) | wextra[min(p, last)]
            if not c:
                return 0
        return c

    def supersets(self, q: str) -> int:
        """A bitset of the subjects ``t`` with ``subject_is_subset_match(q, t)`` (exact for subjects that are valid
        or cut after their first '>'; see first_filter_overlap).  ``q`` must be valid."""
        tokens = q.split(".")
        fwc_before, last = self._fwc_before, len(self._fwc_before) - 1
        lq = len(tokens)
        c = self._len.get(lq, 0) | fwc_before[min(lq, last)]
        get = self._tok.get
        fwc_at = self._fwc_at
        for p, t in enumerate(tokens):
            # t's own '>' here or before matches the rest; else '*' covers a literal or '*', a literal only itself.
            ok = fwc_at.get(p, 0) | fwc_before[min(p, last)]
            if t == PWC:
                ok |= get((p, PWC), 0)
            elif t != FWC:
                ok |= get((p, t), 0) | get((p, PWC), 0)
            c &= ok
            if not c:
                return 0
        return c

    def first_colliding(self, q: str, after: int = -1) -> int:
        """Position of the first subject after position ``after`` that collides with ``q``, or -1."""
        positions = self.positions
        base = after + 1 if positions is None else bisect_right(positions, after)
        c = self.candidates(q) >> base
        subjects = self.subjects
        while c:
            low = c & -c
            j = base + low.bit_length() - 1
            if subjects_collide(subjects[j], q):
                return j if positions is None else positions[j]
            c ^= low
        return -1


def _bits(indexes, n: int) -> int:
    if len(indexes) < 64:
        v = 0
        for j in indexes:
            v |= 1 << j
        return v
    buf = bytearray((n + 8) // 8)
    for j in indexes:
        buf[j >> 3] |= 1 << (j & 7)
    return int.from_bytes(buf, "little")


def _is_literal(subject: str) -> bool:
    return "*" not in subject and ">" not in subject or subject_is_literal(subject)


def first_overlap(subjects: list[str]) -> tuple[int, int] | None:
    """The first pair ``(i, j)``, i < j, in checkStreamCfg's loop order whose subjects collide, or None.

    Only the answer for a valid ``subjects[i]`` is meaningful: the caller reports an invalid subject at its turn
    before it looks for overlaps.  Literal subjects collide with each other only when equal, so they are matched
    by a dict; only wildcard subjects go through (small) CollisionIndexes."""
    lits: list[int] = []
    wilds: list[int] = []
    for k, s in enumerate(subjects):
        (lits if _is_literal(s) else wilds).append(k)
    next_equal: dict[int, int] = {}
    last: dict[str, int] = {}
    for k in reversed(lits):
        s = subjects[k]
        if s in last:
            next_equal[k] = last[s]
        last[s] = k
    if not wilds:
        return min(next_equal.items()) if next_equal else None
    windex = CollisionIndex([subjects[k] for k in wilds], wilds)
    lindex = CollisionIndex([subjects[k] for k in lits], lits) if lits else None
    for i, s in enumerate(subjects):
        # An invalid subjects[i] may get a wrong answer here: the caller stops at it with "invalid subject" first.
        j = windex.first_colliding(s, i)
        if i in next_equal and (j < 0 or next_equal[i] < j):
            j = next_equal[i]
        elif lindex is not None and not _is_literal(s):
            jl = lindex.first_colliding(s, i)
            if jl >= 0 and (j < 0 or jl < j):
                j = jl
        if j >= 0:
            return i, j
    return None


def first_filter_overlap(filters: list[str]) -> int:
    """checkConsumerCfg's filter loop: the first index ``i`` for which another filter ``t`` has
    ``subject_is_subset_match(filters[i], t)``, or -1.  Only the answer for a valid ``filters[i]`` is meaningful
    (the caller reports an invalid filter at its turn first).

    A filter not validated yet can still be the ``t`` of an earlier one.  subject_is_subset_match stops at t's
    first '>' with True, and no valid subject is a subset of a t whose tokens before that (or, without a '>', any
    of whose tokens) are empty or hold whitespace; so such a t is indexed cut after its first '>', or not at all."""
    n = len(filters)
    if n < 2:
        return -1
    indexed: list[str] = []
    for t in filters:
        if not is_valid_subject(t):
            tokens = t.split(".")
            cut = ".".join(tokens[: tokens.index(FWC) + 1]) if FWC in tokens else ""
            t = cut if cut and is_valid_subject(cut) else "\x00never"  # a token no valid subject holds
        indexed.append(t)
    if all(_is_literal(t) for t in indexed):  # literal filters contain one another only when equal
        counts = Counter(filters)
        return next((k for k, t in enumerate(filters) if counts[t] > 1), -1)
    index = CollisionIndex(indexed)
    for i, s in enumerate(filters):
        if not is_valid_subject(s):
            continue  # the caller stops here with "invalid subject"
        c = index.supersets(s) & ~(1 << i)
        while c:
            low = c & -c
            j = low.bit_length() - 1
            if subject_is_subset_match(s, filters[j]):
                return i
            c ^= low
    return -1


def any_collide(subjects: list[str], others: list[str]) -> bool:
    """Does any of ``subjects`` collide with any of ``others``? (jsAccount.subjectsOverlap; all valid)"""
    if not subjects or not others:
        return False
    if len(subjects) * len(others) <= 64:
        return any(subjects_collide(a, b) for a in others for b in subjects)
    olits = [s for s in others if _is_literal(s)]
    owilds = [s for s in others if not _is_literal(s)]
    lit_set = set(olits)
    windex = CollisionIndex(owilds) if owilds else None
    lindex = None
    for s in subjects:
        if _is_literal(s):
            if s in lit_set:
                return True
        else:
            if lindex is None:
                lindex = CollisionIndex(olits)
            if lindex.first_colliding(s) >= 0:
                return True
        if windex is not None and windex.first_colliding(s) >= 0:
            return True
    return False
