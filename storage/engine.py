"""The engine both stores share: a chunked sequence index, per-subject state, limits and queries.

Theory of operation
-------------------
Messages are numbered by sequence.  The index is a list of *chunks*; a chunk covers the contiguous sequences
``[first, first + len(live))`` and keeps one slot per sequence in flat arrays (nats-server keeps a map per
message; Python objects per message would cost ~150 bytes, arrays cost ~21):

    live   bytearray      1 = message present, 0 = removed / never stored (skipped)
    sids   array('I')     subject id of the message, DELETED once removed
    ts     array('q')     store timestamp (ns), kept after removal so the array stays sorted for time lookups
    sizes  array('I')     accounted size (nats-server's formula for the store type), 0 once removed

A slot is found with one bisect over the chunks' first sequences.  Chunks may leave gaps between them (big
skips, chunks dropped when they empty); a sequence in no chunk is simply not there.  The memory store adds
a payload list to its chunks; the file store's chunks are its block files and add record offsets.

Subjects are interned: ``_fss`` maps subject -> ``SubjState`` (msgs, first, last, id), ``_sid_state`` maps id
-> ``SubjState``.  Because removed slots get the DELETED id, "next message on subject S from seq N" is one
``array.index`` call per chunk (C speed), counting is ``array.count`` on a slice, and "next live message" is
``bytearray.find``.  As in nats-server's memstore the per-subject first/last become stale on removal and are
recomputed lazily (``_fix``).  Wildcard filters resolve to a set of subject ids, cached per filter and kept
up to date as subjects come and go.

Limits follow nats-server (memstore.go storeRawMsg/enforce*): discard-new checks before the append, then
per-subject eviction, then max_msgs / max_bytes eviction of the oldest (discard old only).  Time-based
removal happens only in ``expire(now)``, driven by the server's timer with its clock.

A backend (memory or file) subclasses ``IndexedStore`` and implements the hooks in the "backend" section:
where a record goes, how it is read back, and how removals, skips and floors are made durable.
"""
from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from itertools import compress, count, islice
from typing import Iterable, Iterator

import structlog

from storage.base import Clock, ConsumerStore, Expired, StreamStore
from storage.config import NANOS, StoreConfig
from storage.errors import (
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MsgTooLargeError,
    SequenceMismatchError,
    StoreClosedError,
    TooManyResultsError,
)
from storage.records import LostStreamData, SimpleState, StoredMsg, StreamState
from storage.subjects import is_all, is_literal, match

log = structlog.get_logger("skiff.storage")

DELETED = 0xFFFFFFFF  # subject id of a removed slot
FILL_GAP_MAX = 1024  # a skip up to this many sequences is filled with empty slots, larger starts a new chunk
_SMALL_SET = 32  # wildcard matches up to this many subjects are resolved per subject, more by scanning
_WC_CACHE_MAX = 64
_STALE_FIRST, _STALE_LAST = 1, 2


class Chunk:
    """Slots for sequences ``first .. first+len(live)-1``; see the module docstring."""

    __slots__ = ("first", "live", "sids", "ts", "sizes", "nlive")

    def __init__(self, first: int) -> None:
        self.first = first
        self.live = bytearray()
        self.sids = array("I")
        self.ts = array("q")
        self.sizes = array("I")
        self.nlive = 0

    @property
    def end(self) -> int:
        """One past the last sequence this chunk has a slot for."""
        return self.first + len(self.live)

    def index_bytes(self) -> int:
        return len(self.live) + self.sids.itemsize * len(self.sids) + 8 * len(self.ts) + 4 * len(self.sizes)


class SubjState:
    """Per-subject state; ``stale`` marks first/last as needing recomputation after a removal."""

    __slots__ = ("subject", "sid", "enc", "msgs", "first", "last", "stale")

    def __init__(self, subject: str, sid: int) -> None:
        self.subject = subject
        self.sid = sid
        self.enc = subject.encode()
        self.msgs = 0
        self.first = 0
        self.last = 0
        self.stale = 0


