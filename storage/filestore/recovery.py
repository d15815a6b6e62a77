"""Rebuilding a file store's index at startup, whatever state the files are in.

Theory of operation
-------------------
Blocks are loaded oldest first.  For each block the summary (index.py) is used when it is valid for the
file; the bytes after what it covers, or the whole block when there is no usable summary, are scanned
record by record (block.py ``scan``).  Deletions are collected as events (tombstones, floors) and applied
once every block is loaded: deletions commute, so their order does not matter.

What can be wrong, and what happens (none of it raises; the server always starts):

- **Torn tail** (a record cut short at the end of the newest block, e.g. ``kill -9`` or power loss during a
  write): the file is truncated back to the last whole record.  The cut message was never acknowledged
  (a PubAck is only sent after the write returned), so nothing is reported.
- **Corrupt record** (CRC mismatch, anywhere): that record only is lost.  The scanner resyncs on the next
  valid record; the sequences missing between the last good record before and the first good one after
  are reported as lost (logged at error level, ``state().lost`` and counted in ``num_deleted``) and remembered
  in the block's summary so they stay reported.  nats-server instead truncates the block at the first bad
  record and loses everything after it.
- **Missing / corrupt / stale summary**: the block is scanned instead, and a new summary written.
- **Leftovers of interrupted writes** (``*.tmp``, summaries without a block): removed.
- **A block gone or empty** (zero length after an OS crash or power loss, deleted by hand): the stream state file
  (state.py) says which blocks held which sequences and the stream's last sequence.  A listed block that is missing
  or empty loses its sequences; a newest block that came back short loses what the file says came after it; an
  empty middle block the file does not know loses the sequences between its neighbours.  Each loss is logged with
  the block and the sequences and reported in ``state().lost``; the last sequence never goes back, so no sequence
  is handed out twice (nats-server keeps ``last_seq`` the same way from its index.db).  An empty newest block the
  file does not list (created just before a crash, nothing written yet) is removed with a warning.
"""
from __future__ import annotations

import os
import sys
import zlib
from array import array
from typing import TYPE_CHECKING

from skiff.log import get_logger

from skiff.storage.config import NANOS
from skiff.storage.engine import FILL_GAP_MAX
from skiff.storage.seqindex import DELETED, LIVE, SubjState, code_bytes
from skiff.storage.filestore.block import (
    KIND_BLOCK,
    KIND_ERASED,
    KIND_FLOOR,
    KIND_MSG,
    KIND_SKIP,
    KIND_TOMBSTONE,
    OVERHEAD,
    Bad,
    scan,
)
from skiff.storage.filestore.index import LOCAL_DELETED, Block, decode_summary
from skiff.storage.filestore.state import MAX_LOST, StreamFileState, read_state

if TYPE_CHECKING:
    from skiff.storage.filestore.store import FileStreamStore

log = get_logger("skiff.storage")


def list_blocks(msgs_dir: str) -> list[int]:
    """Block indexes present in ``msgs_dir``, after removing leftovers of interrupted writes."""
    blocks: list[int] = []
    idx: list[int] = []
    for name in os.listdir(msgs_dir):
        stem, _, ext = name.partition(".")
        if name.endswith(".tmp"):
            _unlink(os.path.join(msgs_dir, name))
        elif stem.isdigit() and ext == "blk":
            blocks.append(int(stem))
        elif stem.isdigit() and ext == "idx":
            idx.append(int(stem))
    have = set(blocks)
    for i in idx:
        if i not in have:
            _unlink(os.path.join(msgs_dir, f"{i}.idx"))
    return sorted(blocks)


