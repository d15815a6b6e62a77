"""The file-backed stream store (nats-server filestore.go, much simplified).

Theory of operation
-------------------
Layout of a stream directory (the server picks it: ``<store_dir>/jetstream/$G/streams/<name>/``)::

    meta.inf              stream metadata (the server's, written atomically with write_meta)
    msgs/<n>.blk          append-only block files (record format in block.py)
    msgs/<n>.idx          block summaries (index.py), so a restart does not read every record
    msgs/state.dat        stream state (state.py): last sequence and block list, so a lost block is noticed
    obs/<consumer>/o.dat  consumer state (consumer.py)

Writing.  ``store_msg`` encodes the record (struct + crc32) into the newest block's in-memory tail ``pend``
and updates the index, so the message is visible at once.  ``flush()``, which the server calls once per
event-loop iteration before it sends PubAcks, hands every pending tail to the OS with one ``pwrite`` per
block: everything published in one iteration is written together.  After ``flush`` returns, the data
survives ``kill -9``; ``sync()`` (fsync, run by the server in a worker thread every ``sync_interval``, or
before the PubAcks with ``sync_always``) makes it survive power loss.  ``sync`` only fsyncs ``dup``'ed
descriptors of blocks with unsynced bytes, so the loop thread can keep appending and closing files.

Removing.  A removal writes a TOMBSTONE record to the newest block (erase also overwrites the record in
place).  Purge/compact write one FLOOR record.  A block with no live messages left is deleted at the next
flush, after any of its tombstones that still matter (their target is in a surviving block) were copied to
the newest block, so deleting a block never brings a message back.  A sealed block less than half live is
rewritten without its removed records (compact.py), one block per flush.

Failure.  If a write fails (ENOSPC, EIO), ``flush`` truncates the files back to their length before the
flush, rebuilds the index from disk (recovery.py) and raises ``StoreWriteError`` naming the sequences that
were not stored.  Everything flushed earlier is untouched.  ``write``/``fsync`` can be injected to simulate
this in tests.

What a power loss would take.  Besides each block's ``synced`` length the store knows which of its files hold
writes no fsync covered yet: ``_fresh``, the blocks created since the last fsync of ``msgs/`` (their name may not
be on the disk), and ``_unsynced_files``, the summaries and the state file replaced (temp file + rename) without
fsync since.  Keeping them costs a set operation per block created or summary written; skiff.testing.faults
``power_loss`` reads them to leave the files as the worst power loss would.

Accounting is nats-server's fileStoreMsgSize (block.file_msg_size).
"""
from __future__ import annotations

import errno
import gc
import os
import threading
import time
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from skiff.log import get_logger

from skiff.storage import meta
from skiff.storage.base import Clock, ConsumerStore
from skiff.storage.config import StoreConfig
from skiff.storage.engine import Chunk, IndexedStore, SubjState
from skiff.storage.errors import InvalidPathError, StoreWriteError
from skiff.storage.names import check_name
from skiff.storage.filestore.block import (
    HEAD,
    HEAD_SIZE,
    KIND_BLOCK,
    KIND_FLOOR,
    KIND_SKIP,
    KIND_TOMBSTONE,
    MAGIC,
    U64,
    append_msg,
    encode_control,
    encode_erased,
    parse_msg,
    read_run,
)
from skiff.storage.filestore.compact import compact_block, worth_compacting
from skiff.storage.filestore.index import Block, encode_summary
from skiff.storage.filestore.recovery import Recovery
from skiff.storage.filestore.state import MAX_LOST, StreamFileState, state_path, write_state
from skiff.storage.records import StoredMsg
from skiff.storage.remove import unlink_in_background, unlink_quietly

log = get_logger("skiff.storage")

WriteFn = Callable[[int, bytes | memoryview, int], int]  # os.pwrite signature
FsyncFn = Callable[[int], None]
MSG_DIR = "msgs"  # nats-server msgDir
CONSUMER_DIR = "obs"  # nats-server consumerDir
MAX_READ_FDS = 16
READ_AHEAD = 64 * 1024
INLINE_UNLINKS = 4  # dead-block files unlinked on the loop; more go to a thread (_unlink)


