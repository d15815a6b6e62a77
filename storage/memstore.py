"""In-memory stream store (nats-server memstore.go) on top of the shared engine.

Theory of operation
-------------------
The engine's chunks get one more parallel list, ``payloads``, holding ``(hdr, data)`` per slot (None once
removed).  Chunks hold a fixed number of sequences so that dropping the oldest is cheap; an emptied chunk
leaves the index.  Nothing is written anywhere: ``flush``/``sync`` do nothing, ``stop`` drops the data.
Message size accounting is nats-server's ``memStoreMsgSize``: len(subj)+len(hdr)+len(data)+16.
"""
from __future__ import annotations

from skiff.storage.base import Clock
from skiff.storage.config import StoreConfig
from skiff.storage.engine import Chunk, IndexedStore, SubjState
from skiff.storage.records import StoredMsg
from skiff.storage.seqindex import _unpack_code

CHUNK_SLOTS = 4096


class MemChunk(Chunk):
    __slots__ = ("payloads",)

    def __init__(self, first: int) -> None:
        super().__init__(first)
        self.payloads: list[tuple[bytes, bytes] | None] = []


class MemoryStreamStore(IndexedStore):
    def __init__(self, config: StoreConfig | None = None, clock: Clock | None = None) -> None:
        super().__init__(config, clock)
        if self.config.first_seq > 1:
            self._reset_to(self.config.first_seq)

    # -- backend hooks ---------------------------------------------------------------------------------------
    # nats-server memStoreMsgSize: len(subj) + len(hdr) + len(msg) + 16.
    _size_base = 16
    _size_base_hdr = 16

    def _new_chunk(self, first: int) -> Chunk:
        return MemChunk(first)

    def _chunk_full(self, chunk: Chunk, size: int) -> bool:
        return len(chunk.codes) >= CHUNK_SLOTS << 2

    def _write_msg(self, chunk: MemChunk, seq: int, ss: SubjState, hdr: bytes, data: bytes, ts: int, ttl: int) -> None:  # type: ignore[override]
        # bytes() copies memoryviews/bytearrays handed in by the parser; a no-op for bytes.
        chunk.payloads.append((bytes(hdr), bytes(data)))

    def _fill_gap(self, chunk: MemChunk, n: int) -> None:  # type: ignore[override]
        chunk.payloads.extend([None] * n)

    def _read(self, chunk: MemChunk, i: int, seq: int) -> StoredMsg | None:  # type: ignore[override]
        p = chunk.payloads[i]
        if p is None:
            return None
        ss = self._subject_at(chunk, i)
        return StoredMsg(ss.subject, seq, chunk.ts[i], p[0], p[1])  # type: ignore[union-attr]

    def _read_run(self, chunk: MemChunk, i: int, j: int, seq: int) -> list[StoredMsg]:  # type: ignore[override]
        """:meth:`_read` for the live slots ``i`` .. ``j - 1``, the subject looked up once per change of subject
        code (a run is mostly one subject)."""
        out: list[StoredMsg] = []
        codes, payloads, ts = chunk.codes, chunk.payloads, chunk.ts
        last = -1
        subject = ""
        while i < j:
            p = payloads[i]
            if p is None:
                break
            icode = _unpack_code(codes, i << 2)[0]
            if icode != last:
                subject = self._state_of_code(icode).subject  # type: ignore[union-attr]
                last = icode
            out.append(StoredMsg(subject, seq, ts[i], p[0], p[1]))
            i += 1
            seq += 1
        return out

    def _record_removal(self, chunk: MemChunk, i: int, seq: int, secure: bool) -> None:  # type: ignore[override]
        chunk.payloads[i] = None

    def _bulk_remove_below(self, seq: int) -> int:
        n = super()._bulk_remove_below(seq)
        if self._chunks and self._chunks[0].first < seq:
            c = self._chunks[0]
            hi = min(len(c.codes) >> 2, seq - c.first)
            c.payloads[:hi] = [None] * hi  # type: ignore[attr-defined]
        return n

    # -- lifecycle -------------------------------------------------------------------------------------------
    def flush(self) -> None:
        return None

    def sync(self) -> None:
        return None

    def stop(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        self._reset_index()
