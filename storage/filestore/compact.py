"""Block compaction: give back the space of removed messages in sealed blocks.

Theory of operation
-------------------
A block is deleted once it holds no live message, but a block that keeps a few (a KV key nobody updates,
messages a work queue has not acked yet) would keep all its removed records on disk forever.  After a flush,
the store looks at sealed blocks that lost messages since; one that is less than half live (by bytes) is
rewritten, one block per flush so the pause stays short (a block is at most ``block_size``):

    BLOCK header (same first sequence, the stream's last timestamp of the original header)
    every live MSG record, byte for byte (offsets change, nothing else)
    the tombstones of this block whose target still lies in an older surviving block
    the floors of this block that still cut into a surviving block

The new image is written to ``<index>.blk.tmp``, fsynced and renamed over the block (meta.write_atomic: a
crash leaves the old block or the new one; recovery deletes a leftover ``.tmp``), then a fresh summary is
written.  The newest block is never compacted (it still grows, and its records carry the stream's last
sequence).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.log import get_logger

from skiff.storage import meta
from skiff.storage.filestore.block import HEAD, KIND_BLOCK, KIND_FLOOR, KIND_MSG, KIND_TOMBSTONE, encode_control
from skiff.storage.filestore.index import Block
from skiff.storage.seqindex import LIVE

if TYPE_CHECKING:
    from skiff.storage.filestore.store import FileStreamStore

log = get_logger("skiff.storage")

MIN_UTILIZATION = 0.5  # compact a sealed block when live bytes fall below this share of its size


def worth_compacting(b: Block, block_size: int) -> bool:
    return b.size > block_size // 8 and sum(b.sizes) < b.size * MIN_UTILIZATION


def compact_block(fs: "FileStreamStore", b: Block) -> bool:
    """Rewrite sealed block ``b`` with only what still matters; returns True when it did."""
    if b.dead or b.pend or b.flushed != b.size or not fs._chunks or b is fs._chunks[-1]:
        return False
    try:
        with open(b.path, "rb") as f:
            data = f.read()
    except OSError as e:
        log.warning("block compaction skipped: cannot read block", block=b.path, error=str(e))
        return False
    if len(data) != b.size:
        return False
    h0 = HEAD.unpack_from(data, 0) if len(data) >= HEAD.size else None
    hdr_ts = h0[5] if h0 is not None and h0[1] == KIND_BLOCK else b.hi_ts
    out = bytearray(encode_control(KIND_BLOCK, b.first, hdr_ts))
    offsets = b.offsets[:]
    codes = b.codes
    for i in range(len(codes) >> 2):
        if codes[i << 2] != LIVE:
            continue
        off = b.offsets[i]
        h = HEAD.unpack_from(data, off)
        if h[1] != KIND_MSG or h[4] != b.first + i:
            log.error("block compaction skipped: index and block disagree", block=b.path, seq=b.first + i)
            return False
        offsets[i] = len(out)
        out += data[off:off + h[3]]
    oldest = fs._chunks[0].first
    tombs = [t for t in b.tombs if t < b.first and fs._locate(t)[0] is not None]
    floors = [f for f in b.floors if oldest < f]
    for t in tombs:
        out += encode_control(KIND_TOMBSTONE, t, 0)
    for f in floors:
        out += encode_control(KIND_FLOOR, f, b.hi_ts)
    try:
        meta.write_atomic(b.path, bytes(out), durable=True)
    except OSError as e:
        log.warning("block compaction failed, block left as it was", block=b.path, error=str(e))
        return False
    fs._after_compaction(b, bytes(out), offsets, tombs, floors)
    log.debug("block compacted", block=b.path, before=len(data), after=len(out))
    return True
