"""NATS subjects: validation and wildcard matching (nats-server sublist.go, ADR-6).

A subject is `.`-separated tokens, none empty, no whitespace.  `*` matches exactly one token and `>` one or more
trailing tokens; both are wildcards only as a whole token (`foo*` is a literal token) and `>` only as the last one.
"""
from __future__ import annotations

from functools import lru_cache

PWC = "*"
FWC = ">"
_WS = frozenset(" \t\r\n\f\v")


def _tokens_ok(subject: str) -> bool:
    if not subject or any(c in _WS for c in subject):
        return False
    return "" not in subject.split(".")


@lru_cache(maxsize=4096)
def is_valid_subject(subject: str) -> bool:
    """A subscription subject: wildcards allowed as whole tokens, `>` only last."""
    if not _tokens_ok(subject):
        return False
    tokens = subject.split(".")
    for i, t in enumerate(tokens):
        if t == FWC and i != len(tokens) - 1:
            return False
    return True


@lru_cache(maxsize=4096)
def is_valid_literal_subject(subject: str) -> bool:
    """A publish subject: valid and without wildcard tokens."""
    if not _tokens_ok(subject):
        return False
    return all(t not in (PWC, FWC) for t in subject.split("."))


@lru_cache(maxsize=4096)
def is_valid_client_sub_subject(subject: str) -> bool:
    """What nats-server accepts in a client SUB: Sublist.Insert's rule (sublist.go) - non-empty tokens, ``>`` only
    last - and no whitespace rule (IsValidSubject's is not applied there; space, tab, CR and LF cannot reach it
    anyway, the argument splitter removed them, but \\f and \\v are accepted)."""
    tokens = subject.split(".")
    for i, t in enumerate(tokens):
        if not t or (t == FWC and i != len(tokens) - 1):
            return False
    return True


@lru_cache(maxsize=4096)
def is_valid_client_pub_subject(subject: str) -> bool:
    """nats-server's pedantic publish check (sublist.go IsValidLiteralSubject): non-empty tokens, none of them a
    wildcard.  No whitespace rule: ``PUB a\\x0bb`` and ``PUB a\\rb 1`` pass (the splitter keeps those bytes)."""
    return all(t and t != PWC and t != FWC for t in subject.split("."))


def has_wildcard(subject: str) -> bool:
    return any(t in (PWC, FWC) for t in subject.split("."))


@lru_cache(maxsize=4096)
def _tokens(subject: str) -> tuple[str, ...]:
    return tuple(subject.split("."))


def is_all(filter_: str) -> bool:
    """An empty filter or ``>`` selects every subject (stream and consumer filters)."""
    return filter_ == "" or filter_ == FWC


@lru_cache(maxsize=4096)
def is_literal(subject: str) -> bool:
    if "*" not in subject and ">" not in subject:
        return True
    return not any(t == PWC or t == FWC for t in subject.split("."))


def subject_matches(filter_: str, subject: str) -> bool:
    """Does literal `subject` match `filter_` (which may hold wildcards)?"""
    if filter_ == subject or filter_ == FWC:
        return True
    ft = _tokens(filter_)
    st = subject.split(".")
    for i, f in enumerate(ft):
        if f == FWC:
            return len(st) > i
        if i >= len(st):
            return False
        if f != PWC and f != st[i]:
            return False
    return len(ft) == len(st)


def subjects_overlap(a: str, b: str) -> bool:
    """Could some literal subject match both `a` and `b`? (nats-server SubjectsCollide)"""
    at, bt = a.split("."), b.split(".")
    for i in range(max(len(at), len(bt))):
        x = at[i] if i < len(at) else None
        y = bt[i] if i < len(bt) else None
        if x == FWC or y == FWC:
            return (x is not None) and (y is not None)
        if x is None or y is None:
            return False
        if x != y and x != PWC and y != PWC:
            return False
    return True


def is_subset(sub: str, sup: str) -> bool:
    """Is every subject matched by `sub` also matched by `sup`?"""
    st, pt = sub.split("."), sup.split(".")
    for i, p in enumerate(pt):
        if p == FWC:
            return len(st) > i
        if i >= len(st):
            return False
        s = st[i]
        if s == FWC:
            return False
        if p == PWC:
            continue
        if s != p:
            return False
    return len(st) == len(pt)
