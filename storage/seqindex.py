"""The sequence index both stores share: chunks of per-sequence slots and the interned subject table.

Theory of operation
-------------------
Messages are numbered by sequence.  The index is a list of *chunks*; a chunk covers the contiguous sequences
``[first, end)`` and keeps one slot per sequence in flat arrays (nats-server keeps a map entry per message;
a Python object per message would cost ~150 bytes, these slots cost 16):

    codes  bytearray, 4 bytes per slot: the subject *code* of the message, or 00 00 00 00 once removed
    ts     array('q')  store timestamp (ns), kept after removal so the array stays sorted for time lookups
    sizes  array('I')  accounted size (nats-server's formula for the store type), 0 once removed

A subject code is ``FF d1 d2 d3`` with digits d < 255 (16.5 million live subjects at most).  0xFF appears
only as the first byte of a code, so every byte-string search in ``codes`` is aligned by construction:
``codes.find(code, 4*i)`` is "next message on this subject from slot i", ``codes.count(code, ...)`` counts
them, ``codes.find(0xFF, 4*i)`` is "next live message", all at C (memchr) speed with no per-slot Python work.

A slot is found with one bisect over the chunks' first sequences.  Chunks may leave gaps between them (big
skips, chunks dropped when they empty); a sequence in no chunk is simply not there.  The memory store adds
a payload list to its chunks; the file store's chunks are its block files and add record offsets.

Subjects are interned: ``_fss`` maps subject -> ``SubjState`` (msgs, first, last, code); ``_by_code`` maps the
code (as an int) back.  As in nats-server's memstore, a subject's first/last become stale when that message
is removed and are recomputed lazily (``_fix``).  Wildcard filters resolve to a set of codes, cached per filter
and kept up to date as subjects come and go.

Subjects a restart finds are *asleep* until something asks for them: recovery only records subject -> number
(``_lazy``), the number's subject (``_lz_subj``) and its count/first/last (``_lz_stats``), all built in C-level
batches, instead of a ``SubjState`` and two dict entries per subject (a Python object per subject made a restart
with 200,000 subjects cost ~0.25 s more than nats-server's).  ``_state`` / ``_state_of_code`` wake one subject (its
``SubjState`` is made from the recorded stats, with the code it was given at recovery); code that walks every
subject calls ``_wake_all`` first.  nats-server's file store likewise loads a block's per-subject state only when
it is needed (``fs.psim`` holds totals only, ``mb.fss`` is loaded on demand).
"""
from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from collections import Counter
from itertools import compress, count, islice
from typing import Iterator

from skiff.storage.errors import StoreError
from skiff.storage.subjects import is_all, is_literal, match

DELETED = b"\x00\x00\x00\x00"  # the code of a removed (or never stored) slot
LIVE = 0xFF  # first byte of every live slot's code
MAX_SUBJECTS = 255 ** 3
_WC_CACHE_MAX = 64
_STALE_FIRST, _STALE_LAST = 1, 2
_unpack_code = struct.Struct("<I").unpack_from
NO_COUNTS: Counter[int] = Counter()  # sentinel: this chunk does not cache per-subject counts
_SWAP = sys.byteorder != "little"


