"""The store engine both stores share: appends, limits, removal, purge, expiry.

Theory of operation
-------------------
``IndexedStore`` is a complete ``StreamStore`` except for where bytes go.  It keeps the sequence index
(seqindex.py) and answers queries (queries.py); this module holds everything that changes state.

Limits follow nats-server (memstore.go storeRawMsg / enforce*): discard-new checks before the append, then
per-subject eviction, then max_msgs / max_bytes eviction of the oldest (discard old only).  Time-based
removal happens only in ``expire(now)``, driven by the server's timer with its clock.  Purge and compact
follow memstore.PurgeEx / Compact, including their corner cases (``seq == 1`` purges nothing, compacting past
the end restarts the stream at ``seq``).

A backend (memory or file) subclasses ``IndexedStore`` and implements the hooks in the "backend" section:
where a record goes, how it is read back, and how removals, skips and floors are made durable.  The hooks
run after the index was updated, so a backend only mirrors what the index already says.
"""
from __future__ import annotations

import heapq
import time
from array import array
from bisect import bisect_left
from collections import Counter
from typing import Iterator

from skiff.log import get_logger

from skiff.storage.base import Clock, ConsumerStore, Expired, StreamStore
from skiff.storage.config import NANOS, StoreConfig
from skiff.storage.errors import (
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MsgTooLargeError,
    SequenceMismatchError,
    StoreClosedError,
    StoreError,
)
from skiff.storage.queries import Queries
from skiff.storage.records import StoredMsg
from skiff.storage.seqindex import _STALE_FIRST, _STALE_LAST, DELETED, LIVE, NO_COUNTS, Chunk, SubjState, code_ints
from skiff.storage.subjects import is_all

log = get_logger("skiff.storage")

FILL_GAP_MAX = 1024  # a skip up to this many sequences is filled with empty slots, larger starts a new chunk
MAX_SUBJECT_LEN = 0xFFFF  # bytes (the file record's length field; nats-server subjects are far shorter)
MAX_TTL = 0x7FFFFFFF  # seconds (int32 in the file record)

__all__ = ["DELETED", "FILL_GAP_MAX", "Chunk", "IndexedStore", "SubjState"]


