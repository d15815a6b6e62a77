"""Validation of subject transform destinations, as nats-server's stream config checks use it.

nats-server validates ``subject_transform``, source/mirror ``subject_transforms`` and ``republish`` with
``ValidateMapping`` / ``NewSubjectTransform`` (``server/subject_transform.go``).  Only the *checks* and their error
texts are reproduced here (returning the Go error text, or ``None``); applying a transform to a subject is the
server's business.  Error texts: ``invalid subject`` (ErrBadSubject) and ``invalid mapping destination: <why> in
<token>`` (mappingDestinationErr).
"""
from __future__ import annotations

import re

_BAD_SUBJECT = "invalid subject"
_PFX = "invalid mapping destination"
INVALID_TRANSFORM = f"{_PFX}: invalid transform"
UNKNOWN_FUNCTION = f"{_PFX}: unknown function"
INDEX_OUT_OF_RANGE = f"{_PFX}: wildcard index out of range"
NOT_ENOUGH_ARGS = f"{_PFX}: not enough arguments passed to the function"
INVALID_ARG = f"{_PFX}: function argument is invalid or in the wrong format"
TOO_MANY_ARGS = f"{_PFX}: too many arguments passed to the function"

_MAX_INT32 = (1 << 31) - 1


def _fn(name: str) -> re.Pattern[str]:
    pat = "".join(f"[{c.lower()}{c.upper()}]" if c.isupper() else c for c in name)
    return re.compile(r"{{\s*" + pat + r"\s*\((.*)\)\s*}}")


_WILDCARD = _fn("Wildcard")
_PARTITION = _fn("Partition")
_SPLIT_FROM_LEFT = _fn("SplitFromLeft")
_SPLIT_FROM_RIGHT = _fn("SplitFromRight")
_SLICE_FROM_LEFT = _fn("SliceFromLeft")
_SLICE_FROM_RIGHT = _fn("SliceFromRight")
_SPLIT = _fn("Split")
_LEFT = _fn("Left")
_RIGHT = _fn("Right")
_RANDOM = _fn("Random")
# ValidateMapping's list of functions: nats-server 2.15.1 has left() and right() in it (a stream with
# ``{{left(1,2)}}.{{right(2,1)}}`` is created and maps, tests/jetstream/test_publish_transform.py).
_KNOWN = (_PARTITION, _WILDCARD, _SPLIT_FROM_LEFT, _SPLIT_FROM_RIGHT, _SLICE_FROM_LEFT, _SLICE_FROM_RIGHT, _SPLIT,
          _LEFT, _RIGHT, _RANDOM)
_COMMA = re.compile(r",\s*")
_GO_INT = re.compile(r"[+-]?\d+")


class _MapErr(Exception):
    def __init__(self, why: str, token: str = "") -> None:
        super().__init__(f"{why} in {token}" if token else why)


def _args(rx: re.Pattern[str], token: str) -> list[str] | None:
    m = rx.search(token)  # Go's FindStringSubmatch: leftmost match anywhere in the token
    if m is None:
        return None
    return _COMMA.split(m.group(1))


def _atoi(s: str) -> int | None:
    s = s.strip(" ")
    return int(s) if _GO_INT.fullmatch(s) else None


def _index_int(token: str, args: list[str]) -> tuple[str, list[int]]:
    if len(args) < 2:
        raise _MapErr(NOT_ENOUGH_ARGS, token)
    if len(args) > 2:
        raise _MapErr(TOO_MANY_ARGS, token)
    i, n = _atoi(args[0]), _atoi(args[1])
    if i is None or n is None or not -(1 << 31) <= n <= _MAX_INT32:
        raise _MapErr(INVALID_ARG, token)
    return "fn", [i]


