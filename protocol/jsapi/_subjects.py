"""Subject and name checks exactly as nats-server's JetStream config validation uses them.

These are private to protocol/jsapi on purpose: config validation must reproduce nats-server's quirks
(``sublist.go`` ``IsValidSubject``, ``subjectIsLiteral``, ``SubjectsCollide`` which only looks at a token's first
byte when the other side has wildcards, ``subjectIsSubsetMatch``; ``jetstream.go`` ``isValidName`` /
``isValidAssetName``), and the shared ``protocol.subjects`` module is free to be stricter or faster for routing.
"""
from __future__ import annotations

from functools import lru_cache

_WS = " \t\r\n\f"
PWC = "*"
FWC = ">"


def is_valid_name(name: str) -> bool:
    return bool(name) and not any(c in name for c in " \t\r\n\f.*>")


def is_valid_asset_name(name: str) -> bool:
    """Stream / consumer names: no whitespace, '.', '*', '>', path separators."""
    return bool(name) and not any(c in name for c in " \t\r\n\f.*>\\/")


@lru_cache(maxsize=4096)
def is_valid_subject(subject: str) -> bool:
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
