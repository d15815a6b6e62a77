"""Subject filters as the stores need them, from protocol.subjects (ADR-6; storage -> protocol is allowed).

``*`` matches exactly one token, ``>`` one or more trailing tokens; an empty filter or ``>`` selects everything.
"""
from __future__ import annotations

from skiff.protocol.subjects import is_all, is_literal, is_subset, subject_matches


def match(subject: str, filter_: str) -> bool:
    """True when the literal ``subject`` is selected by ``filter_`` (an empty filter selects everything)."""
    return filter_ == "" or subject_matches(filter_, subject)


def subset_match(filter_: str, other: str) -> bool:
    """True when every subject matched by ``filter_`` is also matched by ``other``."""
    return is_all(other) or is_subset(filter_, other)


__all__ = ["is_all", "is_literal", "match", "subset_match"]
