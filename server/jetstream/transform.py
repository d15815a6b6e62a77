"""Subject transforms applied to subjects: a stream's ``subject_transform`` (on ingest) and ``republish``.

Theory of operation
-------------------
nats-server's ``subject_transform.go``: a transform is a source filter (``*`` / ``>`` wildcards, empty = ``>``) and
a destination whose tokens are literals or mapping functions.  :func:`new_transform` compiles the destination once
into per-token steps (literal, ``{{wildcard(n)}}`` / legacy ``$n``, ``partition``, ``splitFromLeft/Right``,
``sliceFromLeft/Right``, ``split``, ``left``, ``right``, ``random``); :meth:`SubjectTransform.match` maps a literal
subject that the source selects and returns None otherwise.  Wildcard numbers refer to the source's ``*`` tokens in
order; a trailing ``>`` in the destination copies the source's remaining tokens.  ``partition(n, w...)`` hashes the
selected tokens (or the whole subject) with FNV-1a 32 modulo n, as nats-server does, so partitions agree with it.

Validation and its error texts belong to :mod:`protocol.jsapi._transform` (the config checks run before a stream
exists); :func:`new_transform` returns None for a destination it cannot compile, which those checks rule out.
"""
from __future__ import annotations

import random
import re
from typing import NamedTuple

_COMMA = re.compile(r",\s*")
_GO_INT = re.compile(r"[+-]?\d+")
_MAX_INT32 = (1 << 31) - 1


def _fn(name: str) -> re.Pattern[str]:
    """nats-server's function regexes: each capital letter of the name matches either case."""
    pat = "".join(f"[{c.lower()}{c.upper()}]" if c.isupper() else c for c in name)
    return re.compile(r"{{\s*" + pat + r"\s*\((.*)\)\s*}}")


_FUNCS = {  # checked in nats-server's order (indexPlaceHolders)
    "wildcard": _fn("Wildcard"), "partition": _fn("Partition"), "splitFromLeft": _fn("SplitFromLeft"),
    "splitFromRight": _fn("SplitFromRight"), "sliceFromLeft": _fn("SliceFromLeft"),
    "sliceFromRight": _fn("SliceFromRight"), "right": _fn("Right"), "left": _fn("Left"), "split": _fn("Split"),
    "random": _fn("Random"),
}


class _Step(NamedTuple):
    kind: str  # literal | wildcard | partition | ... | random
    text: str = ""  # the literal token, or split's separator
    idx: tuple[int, ...] = ()  # source token positions
    n: int = 0  # the function's integer argument


def _atoi(s: str) -> int | None:
    s = s.strip(" ")
    return int(s) if _GO_INT.fullmatch(s) else None


def _placeholder(token: str) -> tuple[str, list[int], int, str] | None:
    """(kind, wildcard numbers, int arg, string arg) for one destination token; None when it is invalid."""
    if len(token) > 1 and token[0] == "$":
        i = _atoi(token[1:]) if token[1:] == token[1:].strip(" ") else None
        return ("wildcard", [i], 0, "") if i is not None else ("literal", [], 0, "")
    if len(token) > 4 and token.startswith("{{") and token.endswith("}}"):
        for kind, rx in _FUNCS.items():
            m = rx.search(token)
            if m is None:
                continue
            args = _COMMA.split(m.group(1))
            if kind == "wildcard":
                i = _atoi(args[0]) if len(args) == 1 and args[0] else None
                return None if i is None else ("wildcard", [i], 0, "")
            if kind == "partition":
                n = _atoi(args[0])
                idx = [_atoi(a) for a in args[1:]]
                if n is None or n > _MAX_INT32 or None in idx:
                    return None
                return "partition", idx, n, ""  # type: ignore[return-value]
            if kind == "split":
                i = _atoi(args[0])
                if len(args) != 2 or i is None or " " in args[1] or "." in args[1]:
                    return None
                return "split", [i], 0, args[1]
            if kind == "random":
                n = _atoi(args[0]) if len(args) == 1 else None
                return None if n is None or n > _MAX_INT32 else ("random", [], n, "")
            i, n = (_atoi(args[0]), _atoi(args[1])) if len(args) == 2 else (None, None)
            if i is None or n is None or n > _MAX_INT32:
                return None
            return kind, [i], n, ""
        return None
    return "literal", [], 0, ""


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _is_subset(tokens: list[str], src: list[str]) -> bool:
    for i, t in enumerate(src):
        if i >= len(tokens):
            return False
        if t == ">":
            return True
        if t != "*" and t != tokens[i]:
            return False
    return len(tokens) == len(src)