def _read_tail(path: str, size: int) -> bytes:
    """The last four bytes of the first ``size`` bytes of a file (the CRC of its last record)."""
    if size < 4:
        return b""
    with open(path, "rb") as f:
        f.seek(size - 4)
        return f.read(4)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class Recovery:
    """One recovery run; fills the (freshly reset) engine state of ``fs``."""

    def __init__(self, fs: "FileStreamStore") -> None:
        self.fs = fs
        self.blocks: list[Block] = []
        self.tombs: list[int] = []
        self.floors: list[int] = []
        self.prev_hi = 0
        self.pending_lost: tuple[Block, int] | None = None  # trailing corruption of a sealed block
        self.scanned: list[Block] = []
        self.max_index = 0
        self.empty: list[tuple[int, int]] = []  # (index, highest sequence before it) of zero-length block files

    # ------------------------------------------------------------------------------------------------------
    def run(self) -> None:
        fs = self.fs
        indexes = list_blocks(fs.msgs_dir)
        self.max_index = max(indexes, default=0)
        for n, index in enumerate(indexes):
            is_last = n == len(indexes) - 1
            try:
                self.load_block(index, is_last)
            except Exception as e:
                # Not a case we know (those are handled above); never refuse to start because of it.
                log.exception("BLOCK UNREADABLE, skipped (file left in place)", block=fs.block_path(index),
                              error=str(e))
                _unlink(fs.block_path(index)[:-4] + ".idx")
        self.finish()

    def load_block(self, index: int, is_last: bool) -> None:
        fs = self.fs
        path = fs.block_path(index)
        try:
            size = os.path.getsize(path)
        except OSError:
            return
        b = Block(0, index, path)
        if size == 0:
            # Every block the store writes starts with a BLOCK record: an empty file lost whatever it held (or, as
            # the newest, was created just before a crash).  finish() works out which sequences and says so.
            self.empty.append((index, self.prev_hi))
            _unlink(path)
            _unlink(b.idx_path)
            return
        start = 0
        doc = self._read_summary(b, size)
        if doc is not None:
            self._apply_summary(b, doc)
            start = doc["covered"]
            if self.pending_lost is not None:
                self._resolve_pending(b.first)
            if b.crc is not None:
                self.fs._to_verify.append((b, start, b.crc))
        if start < size:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
            size = self._scan_into(b, data, start, is_last, have_summary=doc is not None)
            end = size - start  # the scan may have cut a torn tail
            b.tail = data[end - 4:end] if end >= 4 else _read_tail(path, size)
            if start == 0:
                b.crc = zlib.crc32(memoryview(data)[:end])
            elif b.crc is not None:
                b.crc = zlib.crc32(memoryview(data)[:end], b.crc)
            b.dirty = True
            self.scanned.append(b)
        if self.blocks and b.first < self.blocks[-1].end:
            # Overlapping blocks cannot be produced by this store; keep the older data, drop the newer slots.
            log.error("block overlaps its predecessor, ignoring its messages", block=path)
            b.codes = bytearray()
            b.ts, b.sizes, b.offsets = array("q"), array("I"), array("I")
            b.first = self.blocks[-1].end
            b.nlive = 0
        b.size = b.flushed = b.synced = size
        self.prev_hi = max(self.prev_hi, b.hi)
        self.blocks.append(b)

    def _read_summary(self, b: Block, size: int) -> dict | None:
        try:
            with open(b.idx_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("block summary unreadable, rebuilding from the block", path=b.idx_path, error=str(e))
            return None
        try:
            doc = decode_summary(raw, b.idx_path)
            covered = doc["covered"]
            if doc["index"] != b.index or covered > size or covered < OVERHEAD:
                raise ValueError("summary does not describe this block file")
            with open(b.path, "rb") as f:
                f.seek(covered - 4)
                if f.read(4) != doc["tail"]:
                    raise ValueError("block file changed under its summary")
            return doc
        except Exception as e:
            log.warning("block summary unusable, rebuilding from the block", path=b.idx_path, error=str(e))
            _unlink(b.idx_path)
            return None

    def _apply_summary(self, b: Block, doc: dict) -> None:
        fs = self.fs
        b.first = doc["first"]
        b.ts, b.sizes, b.offsets = doc["ts"], doc["sizes"], doc["offsets"]
        # The cost of a restart with many subjects is the work per subject here.  Subjects new to the store are
        # recorded asleep in one batch (seqindex.py: no object per subject until one is asked for); only subjects
        # already seen in an earlier block are merged one by one (count added, first/last widened).
        subjects = doc["subjects"]
        stats = doc["stats"]
        fss, lazy = fs._fss, fs._lazy
        if lazy.keys().isdisjoint(subjects) and fss.keys().isdisjoint(subjects):
            icodes = fs._sleep_subjects(subjects, stats if isinstance(stats, array) else array("Q", stats))
        else:
            in_lazy = list(map(lazy.get, subjects)) if lazy else None
            in_fss = list(map(fss.get, subjects)) if fss else None
            icodes = self._merge_subjects(subjects, stats, in_lazy, in_fss)
        sids = doc["sids"]
        if len(sids) == len(icodes) and sids == array("I", range(len(sids))):
            slot_codes = icodes  # a subject per slot (local indexes are handed out in slot order): no mapping
        elif sids.count(LOCAL_DELETED):
            gmap = dict(enumerate(icodes))
            gmap[LOCAL_DELETED] = 0
            slot_codes = array("I", map(gmap.__getitem__, sids))
        else:
            slot_codes = array("I", map(icodes.__getitem__, sids))
        if sys.byteorder != "little":
            slot_codes.byteswap()
        b.codes = bytearray(slot_codes)
        b.nlive = b.codes.count(LIVE)
        fs._msgs += b.nlive
        fs._bytes += sum(b.sizes)
        b.ttls = {k: v for k, v in doc["ttls"]} or None
        b.tombs = list(doc["tombs"])
        b.floors = list(doc["floors"])
        b.lost = list(doc["lost"])
        b.lost_bytes = doc["lost_bytes"]
        b.hi, b.hi_ts = doc["hi"], doc["hi_ts"]
        b.crc = doc.get("crc")  # summaries written before the checksum was kept have none
        b.tail = doc["tail"]
        b.summary_covered = doc["covered"]
        b.dirty = False
        self.tombs.extend(b.tombs)
        self.floors.extend(b.floors)

    def _merge_subjects(self, subjects: list[str], stats, in_lazy: list | None, in_fss: list | None) -> array:
        """Codes of a block's subjects when some were seen in earlier blocks: merge those, record the rest asleep."""
        fs = self.fs
        lz_stats = fs._lz_stats
        icodes = array("I", bytes(4 * len(subjects)))
        fresh: list[str] = []
        fresh_stats = array("Q")
        fresh_pos: list[int] = []
        for i, subject in enumerate(subjects):
            n_msgs, first, last = stats[3 * i], stats[3 * i + 1], stats[3 * i + 2]
            ss = in_fss[i] if in_fss is not None else None
            if ss is not None:
                if ss.msgs == 0:
                    ss.msgs, ss.first, ss.last = n_msgs, first, last
                else:
                    ss.first, ss.last, ss.msgs = min(ss.first, first), max(ss.last, last), ss.msgs + n_msgs
                icodes[i] = ss.icode
                continue
            n = in_lazy[i] if in_lazy is not None else None
            if n is not None:
                k = 3 * n
                lz_stats[k] += n_msgs
                lz_stats[k + 1] = min(lz_stats[k + 1], first)
                lz_stats[k + 2] = max(lz_stats[k + 2], last)
                icodes[i] = int.from_bytes(code_bytes(n), "little")
                continue
            fresh.append(subject)
            fresh_stats.extend((n_msgs, first, last))
            fresh_pos.append(i)
        if fresh:
            for i, icode in zip(fresh_pos, fs._sleep_subjects(fresh, fresh_stats)):
                icodes[i] = icode
        return icodes

    # ------------------------------------------------------------------------------------------------------
    def _scan_into(self, b: Block, data: bytes, base: int, is_last: bool, have_summary: bool) -> int:
        """Scan ``data`` (the block file from offset ``base``) into ``b``; returns the block's final size.

        The loop is the cost of a restart without index (one iteration per record), hence the locals.
        """
        fs = self.fs
        first_known = have_summary
        end = b.end if have_summary else 0  # next slot's sequence
        expected = b.end if have_summary else self.prev_hi + 1
        after_bad = False
        size = base + len(data)
        codes, tss, sizes, offsets = b.codes, b.ts, b.sizes, b.offsets
        ts_append, sizes_append, off_append = tss.append, sizes.append, offsets.append
        fss = fs._fss
        by_bytes: dict[bytes, SubjState] = {}
        hi, hi_ts = b.hi, b.hi_ts
        n_msgs = n_bytes = 0
        for r in scan(data):
            if type(r) is Bad:
                if r.torn and is_last:
                    size = base + r.pos
                    log.warning("torn write at the end of the newest block cut back to the last whole record",
                                block=b.path, offset=size, cut_bytes=len(data) - r.pos)
                    try:
                        os.truncate(b.path, size)
                    except OSError as e:
                        log.error("could not truncate torn block tail", block=b.path, error=str(e))
                    break
                b.lost_bytes += r.end - r.pos
                log.error("CORRUPT RECORD(S) in block: data lost, records after it kept",
                          block=b.path, offset=base + r.pos, bad_bytes=r.end - r.pos)
                after_bad = True
                if r.end == len(data):
                    # Nothing good after it in this block.
                    if is_last:
                        if r.kind == KIND_MSG and r.seq == expected:
                            self._lose(b, [expected])
                            hi = max(hi, expected)
                            expected += 1
                    else:
                        self.pending_lost = (b, expected)
                continue
            kind, pos, rlen, seq, ts, ttl, slen, hlen, extra = r
            if kind == KIND_MSG:
                if not first_known:
                    b.first = end = seq
                    first_known = True
                if seq != end:
                    if seq < end:
                        log.error("out-of-order record ignored", block=b.path, seq=seq, offset=base + pos)
                        continue
                    if self.pending_lost is not None:
                        self._resolve_pending(seq)
                    if after_bad and seq > expected:
                        self._lose(b, range(expected, seq))
                    gap = seq - end
                    if gap > 16 * FILL_GAP_MAX and not codes:
                        b.first = seq
                    else:
                        codes.extend(bytes(gap << 2))
                        tss.extend(array("q", [tss[-1] if tss else ts]) * gap)
                        sizes.extend(array("I", bytes(gap << 2)))
                        offsets.extend(array("I", bytes(gap << 2)))
                    end = seq
                elif self.pending_lost is not None:
                    self._resolve_pending(seq)
                ss = by_bytes.get(extra)
                if ss is None:
                    subj = extra.decode("utf-8", "replace")
                    ss = by_bytes[extra] = fss.get(subj) or fs._new_subject(subj)
                # nats-server fileStoreMsgSize: 22+slen+dlen+8 (+4+hlen) == rlen-8 (rlen-4 with headers).
                size_acc = rlen - 4 if hlen else rlen - 8
                if ttl:
                    if b.ttls is None:
                        b.ttls = {}
                    b.ttls[len(codes) >> 2] = ttl
                codes += ss.code
                ts_append(ts)
                sizes_append(size_acc)
                off_append(base + pos)
                n_msgs += 1
                n_bytes += size_acc
                if ss.msgs == 0:
                    ss.first = seq
                ss.msgs += 1
                ss.last = seq
                hi, hi_ts = seq, ts
                end = expected = seq + 1
                after_bad = False
            elif kind == KIND_TOMBSTONE:
                b.tombs.append(seq)
                self.tombs.append(seq)
            elif kind == KIND_FLOOR:
                b.floors.append(seq)
                self.floors.append(seq)
                if seq - 1 >= hi:
                    hi, hi_ts = seq - 1, ts  # a floor's ts is the stream's last timestamp then
            elif kind == KIND_SKIP:
                if not first_known:
                    b.first = end = seq
                    first_known = True
                if self.pending_lost is not None:
                    self._resolve_pending(seq)
                last = seq + extra - 1
                if last >= hi:
                    hi, hi_ts = last, ts
                expected = max(expected, last + 1)
                after_bad = False
            elif kind == KIND_ERASED:
                if seq >= hi:
                    hi, hi_ts = seq, ts
                expected = max(expected, seq + 1)
                after_bad = False
            elif kind == KIND_BLOCK:
                if not first_known:
                    b.first = end = seq
                    first_known = True
                if self.pending_lost is not None:
                    self._resolve_pending(seq)
                if seq - 1 >= hi:
                    hi, hi_ts = seq - 1, ts  # a block header's ts is the stream's last timestamp then
                expected = max(expected, seq)
        b.nlive += n_msgs
        fs._msgs += n_msgs
        fs._bytes += n_bytes
        b.hi, b.hi_ts = hi, hi_ts
        if not first_known:
            b.first = max(self.prev_hi + 1, b.hi + 1)
        return size

    def _gone_blocks(self, hi: int) -> tuple[list[tuple[str, str, int, int]], "StreamFileState | None"]:
        """Sequence ranges of blocks that are missing, empty or cut short, as (block path, what, first, last), and
        the state file (None without a usable one)."""
        fs = self.fs
        st = read_state(fs.msgs_dir)
        loaded = {b.index for b in self.blocks}
        empty = {i for i, _ in self.empty}
        listed: set[int] = set()
        gone: list[tuple[str, str, int, int]] = []
        if st is not None:
            for index, first, last in st.blocks:
                listed.add(index)
                if index not in loaded and last >= first:
                    gone.append((fs.block_path(index), "FILE EMPTY" if index in empty else "FILE MISSING", first, last))
            if st.last_seq > hi:
                # The newest data the file knows of is not in the blocks: the newest block came back short or empty.
                newest = max((i for i, _, _ in st.blocks), default=0)
                path = fs.block_path(newest)
                if gone and gone[-1][0] == path:
                    gone[-1] = (path, gone[-1][1], min(gone[-1][2], hi + 1), st.last_seq)
                else:
                    gone.append((path, "CUT SHORT", hi + 1, st.last_seq))
        for index, prev_hi in self.empty:
            if index in listed:
                continue
            nxt = next((b for b in self.blocks if b.index > index), None)
            if nxt is None:
                log.warning("empty newest block file removed (created just before a crash, nothing lost)",
                            block=fs.block_path(index))
            elif nxt.first - 1 > prev_hi:
                gone.append((fs.block_path(index), "FILE EMPTY", prev_hi + 1, nxt.first - 1))
        return gone, st

    def _lose(self, b: Block, seqs) -> None:
        seqs = list(seqs)[:100_000]  # a corrupt range cannot name more than this many real messages
        if seqs:
            b.lost.extend(seqs)
            log.error("MESSAGES LOST to corruption", block=b.path, seqs=seqs[:20], count=len(seqs))

    def _resolve_pending(self, next_seq: int) -> None:
        assert self.pending_lost is not None
        b, expected = self.pending_lost
        self.pending_lost = None
        if next_seq > expected:
            self._lose(b, range(expected, next_seq))

    # ------------------------------------------------------------------------------------------------------
    def finish(self) -> None:
        fs = self.fs
        blocks = self.blocks
        fs._chunks = list(blocks)
        fs._firsts = [b.first for b in blocks]
        hi = max((b.hi for b in blocks), default=0)
        hi_ts = 0
        for b in blocks:
            if b.hi == hi:
                hi_ts = max(hi_ts, b.hi_ts)
        if self.floors:
            floor = max(self.floors)
            hi = max(hi, floor - 1)
            fs._bulk_remove_below(floor)
        for t in self.tombs:
            fs._remove(t, notify=False)
        lost: set[int] = set()
        for b in blocks:
            lost.update(b.lost)
            fs._lost_bytes += b.lost_bytes
            if b.lost:
                hi = max(hi, max(b.lost))
        floor = max(self.floors, default=0)
        gone, st = self._gone_blocks(hi)
        if st is not None:
            # Reported before: stays reported while it is in the stream's range (a purge past it ends that).
            lost.update(s for s in st.lost if s >= floor and not fs._is_live(s))
        for path, what, lo, last in gone:
            seqs = [s for s in range(max(lo, floor), last + 1)[:MAX_LOST] if fs._locate(s)[0] is None]
            if seqs:
                lost.update(seqs)
                log.error(f"BLOCK {what}: messages lost", block=path, first_seq=seqs[0], last_seq=seqs[-1],
                          count=len(seqs))
        if st is not None and st.last_seq > hi:
            # The last sequence never goes back: the next message must not get a sequence another one had.
            hi, hi_ts = st.last_seq, st.last_ts
        fs._lost_msgs = sorted(lost)
        fs._last_seq = hi
        fs._last_ts = hi_ts
        first = fs._next_live(0)
        fs._first_seq = first if first else (hi + 1 if hi else 0)
        for b in fs._chunks:
            if b.ttls:
                for slot, ttl in b.ttls.items():
                    if slot < b.nslots() and b.live(slot):
                        seq = b.first + slot
                        if ttl > 0:
                            fs._ttl_heap.append((b.ts[slot] + ttl * NANOS, seq))
                        else:
                            fs._ttl_never.add(seq)
        fs._ttl_heap.sort()
        for b in [c for c in fs._chunks[:-1] if c.nlive == 0]:
            fs._remove_chunk(b)
        if fs._lost_msgs:
            log.error("stream store recovered with lost messages", dir=fs.dir, lost=len(fs._lost_msgs),
                      lost_bytes=fs._lost_bytes)