def _placeholders(token: str) -> tuple[str, list[int]]:
    """(kind, wildcard indexes): kind is none / wildcard / partition / random / fn."""
    ln = len(token)
    if ln > 1:
        if token[0] == "$":
            i = _atoi(token[1:]) if token[1:].strip(" ") == token[1:] else None
            return ("wildcard", [i]) if i is not None else ("none", [])
        if ln > 4 and token.startswith("{{") and token.endswith("}}"):
            a = _args(_WILDCARD, token)
            if a is not None:
                if len(a) == 1 and a[0] == "":
                    raise _MapErr(NOT_ENOUGH_ARGS, token)
                if len(a) != 1:
                    raise _MapErr(TOO_MANY_ARGS, token)
                i = _atoi(a[0])
                if i is None:
                    raise _MapErr(INVALID_ARG, token)
                return "wildcard", [i]
            a = _args(_PARTITION, token)
            if a is not None:
                n = _atoi(a[0])
                if n is None or n > _MAX_INT32:
                    raise _MapErr(INVALID_ARG, token)
                idx = []
                for t in a[1:]:
                    i = _atoi(t)
                    if i is None:
                        raise _MapErr(INVALID_ARG, token)
                    idx.append(i)
                return "partition", idx
            for rx in (_SPLIT_FROM_LEFT, _SPLIT_FROM_RIGHT, _SLICE_FROM_LEFT, _SLICE_FROM_RIGHT, _RIGHT, _LEFT):
                a = _args(rx, token)
                if a is not None:
                    return _index_int(token, a)
            a = _args(_SPLIT, token)
            if a is not None:
                if len(a) < 2:
                    raise _MapErr(NOT_ENOUGH_ARGS, token)
                if len(a) > 2:
                    raise _MapErr(TOO_MANY_ARGS, token)
                i = _atoi(a[0])
                if i is None or " " in a[1] or "." in a[1]:
                    raise _MapErr(INVALID_ARG, token)
                return "fn", [i]
            a = _args(_RANDOM, token)
            if a is not None:
                if len(a) != 1:
                    raise _MapErr(NOT_ENOUGH_ARGS, token)
                n = _atoi(a[0])
                if n is None or n > _MAX_INT32:
                    raise _MapErr(INVALID_ARG, token)
                return "random", []
            raise _MapErr(UNKNOWN_FUNCTION, token)
    return "none", []


def _subject_info(subject: str) -> tuple[bool, list[str], int, bool]:
    if not subject:
        return False, [], 0, False
    npwcs, sfwc = 0, False
    tokens = subject.split(".")
    for t in tokens:
        if not t or sfwc:
            return False, [], 0, False
        if t == ">":
            sfwc = True
        elif t == "*":
            npwcs += 1
    return True, tokens, npwcs, sfwc


def new_transform_error(src: str, dest: str) -> str | None:
    """``NewSubjectTransform(src, dest)``'s error text, or None when the transform is valid."""
    if not dest:
        return None
    if not src:
        src = ">"
    sv, _stoks, npwcs, has_fwc = _subject_info(src)
    dv, dtoks, dnpwcs, d_has_fwc = _subject_info(dest)
    if not sv or not dv or dnpwcs > 0 or has_fwc != d_has_fwc:
        return _BAD_SUBJECT
    try:
        for token in dtoks:
            kind, idx = _placeholders(token)
            if npwcs > 0 or has_fwc:
                if kind in ("none", "random"):
                    continue
                for i in idx:
                    if i > npwcs:
                        raise _MapErr(INDEX_OUT_OF_RANGE, f"{token}: [{i}]")
            elif kind not in ("none", "random", "partition"):
                raise _MapErr(INDEX_OUT_OF_RANGE, token)
    except _MapErr as e:
        return str(e)
    return None


def validate_mapping(src: str, dest: str) -> str | None:
    """``ValidateMapping(src, dest)``'s error text, or None."""
    if not dest:
        return None
    sfwc = False
    for t in dest.split("."):
        ln = len(t)
        if ln == 0 or sfwc:
            return f"{INVALID_TRANSFORM} in {t}" if t else INVALID_TRANSFORM + " in "
        if ln > 4 and t.startswith("{{") and t.endswith("}}"):
            if not any(rx.search(t) for rx in _KNOWN):
                return f"{UNKNOWN_FUNCTION} in {t}"
            continue
        if t == ">":
            sfwc = True
        elif any(c in t for c in "\t\n\f\r "):
            return INVALID_TRANSFORM
    return new_transform_error(src, dest)