class IndexedStore(Queries, StreamStore):
    """Everything but the backend: see the module docstring."""

    def __init__(self, config: StoreConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or StoreConfig()
        self._clock: Clock = clock or time.time_ns
        self.on_remove = None
        self._closed = False
        self._reset_index()
        self._lost_msgs: list[int] = []
        self._lost_bytes = 0

    # ================================================================================================ backend
    #: Accounted message size = len(subject) + len(hdr) + len(data) + one of these (without / with headers).
    _size_base = 0
    _size_base_hdr = 0

    def _msg_size(self, slen: int, hlen: int, dlen: int) -> int:
        return slen + hlen + dlen + (self._size_base_hdr if hlen else self._size_base)

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

    # ================================================================================================ append
    def _open_chunk(self, seq: int) -> Chunk:
        c = self._new_chunk(seq)
        self._chunks.append(c)
        self._firsts.append(seq)
        if len(self._chunks) > 1 and self._chunks[-2].nlive == 0:
            # The previous newest chunk was kept only because it was the newest (work queues empty it).
            self._remove_chunk(self._chunks[-2])
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
                c.codes.extend(bytes(gap << 2))
                c.ts.extend(array("q", [last_ts]) * gap)
                c.sizes.extend(array("I", bytes(gap << 2)))
                return c
        return self._open_chunk(seq)

    def _append(self, seq: int, subject: str, ss: SubjState | None, hdr: bytes, data: bytes, ts: int, ttl: int) -> SubjState:
        # Nothing may raise after the index starts changing: validate, find the chunk, then mutate.
        if ss is None:
            enc = subject.encode()
            if len(enc) > MAX_SUBJECT_LEN:
                raise StoreError("subject too long")
            slen = len(enc)
        else:
            slen = len(ss.enc)
        if ttl > MAX_TTL:
            ttl = MAX_TTL
        hlen = len(hdr)
        # The accounted size, nats-server's formula for the store type (see _msg_size).
        size = slen + hlen + len(data) + (self._size_base_hdr if hlen else self._size_base)
        chunks = self._chunks
        c = chunks[-1] if chunks else None
        if c is None or c.first + (len(c.codes) >> 2) != seq or self._chunk_full(c, size):
            c = self._chunk_for_append(seq, size)
        if ss is None:
            ss = self._new_subject(subject)
        self._write_msg(c, seq, ss, hdr, data, ts, ttl)
        c.codes += ss.code
        cnt = c.counts
        if cnt is not None and cnt is not NO_COUNTS:
            cnt[ss.icode] += 1
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
                c, i = self._locate(ss.first)  # type: ignore[union-attr]  # noqa
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
        if ss is None and self._lazy:
            ss = self._state(subject)
        if cfg.discard == "new":
            self._check_discard_new(ss, subject, hdr, data)
        seq = self._last_seq + 1
        ss = self._append(seq, subject, ss, hdr, data, ts, ttl)
        if cfg.max_msgs_per_subject > 0 or cfg.max_msgs > 0 or cfg.max_bytes > 0:  # else no limit to enforce
            self._enforce_limits(ss)
        return seq

    def store_raw(self, seq: int, subject: str, hdr: bytes, data: bytes, ts: int, ttl: int = 0,
                  discard_new_check: bool = False) -> None:
        self._check_open()
        ss = self._state(subject)
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
        if c is None or c.codes[i << 2] != LIVE:
            return None
        ss = self._subject_at(c, i)
        assert ss is not None
        c.codes[i << 2:(i << 2) + 4] = DELETED
        cnt = c.counts
        if cnt is not None and cnt is not NO_COUNTS:
            cnt[ss.icode] -= 1
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
        elif ss.msgs == 1 and not ss.stale and (seq == ss.first or seq == ss.last):
            # One message left, at the other end: no search for it (a KV bucket, max_msgs_per_subject 1, removes
            # a key's previous value on every put; searching for the new first cost two scans of the codes).
            if seq == ss.first:
                ss.first = ss.last
            else:
                ss.last = ss.first
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
            dec.update(code_ints(c.codes))
            purged += c.nlive
            self._bytes -= sum(c.sizes)
            self._msgs -= c.nlive
            c.nlive = 0
            del self._chunks[0]
            del self._firsts[0]
            self._drop_chunk(c)
        if self._chunks and self._chunks[0].first < seq:
            c = self._chunks[0]
            hi = min(len(c.codes) >> 2, seq - c.first)
            n = c.codes.count(LIVE, 0, hi << 2)
            if n:
                dec.update(code_ints(c.codes[:hi << 2]))
                purged += n
                self._bytes -= sum(c.sizes[:hi])
                self._msgs -= n
                c.nlive -= n
                c.codes[:hi << 2] = bytes(hi << 2)
                c.counts = None
                c.sizes[:hi] = array("I", bytes(hi << 2))
        dec.pop(0, None)
        for icode, n in dec.items():
            ss = self._state_of_code(icode)
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
            # Keep the newest ``keep``: the same as compacting up to the keep-th newest message (one floor
            # record instead of a tombstone per message).
            if keep >= self._msgs:
                return 0
            return self.compact(self._nth_newest(keep))
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

    def _nth_newest(self, k: int) -> int:
        """Sequence of the k-th newest live message (k >= 1, k <= msgs)."""
        for c in reversed(self._chunks):
            if c.nlive >= k:
                hi = len(c.codes)
                for _ in range(k):
                    hi = c.codes.rfind(LIVE, 0, hi)
                return c.first + (hi >> 2)
            k -= c.nlive
        return self._first_seq

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

    # ================================================================================================ config
    def update_config(self, config: StoreConfig) -> None:
        self._check_open()
        old_maxp = self.config.max_msgs_per_subject
        self.config = config
        maxp = config.max_msgs_per_subject
        if maxp > 0 and (old_maxp <= 0 or maxp < old_maxp):
            self._wake_all()
            for ss in [s for s in self._fss.values() if s.msgs > maxp]:
                while ss.msgs > maxp:
                    if not self._remove(self._fix(ss).first):
                        break
        self._enforce_limits(None)

    def consumer_store(self, name: str, ack_policy: str = "explicit", max_deliver: int = -1) -> ConsumerStore:
        from skiff.storage.consumer import MemoryConsumerStore

        return MemoryConsumerStore(ack_policy, max_deliver)
