"""Subject filters as the stores need them: literal test and token-wise wildcard match (ADR-6).

``*`` matches exactly one token, ``>`` one or more trailing tokens.  An empty filter or ``>`` selects
everything.  Kept local to storage so the store has no import-time dependency on the protocol package.
"""
from __future__ import annotations

from functools import lru_cache


def is_all(filter_: str) -> bool:
    return filter_ == "" or filter_ == ">"


@lru_cache(maxsize=4096)
def is_literal(subject: str) -> bool:
    if "*" not in subject and ">" not in subject:
        return True
    return not any(t == "*" or t == ">" for t in subject.split("."))


@lru_cache(maxsize=4096)
def _tokens(filter_: str) -> tuple[str, ...]:
    return tuple(filter_.split("."))


def match(subject: str, filter_: str) -> bool:
    """True when the literal ``subject`` is selected by ``filter_`` (which may contain wildcards)."""
    if filter_ == subject or is_all(filter_):
        return True
    ft = _tokens(filter_)
    st = subject.split(".")
    n = len(ft)
    for i, f in enumerate(ft):
        if f == ">":
            return len(st) > i
        if i >= len(st):
            return False
        if f != "*" and f != st[i]:
            return False
    return len(st) == n


def subset_match(filter_: str, other: str) -> bool:
    """True when every subject matched by ``filter_`` is also matched by ``other`` (both may be wildcards)."""
    if is_all(other):
        return True
    ft, ot = _tokens(filter_), _tokens(other)
    for i, o in enumerate(ot):
        if o == ">":
            return len(ft) > i
        if i >= len(ft):
            return False
        f = ft[i]
        if f == ">":
            return False
        if o == "*":
            continue
        if f == "*" or f != o:
            return False
    return len(ft) == len(ot)