class FileStreamStore(IndexedStore):
    def __init__(self, directory: str | os.PathLike, config: StoreConfig | None = None, clock: Clock | None = None,
                 *, write: WriteFn | None = None, fsync: FsyncFn | None = None) -> None:
        super().__init__(config, clock)
        self.dir = str(directory)
        self.msgs_dir = os.path.join(self.dir, MSG_DIR)
        os.makedirs(self.msgs_dir, exist_ok=True)
        self._write: WriteFn = write or os.pwrite
        self._fsync: FsyncFn = fsync or os.fsync
        self._sync_lock = threading.Lock()
        self._unsynced: set[Block] = set()
        self._dir_dirty = False
        self._unlinking: list[threading.Thread] = []  # threads unlinking dead blocks (_unlink)
        self._fresh: set[Block] = set()  # created since the last fsync of msgs/ (under _sync_lock)
        self._unsynced_files: set[str] = set()  # summaries / state file replaced without fsync since
        self._wq: list[Block] = []  # blocks with a pending tail, in write order
        self._pwrites: list[tuple[Block, int, bytes]] = []  # in-place overwrites (erase)
        self._dead: list[Block] = []  # blocks that left the index, to delete at the next flush
        self._to_seal: list[Block] = []  # blocks the store moved past, summary due after the next flush
        self._read_fds: OrderedDict[int, Block] = OrderedDict()
        self._compact_check: set[Block] = set()  # blocks that lost messages: compaction candidates
        self._batch_seqs: list[int] = []
        self._batch_removed: list[int] = []
        self._replaying = False
        # Read-ahead for sequential loads: (block, file offset of buf, buf, offset just after the last read).
        self._ra: tuple[Block, int, bytes, int] | None = None
        self._next_index = 1
        # Stream state file (state.py): the loop thread publishes what it flushed, the sync thread writes from that.
        self._state_lock = threading.Lock()
        self._flushed_last = (0, 0)  # (last_seq, last_ts) after the last successful flush
        self._flushed_blocks: tuple[tuple[int, int, int], ...] = ()
        self._state_written: tuple = ()
        self._state_synced_at = float("-inf")
        self._to_verify: list[tuple[Block, int, int]] = []  # filled by recovery: blocks taken from their summary
        self._recover()
        if self._last_seq == 0 and not self._chunks and self.config.first_seq > 1:
            self._reset_to(self.config.first_seq)
            self.flush()

    # ================================================================================================ paths
    def block_path(self, index: int) -> str:
        return os.path.join(self.msgs_dir, f"{index}.blk")

    # ================================================================================================ recovery
    def _recover(self) -> None:
        self._to_verify = []
        self._replaying = True
        # Recovery creates an object per subject and nothing cyclic: the collector's passes over a growing heap
        # would cost as much again (measured: 200k subjects 0.46 s -> 0.20 s without them).
        gc_was = gc.isenabled()
        gc.disable()
        try:
            rec = Recovery(self)
            rec.run()
        finally:
            self._replaying = False
            if gc_was:
                gc.enable()
        #: Blocks read record by record at the last start (no usable summary, or appended after it).
        self.scanned_blocks = len(rec.scanned)
        self._compact_check = set(self._chunks[:-1])  # type: ignore[arg-type]
        self._next_index = rec.max_index + 1
        # Sealed blocks that had to be scanned get their summary now, so the next start is fast.
        for b in self._chunks[:-1]:
            if b.dirty:  # type: ignore[attr-defined]
                self._write_summary(b)  # type: ignore[arg-type]
        # The state file now describes what recovery found (including any loss, so it stays reported).
        self._flushed_last = (self._last_seq, self._last_ts)
        self._write_state()

    def _reload(self) -> None:
        """Forget the in-memory state and rebuild it from disk (after a failed write)."""
        self._ra = None
        self._close_fds()
        self._reset_index()
        self._lost_msgs, self._lost_bytes = [], 0
        self._wq, self._pwrites, self._dead, self._to_seal = [], [], [], []
        self._compact_check = set()
        self._batch_seqs, self._batch_removed = [], []
        self._recover()

    # ================================================================================================ hooks
    # nats-server fileStoreMsgSize: 22+len(subj)+len(msg)+8, plus 4+len(hdr) with headers.
    _size_base = 30
    _size_base_hdr = 34

    def _new_chunk(self, first: int) -> Chunk:
        index = self._next_index
        self._next_index += 1
        b = Block(first, index, self.block_path(index))
        try:
            b.fd = os.open(b.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as e:
            # Nothing was changed yet: the message that needed the block is simply not stored.
            self._next_index -= 1
            log.error("cannot create block file", path=b.path, error=str(e))
            raise StoreWriteError([first], e) from e
        with self._sync_lock:
            self._dir_dirty = True
            self._fresh.add(b)
        if self._chunks:
            prev = self._chunks[-1]
            self._to_seal.append(prev)  # type: ignore[arg-type]
            self._compact_check.add(prev)  # type: ignore[arg-type]
        # The header carries the stream's last timestamp so it survives even if every older block goes.
        rec = encode_control(KIND_BLOCK, first, self._last_ts)
        b.pend += rec
        b.size = len(rec)
        b.hi, b.hi_ts = first - 1, self._last_ts
        self._queue(b)
        return b

    def _queue(self, b: Block) -> None:
        if not b.in_wq:
            b.in_wq = True
            self._wq.append(b)

    def _chunk_full(self, chunk: Block, size: int) -> bool:  # type: ignore[override]
        # An empty block takes any message, however large; otherwise roll over at block_size.
        return chunk.size + size + 8 > self.config.block_size and len(chunk.codes) > 0

    def _write_msg(self, b: Block, seq: int, ss: SubjState, hdr: bytes, data: bytes, ts: int, ttl: int) -> None:  # type: ignore[override]
        b.offsets.append(b.size)
        b.size += append_msg(b.pend, seq, ts, ttl, ss.enc, hdr, data)
        b.hi = seq
        b.hi_ts = ts
        if not b.in_wq:
            b.in_wq = True
            self._wq.append(b)
        if ttl:
            if b.ttls is None:
                b.ttls = {}
            b.ttls[len(b.codes) >> 2] = ttl
        self._batch_seqs.append(seq)

    def _fill_gap(self, b: Block, n: int) -> None:  # type: ignore[override]
        b.offsets.extend([0] * n)

    def _active(self) -> Block:
        return self._chunks[-1]  # type: ignore[return-value]

    def _append_control(self, kind: int, seq: int, payload: bytes = b"", ts: int | None = None) -> Block:
        if not self._chunks:
            self._open_chunk(seq)
        b = self._active()
        rec = encode_control(kind, seq, self._clock() if ts is None else ts, payload)
        b.pend += rec
        b.size += len(rec)
        self._queue(b)
        return b

    def _record_removal(self, b: Block, i: int, seq: int, secure: bool) -> None:  # type: ignore[override]
        b.dirty = True
        if self._chunks and b is not self._chunks[-1]:
            self._compact_check.add(b)
        if b.ttls:
            b.ttls.pop(i, None)
        if self._replaying:
            return
        self._append_control(KIND_TOMBSTONE, seq).tombs.append(seq)
        self._batch_removed.append(seq)
        if secure:
            self._erase_in_place(b, i, seq)

    def _erase_in_place(self, b: Block, i: int, seq: int) -> None:
        off = b.offsets[i]
        if off >= b.flushed:
            rel = off - b.flushed
            h = HEAD.unpack_from(b.pend, rel)
            b.pend[rel:rel + h[3]] = encode_erased(seq, h[5], h[3])
            return
        try:
            head = os.pread(self._fd_for(b), HEAD_SIZE, off)
            h = HEAD.unpack(head)
        except Exception:
            return
        if h[0] == MAGIC and h[4] == seq:
            self._pwrites.append((b, off, encode_erased(seq, h[5], h[3])))

    def _record_skip(self, seq: int, num: int, ts: int) -> None:
        b = self._append_control(KIND_SKIP, seq, U64.pack(num), ts)
        if seq + num - 1 > b.hi:
            b.hi, b.hi_ts = seq + num - 1, ts

    def _record_floor(self, seq: int) -> None:
        b = self._append_control(KIND_FLOOR, seq, ts=self._last_ts)
        b.floors.append(seq)
        if seq - 1 >= b.hi:
            b.hi, b.hi_ts = seq - 1, self._last_ts

    def _bulk_remove_below(self, seq: int) -> int:
        n = super()._bulk_remove_below(seq)
        if self._chunks:
            self._chunks[0].dirty = True  # type: ignore[attr-defined]
        return n

    def _drop_chunk(self, chunk: Block) -> None:  # type: ignore[override]
        chunk.dead = True
        self._dead.append(chunk)

    # ================================================================================================ reads
    def _fd_for(self, b: Block) -> int:
        if b.fd is not None:
            return b.fd
        fd = os.open(b.path, os.O_RDWR)
        with self._sync_lock:
            b.fd = fd
        self._read_fds[b.index] = b
        if len(self._read_fds) > MAX_READ_FDS:
            _, old = self._read_fds.popitem(last=False)
            self._close_block_fd(old, only_if_idle=True)
        return fd

    def _close_block_fd(self, b: Block, only_if_idle: bool = False) -> None:
        """Close a block's descriptor (with ``only_if_idle``: not the newest block's, nor one with a tail to
        write).  Unsynced bytes do not need it: sync() reopens the block by path."""
        with self._sync_lock:
            if b.fd is None or (only_if_idle and (b.pend or (self._chunks and b is self._chunks[-1]))):
                return
            fd, b.fd = b.fd, None
        self._read_fds.pop(b.index, None)
        os.close(fd)

    def _read(self, b: Block, i: int, seq: int) -> StoredMsg | None:  # type: ignore[override]
        off = b.offsets[i]
        n = b.sizes[i] + 8  # >= the record length (see block.py)
        try:
            if off >= b.flushed:
                r = parse_msg(b.pend, off - b.flushed)
            else:
                r = self._read_flushed(b, off, n)
        except OSError as e:
            log.error("block read failed", block=b.path, seq=seq, error=str(e))
            return None
        if r is None or r[0] != seq:
            self._lost_on_read(b, i, seq)
            return None
        ss = self._subject_at(b, i)
        return StoredMsg(ss.subject, seq, r[1], r[4], r[5])  # type: ignore[union-attr]

    def _read_run(self, b: Block, i: int, j: int, seq: int) -> list[StoredMsg]:  # type: ignore[override]
        """:meth:`_read` for the live slots ``i`` .. ``j - 1`` of a block in one pass: one read of the
        flushed bytes they span (at least READ_AHEAD, kept as the read-ahead for the next load, as
        :meth:`_read_flushed` keeps its own), the records parsed from it and the subject looked up once per change
        of subject code.  A record that does not parse from that buffer is read by :meth:`_read` itself, which
        logs and drops an unreadable one as lost; the run ends there.

        This is the read of a consumer catching up (a push consumer, a fetch: every message it delivers): the records
        that lie whole in the read buffer go through block.py ``read_run`` (compiled when the accelerator is built:
        protocol/_speedups.c), ``parse_msg``'s checks with less work (see there); the slots it stops at (the tail
        not yet flushed, a record that does not check out) are read one by one here.  Runs of 100 records of
        128 B: 2.6 -> 1.3 us a message in Python."""
        out: list[StoredMsg] = []
        offsets, sizes = b.offsets, b.sizes
        flushed = b.flushed
        base, buf = 0, b""
        off0 = offsets[i]
        if off0 < flushed:
            end = min(flushed, offsets[j - 1] + sizes[j - 1] + 8)  # sizes + 8 >= record length (block.py)
            ra = self._ra
            if ra is not None and ra[0] is b and ra[1] <= off0 and end <= ra[1] + len(ra[2]):
                base, buf = ra[1], ra[2]
            else:
                try:
                    buf = os.pread(self._fd_for(b), min(flushed, max(end, off0 + READ_AHEAD)) - off0, off0)
                except OSError:
                    buf = b""  # each record is then read by _read, which logs the failure
                base = off0
        pend = b.pend
        codes = b.codes
        append = out.append
        ra_end = -1  # file offset just after the last record parsed from buf
        while i < j:
            off = offsets[i]
            if buf and off < flushed:
                i, seq, e = read_run(out, buf, base, flushed, offsets, codes, i, j, seq, self._subject_of_code,
                                     StoredMsg)
                if e >= 0:
                    ra_end = e
                if i >= j:
                    break
                off = offsets[i]
            r = parse_msg(pend, off - flushed) if off >= flushed else None
            if r is None or r[0] != seq:
                m = self._read(b, i, seq)
                if m is None:
                    break
                append(m)
            else:
                append(StoredMsg(self._subject_at(b, i).subject, seq, r[1], r[4], r[5]))  # type: ignore[union-attr]
            i += 1
            seq += 1
        if ra_end >= 0 and buf:
            self._ra = (b, base, buf, ra_end)
        return out

    def _subject_of_code(self, icode: int) -> str:
        return self._state_of_code(icode).subject  # type: ignore[union-attr]

    def _read_flushed(self, b: Block, off: int, n: int) -> tuple | None:
        """Parse the record at ``off`` (at most ``n`` bytes long) of a block's flushed part.

        A reader that goes on exactly where the previous read ended (a consumer catching up) gets a
        read-ahead of READ_AHEAD bytes, so one pread serves hundreds of records; other reads (KV gets,
        direct gets) read just the record."""
        ra = self._ra
        base, buf = 0, b""
        if ra is not None and ra[0] is b and ra[1] <= off and off + n <= ra[1] + len(ra[2]):
            base, buf = ra[1], ra[2]
            r = parse_msg(buf, off - base)
        elif ra is not None and ra[0] is b and off == ra[3]:
            base = off
            buf = os.pread(self._fd_for(b), min(b.flushed, off + max(READ_AHEAD, n)) - off, off)
            r = parse_msg(buf, 0)
        else:
            r = parse_msg(os.pread(self._fd_for(b), n, off))
        if r is not None:
            rlen = n - 4 if r[4] else n  # see block.py: rlen = size+8, or size+4 with headers
            self._ra = (b, base, buf, off + rlen)
        return r

    def _lost_on_read(self, b: Block, i: int, seq: int) -> None:
        log.error("CORRUPT RECORD found on read: message lost", block=b.path, seq=seq, offset=b.offsets[i])
        lost_bytes = b.sizes[i]
        self._remove(seq)
        b.lost.append(seq)
        b.lost_bytes += lost_bytes
        self._lost_msgs.append(seq)
        self._lost_bytes += lost_bytes

    # ================================================================================================ flush
    def _write_all(self, fd: int, data: bytes | bytearray, off: int, first: int | None = None) -> None:
        """Write all of ``data`` at ``off``.  ``first``: what a first write of all of it already returned (flush
        makes that call itself; this finishes a short write, or raises for a write that wrote nothing)."""
        view = memoryview(data)
        try:
            n = first
            while view:
                if n is None:
                    n = self._write(fd, view, off)
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[n:]
                off += n
                n = None
        finally:
            view.release()

    def flush(self) -> None:
        if self._closed or not (self._wq or self._dead or self._pwrites or self._compact_check):
            return
        if self._dead:
            self._relocate_dead()
        pre: list[tuple[Block, int]] = []
        try:
            write = self._write
            for b in self._wq:
                b.in_wq = False
                pend = b.pend
                if b.dead or not pend:
                    b.pend = bytearray()
                    continue
                fd = b.fd if b.fd is not None else self._fd_for(b)
                pre.append((b, b.flushed))
                n = write(fd, pend, b.flushed)  # one pwrite, all of it, nearly always
                if n != len(pend):
                    self._write_all(fd, pend, b.flushed, n)  # short or failed: finish it or raise
                b.tail = bytes(pend[-4:])
                if b.crc is not None:
                    b.crc = zlib.crc32(pend, b.crc)
                with self._sync_lock:
                    b.flushed += len(b.pend)
                    self._unsynced.add(b)
                b.pend = bytearray()
            if self._pwrites:
                self._ra = None
            for b, off, rec in self._pwrites:
                if not b.dead:
                    b.crc = None  # bytes changed in place: the running checksum no longer describes the file
                    self._write_all(self._fd_for(b), rec, off)
                    with self._sync_lock:
                        self._unsynced.add(b)
        except OSError as e:
            self._rollback(e, pre)
        self._wq.clear()
        self._pwrites.clear()
        self._batch_seqs.clear()
        self._batch_removed.clear()
        self._flushed_last = (self._last_seq, self._last_ts)
        if self._dead or self._to_seal:
            self._write_state()  # before a dead block is unlinked: see state.py
        if self._dead:
            paths = [p for b in self._dead for p in self._forget_block_files(b)]
            self._dead.clear()
            self._unlink(paths)
        if self._to_seal:
            for b in self._to_seal:
                if not b.dead and b.flushed == b.size:
                    self._write_summary(b)
                    self._close_block_fd(b, only_if_idle=True)
            self._to_seal.clear()
        if self._compact_check:
            self._maybe_compact()

    def _maybe_compact(self) -> None:
        """Compact at most one sealed block that is less than half live (compact.py)."""
        newest = self._chunks[-1] if self._chunks else None
        for b in list(self._compact_check):
            self._compact_check.discard(b)
            if b is newest:
                continue  # added again when it is sealed
            if not b.dead and worth_compacting(b, self.config.block_size) and compact_block(self, b):
                return

    def _after_compaction(self, b: Block, image: bytes, offsets, tombs: list[int], floors: list[int]) -> None:
        if self._ra is not None and self._ra[0] is b:
            self._ra = None
        self._close_block_fd(b)  # it refers to the replaced file
        with self._sync_lock:
            b.size = b.flushed = b.synced = len(image)
            self._unsynced.discard(b)
            self._dir_dirty = True
            self._fresh.clear()  # write_atomic(durable=True) fsynced msgs/: every name in it is on the disk
        b.offsets, b.tombs, b.floors, b.tail = offsets, tombs, floors, image[-4:]
        b.crc = zlib.crc32(image)
        b.dirty = True
        self._write_summary(b)

    def _rollback(self, err: OSError, pre: list[tuple[Block, int]]) -> None:
        batch, removed = list(self._batch_seqs), list(self._batch_removed)
        log.error("block write failed, rolling back to what is on disk", dir=self.dir, error=str(err),
                  unstored=len(batch))
        for b, length in pre:
            try:
                os.ftruncate(b.fd, length)  # type: ignore[arg-type]
            except OSError as e:
                log.error("truncate after failed write failed", block=b.path, error=str(e))
        self._reload()
        failed = [s for s in batch if not self._is_live(s)]
        undone = [s for s in removed if self._is_live(s)]
        raise StoreWriteError(failed, err, undone)

    def _relocate_dead(self) -> None:
        """Copy the tombstones/floors of blocks about to be deleted that still matter to the newest block."""
        oldest = self._chunks[0].first if self._chunks else 0
        for d in self._dead:
            for t in d.tombs:
                c, _ = self._locate(t)
                if c is not None:
                    self._append_control(KIND_TOMBSTONE, t).tombs.append(t)
            for f in d.floors:
                if self._chunks and oldest < f and self._chunks[-1] is not d:
                    self._record_floor(f)

    def _forget_block_files(self, b: Block) -> tuple[str, str]:
        """Stop using a dead block's files; their paths, to unlink."""
        if self._ra is not None and self._ra[0] is b:
            self._ra = None
        self._close_block_fd(b)
        with self._sync_lock:
            self._unsynced.discard(b)
            self._fresh.discard(b)
        self._unsynced_files.discard(b.idx_path)
        return b.path, b.idx_path

    def _unlink(self, paths: list[str]) -> None:
        """Unlink dead blocks' files (the state file no longer names them).  A few (a block aging out of a limits
        stream) on the loop; more (a purge of a million messages is ~40 blocks, ~30-60 ms of unlink) in a thread
        that keeps yielding the GIL (storage/remove.py), so other clients are not stalled.  Either way ``msgs/``
        is marked for the next fsync only after the unlinks, so that fsync makes them durable."""
        def dir_dirty() -> None:
            with self._sync_lock:
                self._dir_dirty = True

        def failed(path: str, e: OSError) -> None:
            log.error("could not delete block file", path=path, error=str(e))

        if len(paths) <= INLINE_UNLINKS:
            for p in paths:
                unlink_quietly(p, failed)
            dir_dirty()
            return
        self._unlinking = [t for t in self._unlinking if t.is_alive()]
        self._unlinking.append(unlink_in_background(paths, dir_dirty))

    def _wait_unlinks(self) -> None:
        for t in self._unlinking:
            t.join()
        self._unlinking.clear()

    def _write_summary(self, b: Block) -> None:
        if b.flushed != b.size or b.flushed == 0:
            return
        try:
            meta.write_atomic(b.idx_path, encode_summary(b, self._subject_name), durable=False)  # type: ignore[union-attr]
            self._unsynced_files.add(b.idx_path)
            b.dirty = False
            b.summary_covered = b.flushed
        except OSError as e:
            log.warning("could not write block summary (a restart will scan the block)", block=b.path, error=str(e))

    # ================================================================================================ verification
    def verify_blocks(self) -> list[tuple[Block, int, int]]:
        """Check every block recovered from its summary against the checksum the summary holds; returns the
        ``(block, covered, crc)`` entries that do not match.  Reads files by path only: safe in a worker thread
        while the loop thread keeps using the store (start-up stays fast; see index.py)."""
        bad = []
        for entry in self._to_verify:
            b, covered, crc = entry
            c, left = 0, covered
            try:
                with open(b.path, "rb") as f:
                    while left > 0:
                        d = f.read(min(left, 1 << 20))
                        if not d:
                            break
                        c = zlib.crc32(d, c)
                        left -= len(d)
            except OSError:
                continue  # deleted or replaced meanwhile
            if left > 0 or c != crc:
                bad.append(entry)
        return bad

    def check_blocks(self, bad: list[tuple[Block, int, int]]) -> list[int]:
        """On the loop thread: read back every live message of the blocks ``verify_blocks`` flagged; a record
        that fails its CRC is reported lost (logged with block and sequence, ``state().lost``).  Returns the lost
        sequences."""
        self._to_verify = []
        lost: list[int] = []
        for b, covered, crc in bad:
            if self._closed or b.dead or b.crc is None or b.summary_covered != covered:
                continue  # compacted, erased or gone since: what was checked is not this file any more
            log.error("BLOCK CHECKSUM MISMATCH: reading every message of the block", block=b.path)
            before = len(self._lost_msgs)
            for i in range(b.nslots()):
                if b.live(i):
                    self._read(b, i, b.first + i)
            found = self._lost_msgs[before:]
            if not found:
                log.warning("block checksum mismatch, but every message reads back (the damage is in removed or "
                            "control records)", block=b.path)
            lost.extend(found)
        return lost

    # ================================================================================================ state file
    def _write_state(self, durable: bool = False) -> None:
        """Write ``msgs/state.dat`` from the loop thread (everything in ``_chunks`` is flushed when this runs)."""
        blocks = tuple((b.index, b.first, b.hi) for b in self._chunks if not b.dead and b.flushed > 0)  # type: ignore[attr-defined]
        self._flushed_blocks = blocks  # published before the lock is taken: the sync thread never writes older
        with self._state_lock:
            self._put_state(blocks, durable)

    def _put_state(self, blocks: tuple, durable: bool) -> None:
        last, ts = self._flushed_last
        key = (last, ts, blocks, len(self._lost_msgs))
        if key == self._state_written and not durable:
            return
        if not write_state(self.msgs_dir, StreamFileState(last, ts, list(blocks), list(self._lost_msgs[:MAX_LOST])),
                           durable):
            return
        self._state_written = key
        if durable:
            self._unsynced_files.discard(state_path(self.msgs_dir))
        else:
            self._unsynced_files.add(state_path(self.msgs_dir))

    def _sync_state(self) -> None:
        """From ``sync`` (any thread): write and fsync the state file, at most once per sync interval, as
        nats-server writes index.db from its periodic sync."""
        now = time.monotonic()
        if now - self._state_synced_at < self.config.sync_interval / 1e9:
            return
        self._state_synced_at = now
        with self._state_lock:
            if self._closed:
                return  # stopped, or died (skiff.testing.faults): nothing more reaches its files
            self._put_state(self._flushed_blocks, durable=True)

    # ================================================================================================ sync
    @property
    def needs_sync(self) -> bool:
        return bool(self._unsynced) or self._dir_dirty

    def sync(self) -> None:
        """fsync everything flushed before this call.  Safe to run in a worker thread.

        Works on ``dup``'ed descriptors (or the block reopened by path when the store closed its descriptor:
        fsync flushes the file, whichever descriptor asks), so the loop thread may close or delete blocks
        meanwhile.  OSError from fsync propagates (the data may not be durable)."""
        todo: list[tuple[int, Block, int]] = []
        with self._sync_lock:
            for b in self._unsynced:
                try:
                    fd = os.dup(b.fd) if b.fd is not None else os.open(b.path, os.O_RDONLY)
                except FileNotFoundError:
                    continue  # deleted meanwhile
                todo.append((fd, b, b.flushed))
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            fresh, self._fresh = self._fresh, set()
        try:
            for fd, _, _ in todo:
                self._fsync(fd)
            if dir_dirty:
                meta.fsync_dir(self.msgs_dir)
        except BaseException:
            with self._sync_lock:  # msgs/ was not fsynced: the next sync does it
                self._dir_dirty = self._dir_dirty or dir_dirty
                self._fresh |= fresh
            raise
        finally:
            for fd, _, _ in todo:
                os.close(fd)
        with self._sync_lock:
            for _, b, upto in todo:
                if upto > b.synced:
                    b.synced = upto
                if b.synced >= b.flushed:
                    self._unsynced.discard(b)
        self._sync_state()

    # ================================================================================================ lifecycle
    def _close_fds(self) -> None:
        with self._sync_lock:
            blocks = [b for b in [*self._chunks, *self._dead, *self._to_seal] if getattr(b, "fd", None) is not None]
            fds = []
            for b in blocks:
                if b.fd is not None:
                    fds.append(b.fd)
                    b.fd = None
            self._unsynced.clear()
        self._read_fds.clear()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def stop(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        except StoreWriteError as e:
            log.error("final flush failed", dir=self.dir, error=str(e))
        self._wait_unlinks()  # the final sync covers them, and a store reopened at once finds no stale block
        try:
            self.sync()
        except OSError as e:
            log.error("final sync failed", dir=self.dir, error=str(e))
        for b in self._chunks:
            if b.dirty:  # type: ignore[attr-defined]
                self._write_summary(b)  # type: ignore[arg-type]
        self._write_state(durable=True)
        self._close_fds()
        self._closed = True

    def delete(self) -> None:
        self._wait_unlinks()
        self._close_fds()
        self._closed = True
        import shutil  # imported when used: shutil brings bz2 and lzma, ~5 ms of every start

        shutil.rmtree(self.dir, ignore_errors=True)

    # ================================================================================================ extras
    def write_meta(self, obj: object) -> None:
        """Write the stream's metadata (``meta.inf``) atomically."""
        meta.write_meta(os.path.join(self.dir, meta.META_FILE), obj)

    def read_meta(self) -> object:
        return meta.read_meta(os.path.join(self.dir, meta.META_FILE))

    def stored_consumers(self) -> tuple[int, list]:
        from skiff.storage.consumer import stored_consumers

        return stored_consumers(os.path.join(self.dir, CONSUMER_DIR))

    def consumer_store(self, name: str, ack_policy: str = "explicit", max_deliver: int = -1) -> ConsumerStore:
        from skiff.storage.consumer import FileConsumerStore

        d = Path(self.dir) / CONSUMER_DIR / check_name(name, "consumer name")
        return FileConsumerStore(d, ack_policy, max_deliver, durable=self.config.sync_always)
