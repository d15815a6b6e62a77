"""Read-side queries both stores share: loads by sequence / filter, pending counts, state.

All of them work on the sequence index (seqindex.py) and never touch storage except through the backend's
``_read`` when a message body is needed.  Filters accept NATS wildcards; "" and ">" mean everything.
Literal filters use the subject's first/last and ``array.index``/``count`` on its id; wildcard filters
resolve to a set of subject ids and either look at each subject (few) or scan with the set (many).
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Iterable

from skiff.storage.errors import TooManyResultsError
from skiff.storage.records import LostStreamData, SimpleState, StoredMsg, StreamState
from skiff.storage.seqindex import LIVE, SeqIndex, SubjState, _unpack_code
from skiff.storage.subjects import is_all, is_literal

_LIVE_BYTE = bytes((LIVE,))
_SMALL_SET = 32  # wildcard matches up to this many subjects are resolved per subject, more by scanning
# The last message of a literal subject, once loaded, is kept (``_hot``: sequence -> StoredMsg) for the next load of
# that subject: a KV get or a direct get by subject reads memory, as nats-server's file store serves it from its
# block cache, instead of a pread, a checksum and a parse (issue #13).  Kept are messages of up to HOT_MSG bytes
# (headers + data), at most HOT_BYTES in all; the whole cache is dropped when it would pass that.  An entry is used
# only while its sequence is live in the index (the slot is checked first), and a stored message never changes
# while it is live; the index reset that a rolled-back write causes (a sequence may then be given out again)
# empties the cache (seqindex.py _reset_index).
HOT_MSG = 8 * 1024
HOT_BYTES = 256 * 1024  # per store: a bucket of ~2,000 values of 128 B; bounded, as stores may be many


class Queries(SeqIndex):
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
            ss = self._state(filter_)
            if ss is None:
                return 0
            self._fix(ss)
            if ss.last < start or ss.first > end:
                return 0
            if ss.first >= start:
                return ss.first
            return self._next_code_at(ss.code, start, min(end, ss.last))
        return self._next_in(self._match_codes(filter_), start, end)

    def _next_in(self, codes: set[int], start: int, end: int) -> int:
        """First live sequence in [start, end] whose subject code is in ``codes``, or 0."""
        if not codes:
            return 0
        if len(codes) > _SMALL_SET:
            return self._scan_set(codes, start, end)
        best = 0
        for icode in codes:
            ss = self._fix(self._state_of_code(icode))
            if ss.last < start or ss.first > end:
                continue
            cand = ss.first if ss.first >= start else self._next_code_at(ss.code, start, min(end, ss.last))
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
            ss = self._state(filter_)
            if ss is None:
                return 0
            self._fix(ss)
            if ss.first > end:
                return 0
            return ss.last if ss.last <= end else self._prev_code_at(ss.code, end, ss.first)
        return self._last_in(self._match_codes(filter_), end)

    def _last_in(self, codes: set[int], end: int) -> int:
        if not codes:
            return 0
        if len(codes) > _SMALL_SET:
            return self._scan_set_back(codes, end, self._first_seq)
        best = 0
        for icode in codes:
            ss = self._fix(self._state_of_code(icode))
            if ss.first > end:
                continue
            cand = ss.last if ss.last <= end else self._prev_code_at(ss.code, end, ss.first)
            best = max(best, cand)
        return best

    def _load_slot(self, seq: int) -> StoredMsg | None:
        c, i = self._locate(seq)
        if c is None or c.codes[i << 2] != LIVE:
            return None
        return self._read(c, i, seq)

    def _load_last_hot(self, seq: int) -> StoredMsg | None:
        """:meth:`_load_slot` through the cache of last messages (HOT_MSG above)."""
        c, i = self._locate(seq)
        if c is None or c.codes[i << 2] != LIVE:
            return None
        hot = self._hot
        m = hot.get(seq)
        if m is None:
            m = self._read(c, i, seq)
            if m is not None:
                size = len(m.hdr) + len(m.data)
                if size <= HOT_MSG:
                    if self._hot_bytes + size > HOT_BYTES:
                        hot.clear()
                        self._hot_bytes = 0
                    hot[seq] = m
                    self._hot_bytes += size
        return m

    def load_msg(self, seq: int) -> StoredMsg | None:
        self._check_open()
        return self._load_slot(seq)

    def load_run(self, start: int, limit: int, accept: "Callable[[str], bool] | None" = None) -> list[StoredMsg]:
        """The messages at ``start``, ``start + 1``, ... (at most ``limit`` of them), each what :meth:`load_msg`
        would return: a consumer reading the stream in order takes a run in one call instead of one load per
        sequence.  The run ends before the first sequence without a message (removed, not stored yet,
        unreadable), before the first whose subject ``accept`` refuses (asked once per change of subject, from the
        index: a refused message is not read) and at the end of the chunk that holds ``start``; ``[]`` when
        ``start`` has none."""
        self._check_open()
        c, i = self._locate(start)
        if c is None:
            return []
        hi = min(len(c.codes) >> 2, i + limit)
        codes = c.codes
        j = i
        if accept is None:
            # The first byte of each slot from i on (a strided copy, one C call), up to the first that is not LIVE:
            # the loop below without a Python step per message.
            firsts = codes[i << 2:hi << 2:4]
            j = i + len(firsts) - len(firsts.lstrip(_LIVE_BYTE))
        else:
            last = -1
            while j < hi and codes[j << 2] == LIVE:
                icode = _unpack_code(codes, j << 2)[0]
                if icode != last:
                    if not accept(self._state_of_code(icode).subject):  # type: ignore[union-attr]
                        break
                    last = icode
                j += 1
        if j == i:
            return []
        return self._read_run(c, i, j, start)

    def _read_run(self, c, i: int, j: int, seq: int) -> list[StoredMsg]:
        """The messages of slots ``i`` .. ``j - 1`` of chunk ``c`` (all live; sequence ``seq`` first), up to the
        first unreadable one; the stores read a run their own way, this is the plain loop."""
        out: list[StoredMsg] = []
        read = self._read
        while i < j:
            m = read(c, i, seq)
            if m is None:
                break
            out.append(m)
            i += 1
            seq += 1
        return out

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
        ss = self._fss.get(filter)
        if ss is not None and ss.msgs and not ss.stale:
            # A literal subject the index holds, its last sequence current: what _last_match would find (a KV get
            # is this; issue #13).  Unreadable, the general search below goes on from it.
            m = self._load_last_hot(ss.last)
            if m is not None:
                return m
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
        if c is None or c.codes[i << 2] != LIVE:
            return None
        ss = self._subject_at(c, i)
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
        return c.ts[i] if c is not None and c.codes[i << 2] == LIVE else 0

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
            marks = c.codes[0::4]  # first byte of every slot: LIVE or 0
            j = marks.find(0, cur - c.first, hi)
            while j >= 0:
                out.append(c.first + j)
                j = marks.find(0, j + 1, hi)
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
            num_subjects=self._num_subjects(),
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
                return self._num_subjects() if last_per_subject else self._msgs
            if last_per_subject:
                self._wake_all()
                return sum(1 for ss in self._fss.values() if self._fix(ss).last >= start_seq)
            return self._count_live(start_seq, self._last_seq)
        return self._pending_in(self._match_states(filter), start_seq, last_per_subject)

    def _pending_in(self, states: Iterable[SubjState], start_seq: int, last_per_subject: bool) -> int:
        total = 0
        partial: list[SubjState] = []
        for ss in states:
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
                    total += ss.msgs - self._count_subject(ss, ss.first, start_seq - 1)
                else:
                    total += self._count_subject(ss, start_seq, ss.last)
        else:
            total += self._count_set({ss.icode for ss in partial}, start_seq, max(ss.last for ss in partial))
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
                    s = self._prev_code_at(ss.code, max_seq, ss.first)
                    if s:
                        seen.add(s)
            if max_allowed > 0 and len(seen) > max_allowed:
                raise TooManyResultsError()
        return sorted(seen)

    def index_bytes(self) -> int:
        """Bytes held by the per-message index arrays (for the scale benchmark)."""
        return sum(c.index_bytes() for c in self._chunks)