def code_bytes(n: int) -> bytes:
    """The 4-byte code of subject number ``n``."""
    return bytes((LIVE, n % 255, (n // 255) % 255, n // 65025))


def code_range(n: int, k: int) -> array:
    """The codes of subject numbers ``n .. n+k-1`` as ints (``array('I')``), built a byte column at a time."""
    buf = bytearray(4 * k)
    if k:
        buf[0::4] = b"\xff" * k
        d1 = n % 255
        buf[1::4] = (bytes(range(255)) * (k // 255 + 2))[d1:d1 + k]
        # d2 and d3 change every 255 and every 65025 numbers: one run of equal bytes per value.
        runs2, runs3 = [], []
        m = n
        while m < n + k:
            step = min(255 - m % 255, n + k - m)
            runs2.append(bytes(((m // 255) % 255,)) * step)
            m += step
        m = n
        while m < n + k:
            step = min(65025 - m % 65025, n + k - m)
            runs3.append(bytes((m // 65025,)) * step)
            m += step
        buf[2::4] = b"".join(runs2)
        buf[3::4] = b"".join(runs3)
    return code_ints(buf)


def code_ints(raw: bytes | bytearray | memoryview) -> array:
    """Codes as little-endian unsigned ints (0 for removed slots), for set-membership scans."""
    a = array("I")
    a.frombytes(raw)
    if _SWAP:
        a.byteswap()
    return a


class Chunk:
    """Slots for sequences ``first .. end-1``; see the module docstring.

    ``counts`` caches messages per subject code in this chunk (computed on first use by a pending count,
    then kept up to date on append/remove); ``NO_COUNTS`` marks a chunk with too many distinct subjects
    for the cache to pay off, where counts fall back to scanning the codes.
    """

    __slots__ = ("first", "codes", "ts", "sizes", "nlive", "counts")

    def __init__(self, first: int) -> None:
        self.first = first
        self.codes = bytearray()
        self.ts = array("q")
        self.sizes = array("I")
        self.nlive = 0
        self.counts: Counter[int] | None = None

    def subject_counts(self) -> Counter[int] | None:
        cnt = self.counts
        if cnt is None:
            cnt = Counter(code_ints(self.codes))
            cnt.pop(0, None)
            if len(cnt) > (len(self.codes) >> 5) + 16:
                cnt = NO_COUNTS
            self.counts = cnt
        return None if cnt is NO_COUNTS else cnt

    @property
    def end(self) -> int:
        """One past the last sequence this chunk has a slot for."""
        return self.first + (len(self.codes) >> 2)

    def nslots(self) -> int:
        return len(self.codes) >> 2

    def live(self, i: int) -> bool:
        return self.codes[i << 2] == LIVE

    def index_bytes(self) -> int:
        return len(self.codes) + 8 * len(self.ts) + 4 * len(self.sizes)


class SubjState:
    """Per-subject state; ``stale`` marks first/last as needing recomputation after a removal."""

    __slots__ = ("subject", "icode", "code", "enc", "msgs", "first", "last", "stale")

    def __init__(self, subject: str, n: int) -> None:
        # code_bytes(n) and its little-endian int, computed directly (a restart creates one per subject).
        q = n // 255
        self.icode = ic = LIVE | (n % 255) << 8 | (q % 255) << 16 | (q // 255) << 24
        self.code = ic.to_bytes(4, "little")
        self.subject = subject
        self.enc = subject.encode()
        self.msgs = self.first = self.last = self.stale = 0


class SeqIndex:
    """Index state and the slot/subject primitives; ``IndexedStore`` builds the store on top."""

    def _reset_index(self) -> None:
        self._chunks: list[Chunk] = []
        self._firsts: list[int] = []
        self._first_seq = 0
        self._last_seq = 0
        self._last_ts = 0
        self._msgs = 0
        self._bytes = 0
        self._fss: dict[str, SubjState] = {}
        self._by_code: dict[int, SubjState] = {}
        # Subjects recovered but not woken yet (module docstring): subject -> number, number -> subject, and
        # (msgs, first, last) per number.
        self._lazy: dict[str, int] = {}
        self._lz_subj: list[str] = []
        self._lz_stats = array("Q")
        self._next_code = 0
        self._free_codes: list[int] = []
        self._wc_cache: dict[str, set[int]] = {}
        self._ttl_heap: list[tuple[int, int]] = []
        self._ttl_never: set[int] = set()
        self._hot: dict = {}  # queries.py: the last messages of literal subjects, by sequence (HOT_MSG)
        self._hot_bytes = 0

    # ================================================================================================ subjects
    def _new_subject(self, subject: str) -> SubjState:
        if self._lazy and subject in self._lazy:  # asleep, not new (callers look up with _state first)
            return self._wake(subject, self._lazy[subject])
        if self._free_codes:
            n = self._free_codes.pop()
        else:
            n = self._next_code
            if n >= MAX_SUBJECTS:
                raise StoreError("too many subjects in one stream")
            self._next_code = n + 1
        ss = SubjState(subject, n)
        self._by_code[ss.icode] = ss
        self._fss[subject] = ss
        for f, codes in self._wc_cache.items():
            if match(subject, f):
                codes.add(ss.icode)
        return ss

    # ---------------------------------------------------------------------------------------- asleep subjects
    def _state(self, subject: str) -> SubjState | None:
        """The subject's state, waking it if a restart left it asleep; None when the stream has no such subject."""
        ss = self._fss.get(subject)
        if ss is None and self._lazy:
            n = self._lazy.get(subject)
            if n is not None:
                return self._wake(subject, n)
        return ss

    def _state_of_code(self, icode: int) -> SubjState | None:
        ss = self._by_code.get(icode)
        if ss is None and self._lazy:
            n = ((icode >> 8) & 0xFF) + 255 * ((icode >> 16) & 0xFF) + 65025 * (icode >> 24)
            if n < len(self._lz_subj):
                subject = self._lz_subj[n]
                if self._lazy.get(subject) == n:
                    return self._wake(subject, n)
        return ss

    def _wake(self, subject: str, n: int) -> SubjState:
        del self._lazy[subject]
        ss = SubjState(subject, n)
        st = self._lz_stats
        ss.msgs, ss.first, ss.last = st[3 * n], st[3 * n + 1], st[3 * n + 2]
        self._fss[subject] = ss
        self._by_code[ss.icode] = ss
        if not self._lazy:
            self._lz_subj, self._lz_stats = [], array("Q")
        return ss

    def _wake_all(self) -> None:
        """Wake every sleeping subject (before walking them all); one batch, as recovery used to."""
        lazy = self._lazy
        if not lazy:
            return
        subjects, ns = list(lazy), list(lazy.values())
        states = list(map(SubjState, subjects, ns))
        st = self._lz_stats
        for ss, n in zip(states, ns):
            ss.msgs, ss.first, ss.last = st[3 * n], st[3 * n + 1], st[3 * n + 2]
        self._fss.update(zip(subjects, states))
        self._by_code.update(zip([ss.icode for ss in states], states))
        self._lazy, self._lz_subj, self._lz_stats = {}, [], array("Q")

    def _subject_name(self, icode: int) -> str:
        """The subject of a live code, without waking it (block summaries)."""
        ss = self._by_code.get(icode)
        if ss is not None:
            return ss.subject
        return self._lz_subj[((icode >> 8) & 0xFF) + 255 * ((icode >> 16) & 0xFF) + 65025 * (icode >> 24)]

    def wake_some(self, limit: int) -> bool:
        """Wake up to ``limit`` asleep subjects in one batch; True while some are still asleep.

        The engine calls this in slices on the event loop after a restart, so the subjects are all awake a moment
        after the server started serving and no later request pays for waking thousands of them at once."""
        lazy = self._lazy
        if not lazy:
            return False
        if len(lazy) <= limit:
            self._wake_all()
            return False
        items = list(islice(lazy.items(), limit))
        subjects = [s for s, _ in items]
        ns = [n for _, n in items]
        states = list(map(SubjState, subjects, ns))
        st = self._lz_stats
        for ss, n in zip(states, ns):
            ss.msgs, ss.first, ss.last = st[3 * n], st[3 * n + 1], st[3 * n + 2]
        for s in subjects:
            del lazy[s]
        self._fss.update(zip(subjects, states))
        self._by_code.update(zip([ss.icode for ss in states], states))
        return True

    def _num_subjects(self) -> int:
        return len(self._fss) + len(self._lazy)

    def _sleep_subjects(self, subjects: list[str], stats: array) -> array:
        """Record ``subjects`` (all new to the store) asleep with their (msgs, first, last) ``stats``; their codes.

        Recovery only; numbers are handed out in order, so the codes of a batch are built from byte patterns
        (``code_range``) rather than one Python call per subject."""
        n = self._next_code
        k = len(subjects)
        if n + k > MAX_SUBJECTS:
            raise StoreError("too many subjects in one stream")
        gap = n - len(self._lz_subj)
        if gap:  # numbers handed out to awake subjects since the last batch (scanned blocks): keep n -> subject
            self._lz_subj.extend([""] * gap)
            self._lz_stats.extend(array("Q", bytes(24 * gap)))
        self._next_code = n + k
        self._lazy.update(zip(subjects, range(n, n + k)))
        self._lz_subj.extend(subjects)
        self._lz_stats.extend(stats)
        return code_range(n, k)

    def _new_subjects(self, subjects: list[str]) -> list[SubjState]:
        """``_new_subject`` for many subjects at once (recovery: a stream may hold hundreds of thousands)."""
        if self._free_codes or self._wc_cache:
            return [self._new_subject(s) for s in subjects]
        n = self._next_code
        if n + len(subjects) > MAX_SUBJECTS:
            raise StoreError("too many subjects in one stream")
        self._next_code = n + len(subjects)
        states = list(map(SubjState, subjects, range(n, n + len(subjects))))
        self._fss.update(zip(subjects, states))
        self._by_code.update(zip([ss.icode for ss in states], states))
        return states

    def _drop_subject(self, ss: SubjState) -> None:
        del self._fss[ss.subject]
        del self._by_code[ss.icode]
        c = ss.code
        self._free_codes.append(c[1] + 255 * c[2] + 65025 * c[3])
        for codes in self._wc_cache.values():
            codes.discard(ss.icode)

    def _subject_at(self, c: Chunk, i: int) -> SubjState | None:
        return self._state_of_code(_unpack_code(c.codes, i << 2)[0])

    def _match_codes(self, filter_: str) -> set[int]:
        codes = self._wc_cache.get(filter_)
        if codes is None:
            codes = {ss.icode for subj, ss in self._fss.items() if match(subj, filter_)}
            if self._lazy:  # asleep subjects match by name, without waking them
                lz = [n for subj, n in self._lazy.items() if match(subj, filter_)]
                codes.update(LIVE | (n % 255) << 8 | (n // 255 % 255) << 16 | (n // 65025) << 24 for n in lz)
            if len(self._wc_cache) >= _WC_CACHE_MAX:
                self._wc_cache.clear()
            self._wc_cache[filter_] = codes
        return codes

    def _match_states(self, filter_: str) -> list[SubjState]:
        if is_all(filter_):
            self._wake_all()
            return list(self._fss.values())
        if is_literal(filter_):
            ss = self._state(filter_)
            return [ss] if ss is not None else []
        if self._lazy:
            codes = self._match_codes(filter_)
            if len(codes) > 1024:  # many asleep subjects: one batch is cheaper than waking them one by one
                self._wake_all()
            return list(map(self._state_of_code, codes))
        by = self._by_code
        return [by[c] for c in self._match_codes(filter_)]

    def _fix(self, ss: SubjState) -> SubjState:
        """Recompute a stale first/last of a subject (nats-server recalculateForSubj)."""
        if ss.stale:
            if ss.stale & _STALE_FIRST:
                ss.first = self._next_code_at(ss.code, ss.first + 1, ss.last) or ss.last
            if ss.stale & _STALE_LAST:
                ss.last = self._prev_code_at(ss.code, ss.last - 1, ss.first) or ss.first
            ss.stale = 0
        return ss

    # ================================================================================================ slots
    def _locate(self, seq: int) -> tuple[Chunk | None, int]:
        chunks = self._chunks
        if not chunks:
            return None, 0
        c = chunks[-1]
        if seq < c.first:
            k = bisect_right(self._firsts, seq) - 1
            if k < 0:
                return None, 0
            c = chunks[k]
        i = seq - c.first
        if 0 <= i < len(c.codes) >> 2:
            return c, i
        return None, 0

    def _is_live(self, seq: int) -> bool:
        c, i = self._locate(seq)
        return c is not None and c.codes[i << 2] == LIVE

    def _chunks_from(self, seq: int) -> Iterator[Chunk]:
        k = bisect_right(self._firsts, seq) - 1
        return islice(self._chunks, max(k, 0), None)

    def _find(self, needle: int | bytes, seq: int, end: int) -> int:
        """First sequence in [seq, end] whose slot code starts with / equals ``needle``, or 0."""
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first) << 2
            hi = min(len(c.codes), (end - c.first + 1) << 2)
            if lo < hi:
                j = c.codes.find(needle, lo, hi)
                if j >= 0:
                    return c.first + (j >> 2)
        return 0

    def _rfind(self, needle: int | bytes, seq: int, floor: int) -> int:
        """Last sequence in [floor, seq] whose slot code starts with / equals ``needle``, or 0."""
        k = bisect_right(self._firsts, seq) - 1
        chunks = self._chunks
        while k >= 0:
            c = chunks[k]
            if c.end <= floor:
                break
            lo = max(0, floor - c.first) << 2
            hi = min(len(c.codes), (seq - c.first + 1) << 2)
            if lo < hi:
                j = c.codes.rfind(needle, lo, hi)
                if j >= 0:
                    return c.first + (j >> 2)
            k -= 1
        return 0

    def _count(self, needle: int | bytes, seq: int, end: int) -> int:
        n = 0
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first) << 2
            hi = min(len(c.codes), (end - c.first + 1) << 2)
            if lo < hi:
                n += c.codes.count(needle, lo, hi)
        return n

    def _count_subject(self, ss: SubjState, seq: int, end: int) -> int:
        """Messages of subject ``ss`` in [seq, end]: whole chunks from their counts, partial ones scanned."""
        n = 0
        code, icode = ss.code, ss.icode
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first) << 2
            full = len(c.codes)
            hi = min(full, (end - c.first + 1) << 2)
            if lo >= hi:
                continue
            cnt = c.subject_counts()
            if cnt is None:
                n += c.codes.count(code, lo, hi)
            elif hi - lo <= lo + full - hi:
                n += cnt.get(icode, 0) if lo == 0 and hi == full else c.codes.count(code, lo, hi)
            else:  # the part outside the range is shorter: count that and subtract
                n += cnt.get(icode, 0) - c.codes.count(code, 0, lo) - c.codes.count(code, hi, full)
        return n

    def _next_live(self, seq: int) -> int:
        return self._find(LIVE, seq, self._last_seq)

    def _prev_live(self, seq: int) -> int:
        return self._rfind(LIVE, seq, 0)

    def _next_code_at(self, code: bytes, seq: int, end: int) -> int:
        return self._find(code, seq, end)

    def _prev_code_at(self, code: bytes, seq: int, floor: int) -> int:
        return self._rfind(code, seq, floor)

    def _count_live(self, seq: int, end: int) -> int:
        n = 0
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first) << 2
            hi = min(len(c.codes), (end - c.first + 1) << 2)
            if lo == 0 and hi == len(c.codes):
                n += c.nlive
            elif lo < hi:
                n += c.codes.count(LIVE, lo, hi)
        return n

    def _scan_set(self, codes: set[int], seq: int, end: int) -> int:
        """First sequence in [seq, end] whose subject code is in ``codes`` (C-level iteration)."""
        contains = codes.__contains__
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first)
            hi = min(len(c.codes) >> 2, end - c.first + 1)
            if lo < hi:
                for j in compress(count(lo), map(contains, code_ints(c.codes[lo << 2:hi << 2]))):
                    return c.first + j
        return 0

    def _scan_set_back(self, codes: set[int], seq: int, floor: int) -> int:
        contains = codes.__contains__
        k = bisect_right(self._firsts, seq) - 1
        while k >= 0:
            c = self._chunks[k]
            if c.end <= floor:
                break
            lo = max(0, floor - c.first)
            hi = min(len(c.codes) >> 2, seq - c.first + 1)
            if lo < hi:
                ints = code_ints(c.codes[lo << 2:hi << 2])
                ints.reverse()
                for j in compress(range(hi - 1, lo - 1, -1), map(contains, ints)):
                    return c.first + j
            k -= 1
        return 0

    def _count_set(self, codes: set[int], seq: int, end: int) -> int:
        contains = codes.__contains__
        n = 0
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first)
            hi = min(len(c.codes) >> 2, end - c.first + 1)
            if lo < hi:
                cnt = c.subject_counts() if lo == 0 and hi == len(c.codes) >> 2 else None
                if cnt is not None:
                    n += sum(map(cnt.__getitem__, codes)) if len(codes) < len(cnt) else \
                        sum(v for k, v in cnt.items() if k in codes)
                else:
                    n += sum(map(contains, code_ints(c.codes[lo << 2:hi << 2])))
        return n