class SubjectTransform:
    def __init__(self, src: str, dest: str, steps: list[_Step]) -> None:
        self.src = src
        self.dest = dest
        self.stoks = src.split(".")
        self.dtoks = dest.split(".")
        self.steps = steps
        self._noop = src in ("", ">") and dest in ("", ">")

    def match(self, subject: str) -> str | None:
        """The transformed subject, or None when the source does not select ``subject``."""
        if self._noop:
            return subject
        tokens = subject.split(".")
        if any(not t for t in tokens):
            return None
        if self.src in ("", ">") or _is_subset(tokens, self.stoks):
            return self.apply(tokens)
        return None

    def apply(self, tokens: list[str]) -> str:
        out: list[str] = []
        last = len(self.steps) - 1
        for i, st in enumerate(self.steps):
            k = st.kind
            if k == "literal":
                if st.text == ">":
                    break
                out.append(st.text)
            elif k == "wildcard":
                if st.idx and st.idx[0] < len(tokens):
                    out.append(tokens[st.idx[0]])
            elif k == "partition":
                key = "".join(tokens[j] for j in st.idx) if st.idx else ".".join(tokens)
                out.append(str(_fnv32a(key.encode()) % st.n) if st.n else "0")
            elif k == "random":
                out.append(str(random.randrange(1 << 31) % st.n) if st.n else "0")
            else:
                out.append(_function(k, tokens[st.idx[0]], st.n, st.text))
            if i < last:
                out.append(".")
        if self.dtoks[-1] == ">":
            out.append(".".join(tokens[len(self.stoks) - 1:]))
        return "".join(out)


def _function(kind: str, tok: str, n: int, sep: str) -> str:
    ln = len(tok)
    if kind == "split":
        parts = tok.split(sep)
        out = []
        for j, p in enumerate(parts):
            if p:
                out.append(p)
            if j < len(parts) - 1 and parts[j + 1] and not (j == 0 and not p):
                out.append(".")
        return "".join(out)
    if not 0 < n < ln:
        return tok  # too small to split or slice at the requested size: unchanged
    if kind == "splitFromLeft":
        return tok[:n] + "." + tok[n:]
    if kind == "splitFromRight":
        return tok[:ln - n] + "." + tok[ln - n:]
    if kind == "left":
        return tok[:n]
    if kind == "right":
        return tok[ln - n:]
    if kind == "sliceFromLeft":
        return ".".join(tok[i:i + n] for i in range(0, ln, n))
    if kind == "sliceFromRight":
        r = ln % n
        parts = ([tok[:r]] if r else []) + [tok[i:i + n] for i in range(r, ln, n)]
        return ".".join(parts)
    return tok


def new_transform(src: str, dest: str) -> SubjectTransform | None:
    """Compile ``src -> dest`` (nats-server NewSubjectTransform); None for an empty or invalid destination."""
    if not dest:
        return None
    src = src or ">"
    stoks = src.split(".")
    npwcs = stoks.count("*")
    has_fwc = stoks[-1] == ">"
    if (dest.split(".")[-1] == ">") != has_fwc or "*" in dest.split("."):
        return None
    sti = {}
    for i, t in enumerate(stoks):
        if t == "*":
            sti[len(sti) + 1] = i
    steps: list[_Step] = []
    for token in dest.split("."):
        ph = _placeholder(token)
        if ph is None:
            return None
        kind, nums, n, text = ph
        if kind == "literal":
            steps.append(_Step("literal", token))
            continue
        if kind == "random":
            steps.append(_Step("random", n=n))
            continue
        if npwcs == 0 and not has_fwc:
            if kind != "partition":
                return None
            steps.append(_Step("partition", n=n))
            continue
        if any(x > npwcs for x in nums):
            return None
        steps.append(_Step(kind, text, tuple(sti.get(x, 0) for x in nums), n))
    return SubjectTransform(src, dest, steps)