class IndexedStore(StreamStore):
    """Everything but the backend: see the module docstring."""

    def __init__(self, config: StoreConfig | None = None, clock: Clock | None = None) -> None:
        import time

        self.config = config or StoreConfig()
        self._clock: Clock = clock or time.time_ns
        self.on_remove = None
        self._closed = False
        self._reset_index()
        self._lost_msgs: list[int] = []
        self._lost_bytes = 0

    def _reset_index(self) -> None:
        self._chunks: list[Chunk] = []
        self._firsts: list[int] = []
        self._first_seq = 0
        self._last_seq = 0
        self._last_ts = 0
        self._msgs = 0
        self._bytes = 0
        self._fss: dict[str, SubjState] = {}
        self._sid_state: list[SubjState | None] = []
        self._free_sids: list[int] = []
        self._wc_cache: dict[str, set[int]] = {}
        self._ttl_heap: list[tuple[int, int]] = []
        self._ttl_never: set[int] = set()

    # ================================================================================================ backend
    def _msg_size(self, slen: int, hlen: int, dlen: int) -> int:
        raise NotImplementedError

    def _new_chunk(self, first: int) -> Chunk:
        return Chunk(first)

    def _chunk_full(self, chunk: Chunk, size: int) -> bool:
        raise NotImplementedError

    def _write_msg(self, chunk: Chunk, seq: int, ss: SubjState, hdr: bytes, data: bytes, ts: int, ttl: int) -> None:
        """Persist/keep the payload of the slot about to be appended to ``chunk``."""
        raise NotImplementedError

    def _fill_gap(self, chunk: Chunk, n: int) -> None:
        """``n`` empty slots are about to be appended to ``chunk``."""

    def _read(self, chunk: Chunk, i: int, seq: int) -> StoredMsg | None:
        raise NotImplementedError

    def _record_removal(self, chunk: Chunk, i: int, seq: int, secure: bool) -> None:
        """Slot ``i`` of ``chunk`` was just removed (already cleared in the index)."""

    def _record_skip(self, seq: int, num: int, ts: int) -> None:
        """Sequences ``seq .. seq+num-1`` were consumed without a message."""

    def _record_floor(self, seq: int) -> None:
        """Everything below ``seq`` was removed in bulk (purge / compact)."""

    def _drop_chunk(self, chunk: Chunk) -> None:
        """``chunk`` left the index (emptied, purged or compacted away)."""

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    # ================================================================================================ subjects
    def _new_subject(self, subject: str) -> SubjState:
        if self._free_sids:
            sid = self._free_sids.pop()
            ss = SubjState(subject, sid)
            self._sid_state[sid] = ss
        else:
            sid = len(self._sid_state)
            ss = SubjState(subject, sid)
            self._sid_state.append(ss)
        self._fss[subject] = ss
        for f, sids in self._wc_cache.items():
            if match(subject, f):
                sids.add(sid)
        return ss

    def _drop_subject(self, ss: SubjState) -> None:
        del self._fss[ss.subject]
        self._sid_state[ss.sid] = None
        self._free_sids.append(ss.sid)
        for sids in self._wc_cache.values():
            sids.discard(ss.sid)

    def _match_sids(self, filter_: str) -> set[int]:
        sids = self._wc_cache.get(filter_)
        if sids is None:
            sids = {ss.sid for subj, ss in self._fss.items() if match(subj, filter_)}
            if len(self._wc_cache) >= _WC_CACHE_MAX:
                self._wc_cache.clear()
            self._wc_cache[filter_] = sids
        return sids

    def _match_states(self, filter_: str) -> list[SubjState]:
        if is_all(filter_):
            return list(self._fss.values())
        if is_literal(filter_):
            ss = self._fss.get(filter_)
            return [ss] if ss is not None else []
        st = self._sid_state
        return [st[s] for s in self._match_sids(filter_)]  # type: ignore[misc]

    def _fix(self, ss: SubjState) -> SubjState:
        """Recompute a stale first/last of a subject (nats-server recalculateForSubj)."""
        if ss.stale:
            if ss.stale & _STALE_FIRST:
                ss.first = self._next_sid(ss.sid, ss.first + 1, ss.last) or ss.last
            if ss.stale & _STALE_LAST:
                ss.last = self._prev_sid(ss.sid, ss.last - 1, ss.first) or ss.first
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
        if i < len(c.live):
            return c, i
        return None, 0

    def _is_live(self, seq: int) -> bool:
        c, i = self._locate(seq)
        return c is not None and c.live[i] == 1

    def _chunks_from(self, seq: int) -> Iterator[Chunk]:
        k = bisect_right(self._firsts, seq) - 1
        return islice(self._chunks, max(k, 0), None)

    def _next_live(self, seq: int) -> int:
        """First live sequence >= seq, or 0."""
        for c in self._chunks_from(seq):
            j = c.live.find(1, max(0, seq - c.first))
            if j >= 0:
                return c.first + j
        return 0

    def _prev_live(self, seq: int) -> int:
        """Last live sequence <= seq, or 0."""
        k = bisect_right(self._firsts, seq) - 1
        chunks = self._chunks
        while k >= 0:
            c = chunks[k]
            j = c.live.rfind(1, 0, min(len(c.live), seq - c.first + 1))
            if j >= 0:
                return c.first + j
            k -= 1
        return 0

    def _next_sid(self, sid: int, seq: int, end: int) -> int:
        """First sequence in [seq, end] holding subject ``sid``, or 0."""
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first)
            hi = min(len(c.sids), end - c.first + 1)
            if lo < hi:
                try:
                    return c.first + c.sids.index(sid, lo, hi)
                except ValueError:
                    pass
        return 0

    def _prev_sid(self, sid: int, seq: int, floor: int) -> int:
        """Last sequence in [floor, seq] holding subject ``sid``, or 0."""
        pat = array("I", (sid,)).tobytes()
        k = bisect_right(self._firsts, seq) - 1
        chunks = self._chunks
        while k >= 0:
            c = chunks[k]
            if c.end <= floor:
                break
            lo = max(0, floor - c.first)
            hi = min(len(c.sids), seq - c.first + 1)
            if lo < hi:
                b = c.sids[lo:hi].tobytes()
                pos = b.rfind(pat)
                while pos > 0 and pos % 4:
                    pos = b.rfind(pat, 0, pos + 3)
                if pos >= 0:
                    return c.first + lo + pos // 4
            k -= 1
        return 0

    def _scan_set(self, sids: set[int], seq: int, end: int) -> int:
        """First sequence in [seq, end] whose subject id is in ``sids`` (C-level iteration)."""
        contains = sids.__contains__
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo = max(0, seq - c.first)
            hi = min(len(c.sids), end - c.first + 1)
            for j in compress(count(lo), map(contains, islice(c.sids, lo, hi))):
                return c.first + j
        return 0

    def _scan_set_back(self, sids: set[int], seq: int, floor: int) -> int:
        contains = sids.__contains__
        k = bisect_right(self._firsts, seq) - 1
        while k >= 0:
            c = self._chunks[k]
            if c.end <= floor:
                break
            lo = max(0, floor - c.first)
            hi = min(len(c.sids), seq - c.first + 1)
            if lo < hi:
                for j in compress(range(hi - 1, lo - 1, -1), map(contains, reversed(c.sids[lo:hi]))):
                    return c.first + j
            k -= 1
        return 0

    def _count_live(self, seq: int, end: int) -> int:
        n = 0
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            n += c.live.count(1, max(0, seq - c.first), max(0, min(len(c.live), end - c.first + 1)))
        return n

    def _count_sid(self, sid: int, seq: int, end: int) -> int:
        n = 0
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo, hi = max(0, seq - c.first), min(len(c.sids), end - c.first + 1)
            if lo < hi:
                n += c.sids[lo:hi].count(sid)
        return n

    def _count_set(self, sids: set[int], seq: int, end: int) -> int:
        contains = sids.__contains__
        n = 0
        for c in self._chunks_from(seq):
            if c.first > end:
                break
            lo, hi = max(0, seq - c.first), min(len(c.sids), end - c.first + 1)
            if lo < hi:
                n += sum(map(contains, c.sids[lo:hi]))
        return n

    # ================================================================================================ append
    def _open_chunk(self, seq: int) -> Chunk:
        c = self._new_chunk(seq)
        self._chunks.append(c)
        self._firsts.append(seq)
        return c

    def _chunk_for_append(self, seq: int, size: int) -> Chunk:
        chunks = self._chunks
        if chunks:
            c = chunks[-1]
            gap = seq - c.end
            if gap == 0:
                if not self._chunk_full(c, size):
                    return c
            elif 0 < gap <= FILL_GAP_MAX and not self._chunk_full(c, size):
                self._fill_gap(c, gap)
                last_ts = c.ts[-1] if c.ts else self._last_ts
                c.live.extend(bytes(gap))
                c.sids.extend(array("I", [DELETED]) * gap)
                c.ts.extend(array("q", [last_ts]) * gap)
                c.sizes.extend(array("I", [0]) * gap)
                return c
        return self._open_chunk(seq)

    def _append(self, seq: int, subject: str, ss: SubjState | None, hdr: bytes, data: bytes, ts: int, ttl: int) -> SubjState:
        if ss is None:
            ss = self._new_subject(subject)
        size = self._msg_size(len(ss.enc), len(hdr), len(data))
        c = self._chunk_for_append(seq, size)
        self._write_msg(c, seq, ss, hdr, data, ts, ttl)
        c.live.append(1)
        c.sids.append(ss.sid)
        c.ts.append(ts)
        c.sizes.append(size)
        c.nlive += 1
        if self._msgs == 0:
            self._first_seq = seq
        self._msgs += 1
        self._bytes += size
        self._last_seq = seq
        self._last_ts = ts
        if ss.msgs == 0:
            ss.first = seq
        ss.msgs += 1
        ss.last = seq
        ss.stale &= ~_STALE_LAST
        if ttl:
            if ttl > 0:
                heapq.heappush(self._ttl_heap, (ts + ttl * NANOS, seq))
            else:
                self._ttl_never.add(seq)
        return ss

    def _check_discard_new(self, ss: SubjState | None, subject: str, hdr: bytes, data: bytes) -> None:
        """nats-server memstore.storeRawMsg discard-new checks, in the same order."""
        cfg = self.config
        maxp = cfg.max_msgs_per_subject
        asl = ss is not None and maxp > 0 and ss.msgs >= maxp
        if asl and cfg.discard_new_per_subject and b"Nats-Rollup" not in hdr:
            raise MaxMsgsPerSubjectError()
        if cfg.max_msgs > 0 and self._msgs >= cfg.max_msgs and not asl:
            raise MaxMsgsError()
        if cfg.max_bytes > 0:
            slen = len(ss.enc) if ss is not None else len(subject.encode())
            size = self._msg_size(slen, len(hdr), len(data))
            if self._bytes + size > cfg.max_bytes:
                if not asl:
                    raise MaxBytesError()
                # At the subject limit the append replaces the subject's oldest: is that enough room?
                self._fix(ss)  # type: ignore[arg-type]
                c, i = self._locate(ss.first)  # type: ignore[union-attr]
                if c is None or c.sizes[i] < size:
                    raise MaxBytesError()

    def _enforce_limits(self, ss: SubjState | None) -> None:
        cfg = self.config
        maxp = cfg.max_msgs_per_subject
        if ss is not None and maxp > 0 and ss.msgs > maxp:
            while ss.msgs > maxp:
                if not self._remove(self._fix(ss).first):
                    break
        if cfg.discard == "old":
            if cfg.max_msgs > 0:
                while self._msgs > cfg.max_msgs:
                    if not self._remove(self._first_seq):
                        break
            if cfg.max_bytes > 0:
                while self._bytes > cfg.max_bytes:
                    if not self._remove(self._first_seq):
                        break

    def store_msg(self, subject: str, hdr: bytes, data: bytes, ts: int | None = None, ttl: int = 0) -> int:
        if self._closed:
            raise StoreClosedError()
        if ts is None:
            ts = self._clock()
        cfg = self.config
        if cfg.max_msg_size > 0 and len(hdr) + len(data) > cfg.max_msg_size:
            raise MsgTooLargeError()
        ss = self._fss.get(subject)
        if cfg.discard == "new":
            self._check_discard_new(ss, subject, hdr, data)
        seq = self._last_seq + 1
        ss = self._append(seq, subject, ss, hdr, data, ts, ttl)
        self._enforce_limits(ss)
        return seq

    def store_raw(self, seq: int, subject: str, hdr: bytes, data: bytes, ts: int, ttl: int = 0,
                  discard_new_check: bool = False) -> None:
        self._check_open()
        ss = self._fss.get(subject)
        if discard_new_check and self.config.discard == "new":
            self._check_discard_new(ss, subject, hdr, data)
        if seq != self._last_seq + 1:
            if seq > 0:
                raise SequenceMismatchError()
            seq = self._last_seq + 1
        ss = self._append(seq, subject, ss, hdr, data, ts, ttl)
        self._enforce_limits(ss)

    def skip_msg(self, seq: int = 0, ts: int | None = None) -> int:
        self._check_open()
        if seq != self._last_seq + 1:
            if seq > 0:
                raise SequenceMismatchError()
            seq = self._last_seq + 1
        self._skip(seq, 1, ts)
        return seq

    def skip_msgs(self, seq: int, num: int) -> None:
        self._check_open()
        if seq != self._last_seq + 1:
            if seq > 0:
                raise SequenceMismatchError()
            seq = self._last_seq + 1
        if num > 0:
            self._skip(seq, num, None)

    def _skip(self, seq: int, num: int, ts: int | None) -> None:
        last = seq + num - 1
        self._last_seq = last
        if ts is not None or self._last_ts == 0:
            self._last_ts = ts if ts is not None else self._clock()
        if self._msgs == 0:
            self._first_seq = last + 1
        self._record_skip(seq, num, self._last_ts)

    # ================================================================================================ removal
    def _remove(self, seq: int, secure: bool = False, notify: bool = True) -> SubjState | None:
        """Remove one live message; returns its subject state (``msgs == 0``: it was the last) or None."""
        c, i = self._locate(seq)
        if c is None or not c.live[i]:
            return None
        ss = self._sid_state[c.sids[i]]
        assert ss is not None
        c.live[i] = 0
        c.sids[i] = DELETED
        self._bytes -= c.sizes[i]
        c.sizes[i] = 0
        c.nlive -= 1
        self._msgs -= 1
        if self._ttl_never:
            self._ttl_never.discard(seq)
        self._record_removal(c, i, seq, secure)
        ss.msgs -= 1
        if ss.msgs == 0:
            self._drop_subject(ss)
        else:
            if seq == ss.first:
                ss.stale |= _STALE_FIRST
            if seq == ss.last:
                ss.stale |= _STALE_LAST
        if seq == self._first_seq:
            nxt = self._next_live(seq + 1)
            self._first_seq = nxt or self._last_seq + 1
        if c.nlive == 0 and c is not self._chunks[-1]:
            self._remove_chunk(c)
        if notify and self.on_remove is not None:
            self.on_remove(seq, ss.subject)
        return ss

    def _remove_chunk(self, c: Chunk) -> None:
        k = bisect_left(self._firsts, c.first)
        if k < len(self._chunks) and self._chunks[k] is c:
            del self._chunks[k]
            del self._firsts[k]
            self._drop_chunk(c)

    def remove_msg(self, seq: int) -> bool:
        self._check_open()
        return self._remove(seq) is not None

    def erase_msg(self, seq: int) -> bool:
        self._check_open()
        return self._remove(seq, secure=True) is not None

    def _bulk_remove_below(self, seq: int) -> int:
        """Remove every live message below ``seq`` without per-message callbacks; returns the count."""
        purged = 0
        dec: Counter[int] = Counter()
        while self._chunks and self._chunks[0].end <= seq and len(self._chunks) > 1:
            c = self._chunks[0]
            dec.update(c.sids)
            purged += c.nlive
            self._bytes -= sum(c.sizes)
            self._msgs -= c.nlive
            c.nlive = 0
            del self._chunks[0]
            del self._firsts[0]
            self._drop_chunk(c)
        if self._chunks and self._chunks[0].first < seq:
            c = self._chunks[0]
            hi = min(len(c.live), seq - c.first)
            n = c.live.count(1, 0, hi)
            if n:
                dec.update(c.sids[:hi])
                purged += n
                self._bytes -= sum(c.sizes[:hi])
                self._msgs -= n
                c.nlive -= n
                c.live[:hi] = bytes(hi)
                c.sids[:hi] = array("I", [DELETED]) * hi
                c.sizes[:hi] = array("I", [0]) * hi
        dec.pop(DELETED, None)
        for sid, n in dec.items():
            ss = self._sid_state[sid]
            assert ss is not None
            ss.msgs -= n
            if ss.msgs <= 0:
                self._drop_subject(ss)
            else:
                ss.stale |= _STALE_FIRST
        if self._ttl_never:
            self._ttl_never = {s for s in self._ttl_never if s >= seq}
        return purged

    def _reset_to(self, floor: int) -> int:
        """Drop everything; the next sequence will be ``max(last_seq + 1, floor)``."""
        purged = self._msgs
        old = self._chunks
        last_seq, last_ts = self._last_seq, self._last_ts
        self._reset_index()
        for c in old:
            self._drop_chunk(c)
        self._first_seq = floor
        self._last_seq = max(last_seq, floor - 1)
        self._last_ts = last_ts
        self._lost_msgs, self._lost_bytes = [], 0
        self._record_floor(floor)
        return purged

    def purge(self, subject: str | None = None, seq: int = 0, keep: int = 0) -> int:
        """nats-server memstore.PurgeEx, step by step."""
        self._check_open()
        if seq == 1:
            return 0
        if subject is None or is_all(subject):
            if keep == 0 and seq == 0:
                return self._reset_to(self._last_seq + 1)
            if seq > 1:
                return self.compact(seq)
            subject = ">"
        ss = self.filtered_state(1, subject)
        if ss.msgs == 0:
            return 0
        maxp = 0
        if keep > 0:
            if keep >= ss.msgs:
                return 0
            maxp = ss.msgs - keep
        last = ss.last if seq == 0 else seq - 1
        purged = 0
        for s in list(self._iter_matching(subject, ss.first, last, maxp)):
            if self._remove(s, notify=False) is not None:
                purged += 1
        return purged

    def compact(self, seq: int) -> int:
        self._check_open()
        if seq == 0:
            return self._reset_to(self._last_seq + 1)
        if self._first_seq > seq:
            return 0
        if seq > self._last_seq:
            return self._reset_to(seq)
        purged = self._bulk_remove_below(seq)
        self._first_seq = self._next_live(seq) or self._last_seq + 1
        self._record_floor(seq)
        return purged

    def _iter_matching(self, filter_: str, start: int, end: int, limit: int = 0) -> Iterator[int]:
        n = 0
        seq = self._next_match(filter_, start, end)
        while seq:
            yield seq
            n += 1
            if limit and n >= limit:
                return
            seq = self._next_match(filter_, seq + 1, end)

    # ================================================================================================ expiry
    def expire(self, now: int | None = None) -> list[Expired]:
        self._check_open()
        if now is None:
            now = self._clock()
        out: list[Expired] = []
        want_hdr = self.config.subject_delete_marker_ttl > 0
        max_age = self.config.max_age
        if max_age > 0 and self._msgs:
            min_ts = now - max_age
            seq = self._first_seq
            while seq:
                c, i = self._locate(seq)
                if c is None or c.ts[i] > min_ts:
                    break
                if seq not in self._ttl_never:
                    self._expire_one(seq, out, want_hdr)
                seq = self._next_live(seq + 1)
        heap = self._ttl_heap
        while heap and heap[0][0] <= now:
            _, seq = heapq.heappop(heap)
            if self._is_live(seq):
                self._expire_one(seq, out, want_hdr)
        return out

    def _expire_one(self, seq: int, out: list[Expired], want_hdr: bool) -> None:
        hdr = b""
        if want_hdr:
            m = self.load_msg(seq)
            hdr = m.hdr if m is not None else b""
        ss = self._remove(seq)
        if ss is not None:
            out.append(Expired(seq, ss.subject, ss.msgs == 0, hdr))

    def next_expiry(self) -> int | None:
        t: int | None = None
        max_age = self.config.max_age
        if max_age > 0 and self._msgs:
            seq = self._first_seq
            while seq and seq in self._ttl_never:
                seq = self._next_live(seq + 1)
            if seq:
                c, i = self._locate(seq)
                if c is not None:
                    t = c.ts[i] + max_age
        heap = self._ttl_heap
        while heap and not self._is_live(heap[0][1]):
            heapq.heappop(heap)
        if heap and (t is None or heap[0][0] < t):
            t = heap[0][0]
        return t

    # ================================================================================================ loads
    def _next_match(self, filter_: str, start: int, end: int = 0) -> int:
        """First live sequence in [start, end or last] whose subject matches ``filter_``, or 0."""
        if end <= 0 or end > self._last_seq:
            end = self._last_seq
        if start < self._first_seq:
            start = self._first_seq
        if start > end or self._msgs == 0:
            return 0
        if is_all(filter_):
            s = self._next_live(start)
            return s if s and s <= end else 0
        if is_literal(filter_):
            ss = self._fss.get(filter_)
            if ss is None:
                return 0
            self._fix(ss)
            if ss.last < start or ss.first > end:
                return 0
            if ss.first >= start:
                return ss.first
            return self._next_sid(ss.sid, start, min(end, ss.last))
        sids = self._match_sids(filter_)
        if not sids:
            return 0
        if len(sids) > _SMALL_SET:
            return self._scan_set(sids, start, end)
        best = 0
        for sid in sids:
            ss = self._fix(self._sid_state[sid])  # type: ignore[arg-type]
            if ss.last < start or ss.first > end:
                continue
            cand = ss.first if ss.first >= start else self._next_sid(sid, start, min(end, ss.last))
            if cand and (best == 0 or cand < best):
                best = cand
        return best

    def _last_match(self, filter_: str, end: int = 0) -> int:
        """Last live sequence <= end (default last) matching ``filter_``, or 0."""
        if end <= 0 or end > self._last_seq:
            end = self._last_seq
        if self._msgs == 0 or end < self._first_seq:
            return 0
        if is_all(filter_):
            return self._prev_live(end)
        if is_literal(filter_):
            ss = self._fss.get(filter_)
            if ss is None:
                return 0
            self._fix(ss)
            if ss.first > end:
                return 0
            return ss.last if ss.last <= end else self._prev_sid(ss.sid, end, ss.first)
        sids = self._match_sids(filter_)
        if not sids:
            return 0
        if len(sids) > _SMALL_SET:
            return self._scan_set_back(sids, end, self._first_seq)
        best = 0
        for sid in sids:
            ss = self._fix(self._sid_state[sid])  # type: ignore[arg-type]
            if ss.first > end:
                continue
            cand = ss.last if ss.last <= end else self._prev_sid(sid, end, ss.first)
            best = max(best, cand)
        return best

    def _load_slot(self, seq: int) -> StoredMsg | None:
        c, i = self._locate(seq)
        if c is None or not c.live[i]:
            return None
        return self._read(c, i, seq)

    def load_msg(self, seq: int) -> StoredMsg | None:
        self._check_open()
        return self._load_slot(seq)

    def load_next_msg(self, filter: str = "", start_seq: int = 0) -> tuple[StoredMsg | None, int]:
        self._check_open()
        seq = self._next_match(filter, start_seq)
        while seq:
            m = self._load_slot(seq)
            if m is not None:
                return m, seq
            seq = self._next_match(filter, seq + 1)  # unreadable record: it was dropped as lost, go on
        return None, self._last_seq

    def load_last_msg(self, filter: str = "") -> StoredMsg | None:
        self._check_open()
        seq = self._last_match(filter)
        while seq:
            m = self._load_slot(seq)
            if m is not None:
                return m
            seq = self._last_match(filter, seq - 1) if seq > 1 else 0
        return None

    def load_prev_msg(self, filter: str, start_seq: int) -> StoredMsg | None:
        self._check_open()
        seq = self._last_match(filter, start_seq) if start_seq > 0 else 0
        while seq:
            m = self._load_slot(seq)
            if m is not None:
                return m
            seq = self._last_match(filter, seq - 1) if seq > 1 else 0
        return None

    def subject_for_seq(self, seq: int) -> str | None:
        c, i = self._locate(seq)
        if c is None or not c.live[i]:
            return None
        ss = self._sid_state[c.sids[i]]
        return ss.subject if ss is not None else None

    def get_seq_from_time(self, ts: int) -> int:
        if self._msgs == 0:
            return self._last_seq + 1
        if ts <= self._first_ts():
            return self._first_seq
        if ts > self._last_ts:
            return self._last_seq + 1
        for c in self._chunks:
            if c.ts and c.ts[-1] >= ts:
                j = bisect_left(c.ts, ts)
                s = self._next_live(c.first + j)
                if s:
                    return s
        return self._last_seq + 1

    # ================================================================================================ state
    @property
    def first_seq(self) -> int:
        return self._first_seq

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def msgs(self) -> int:
        return self._msgs

    @property
    def bytes(self) -> int:
        return self._bytes

    def _first_ts(self) -> int:
        c, i = self._locate(self._first_seq)
        return c.ts[i] if c is not None and c.live[i] else 0

    def _num_deleted(self) -> int:
        if self._first_seq == 0 or self._last_seq < self._first_seq:
            return 0
        return max(0, self._last_seq - self._first_seq + 1 - self._msgs)

    def _deleted_list(self) -> list[int]:
        first, last = self._first_seq, self._last_seq
        out: list[int] = []
        cur = first
        for c in self._chunks:
            if c.end <= cur:
                continue
            if c.first > last:
                break
            if c.first > cur:
                out.extend(range(cur, c.first))
                cur = c.first
            hi = min(last + 1, c.end) - c.first
            live = c.live
            j = live.find(0, cur - c.first, hi)
            while j >= 0:
                out.append(c.first + j)
                j = live.find(0, j + 1, hi)
            cur = c.first + hi
        if cur <= last:
            out.extend(range(cur, last + 1))
        return out

    def state(self, deleted_details: bool = False, subjects_filter: str | None = None) -> StreamState:
        st = StreamState(
            messages=self._msgs,
            bytes=self._bytes,
            first_seq=self._first_seq,
            first_ts=self._first_ts(),
            last_seq=self._last_seq,
            last_ts=self._last_ts,
            num_subjects=len(self._fss),
            num_deleted=self._num_deleted(),
        )
        if deleted_details and st.num_deleted:
            st.deleted = self._deleted_list()
        if subjects_filter is not None:
            st.subjects = self.subjects_totals(subjects_filter)
        if self._lost_msgs:
            st.lost = LostStreamData(list(self._lost_msgs), self._lost_bytes)
        return st

    def filtered_state(self, seq: int, filter: str = "") -> SimpleState:
        n = self.num_pending(seq, filter)
        if n == 0:
            return SimpleState()
        return SimpleState(n, self._next_match(filter, seq), self._last_match(filter))

    def subjects_state(self, filter: str = "") -> dict[str, SimpleState]:
        return {ss.subject: SimpleState(ss.msgs, ss.first, ss.last)
                for ss in map(self._fix, self._match_states(filter))}

    def subjects_totals(self, filter: str = "") -> dict[str, int]:
        return {ss.subject: ss.msgs for ss in self._match_states(filter)}

    def num_pending(self, start_seq: int, filter: str = "", last_per_subject: bool = False) -> int:
        if start_seq < self._first_seq:
            start_seq = self._first_seq
        if start_seq > self._last_seq or self._msgs == 0:
            return 0
        if is_all(filter):
            if start_seq <= self._first_seq:
                return len(self._fss) if last_per_subject else self._msgs
            if last_per_subject:
                return sum(1 for ss in self._fss.values() if self._fix(ss).last >= start_seq)
            return self._count_live(start_seq, self._last_seq)
        total = 0
        partial: list[SubjState] = []
        for ss in self._match_states(filter):
            self._fix(ss)
            if last_per_subject:
                total += ss.last >= start_seq
            elif start_seq <= ss.first:
                total += ss.msgs
            elif start_seq <= ss.last:
                partial.append(ss)
        if len(partial) <= _SMALL_SET:
            for ss in partial:
                # Count the shorter side of the subject's range.
                if start_seq - ss.first < ss.last - start_seq:
                    total += ss.msgs - self._count_sid(ss.sid, ss.first, start_seq - 1)
                else:
                    total += self._count_sid(ss.sid, start_seq, ss.last)
        else:
            total += self._count_set({ss.sid for ss in partial}, start_seq, max(ss.last for ss in partial))
        return total

    def multi_last_seqs(self, filters: Iterable[str], max_seq: int = 0, max_allowed: int = 0) -> list[int]:
        if self._msgs == 0:
            return []
        if max_seq <= 0:
            max_seq = self._last_seq
        seen: set[int] = set()
        for f in filters:
            for ss in self._match_states(f):
                self._fix(ss)
                if ss.last <= max_seq:
                    seen.add(ss.last)
                elif ss.first <= max_seq:
                    s = self._prev_sid(ss.sid, max_seq, ss.first)
                    if s:
                        seen.add(s)
            if max_allowed > 0 and len(seen) > max_allowed:
                raise TooManyResultsError()
        return sorted(seen)

    def all_last_seqs(self) -> list[int]:
        return sorted(self._fix(ss).last for ss in self._fss.values())

    def index_bytes(self) -> int:
        """Bytes held by the per-message index arrays (for the scale benchmark)."""
        return sum(c.index_bytes() for c in self._chunks)

    # ================================================================================================ config
    def update_config(self, config: StoreConfig) -> None:
        self._check_open()
        old_maxp = self.config.max_msgs_per_subject
        self.config = config
        maxp = config.max_msgs_per_subject
        if maxp > 0 and (old_maxp <= 0 or maxp < old_maxp):
            for ss in [s for s in self._fss.values() if s.msgs > maxp]:
                while ss.msgs > maxp:
                    if not self._remove(self._fix(ss).first):
                        break
        self._enforce_limits(None)

    def consumer_store(self, name: str, ack_policy: str = "explicit", max_deliver: int = -1) -> ConsumerStore:
        from storage.consumer import MemoryConsumerStore

        return MemoryConsumerStore(ack_policy, max_deliver)
