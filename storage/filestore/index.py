"""The per-block index: the in-memory ``Block`` and its on-disk summary ``msgs/<index>.idx``.

Theory of operation
-------------------
A ``Block`` is an engine chunk (one slot per sequence: subject code, timestamp, accounted size) plus
what the file store needs: the record offset of every slot, the write state of the file (``size`` = logical
length including the unflushed tail ``pend``, ``flushed`` = handed to the OS, ``synced`` = fsynced), and the
control records it holds (``tombs``, ``floors``) so a block can be deleted without resurrecting anything.

So that a restart need not read every record, a block's index is written as a *summary* file: the slot
arrays as raw bytes, the block's subjects with per-subject (count, first, last), TTLs, tombstones, floors,
lost sequences, and ``covered``/``tail`` (how many bytes of the block file it describes, and the last four
of them, i.e. the CRC of the last record).  A summary is only trusted if the block file is at least
``covered`` bytes long and ends that range with the same ``tail``; bytes past ``covered`` (appended after
the summary was written, e.g. before a ``kill -9``) are scanned.  Damage inside the covered range (a bit flip in
a middle record) leaves the tail intact: the summary also holds the crc32 of the whole covered range, which the
server checks in a worker thread after start (``FileStreamStore.verify_blocks``), so start-up does not read every
block and a damaged one is still found and its lost messages reported.  A missing, stale or corrupt summary only
costs a full scan of that block.  Summaries are written after a successful flush: when a block is sealed
(the store moved on to a new block), and for every block whose deletions changed at a clean ``stop``.
"""
from __future__ import annotations

import sys
from array import array
from typing import Any, Callable

from skiff.storage import meta
from skiff.storage.seqindex import Chunk, code_ints

SUMMARY_VERSION = 2  # 2: subjects as one string, stats as a flat array (1: lists; still read)
LOCAL_DELETED = 0xFFFFFFFF  # local subject index of a removed slot in a summary


class Block(Chunk):
    __slots__ = ("index", "path", "offsets", "size", "flushed", "synced", "pend", "fd", "tombs", "floors",
                 "ttls", "lost", "lost_bytes", "dirty", "in_wq", "dead", "tail", "summary_covered", "hi", "hi_ts",
                 "crc")

    def __init__(self, first: int, index: int, path: str) -> None:
        super().__init__(first)
        self.index = index
        self.path = path
        self.offsets = array("I")
        self.size = 0
        self.flushed = 0
        self.synced = 0
        self.pend = bytearray()
        self.fd: int | None = None
        self.tombs: list[int] = []
        self.floors: list[int] = []
        self.ttls: dict[int, int] | None = None  # slot -> ttl seconds, for messages stored with a TTL
        self.lost: list[int] = []
        self.lost_bytes = 0
        self.dirty = True  # the summary on disk (if any) does not describe this block any more
        self.in_wq = False
        self.dead = False
        self.tail = b""
        self.summary_covered = 0
        self.hi = 0  # highest sequence any record of this block consumed (messages, skips, floors, header)
        self.hi_ts = 0  # timestamp of the newest message/skip record
        self.crc: int | None = 0  # crc32 of the flushed bytes of the file (None: unknown after an in-place erase)

    @property
    def idx_path(self) -> str:
        return self.path[:-4] + ".idx"

    def index_bytes(self) -> int:
        return super().index_bytes() + 4 * len(self.offsets)


# Summary file <index>.idx: the meta.py wrapper (b"SKM1", crc32, msgpack) around a msgpack map:
#   v         1
#   bo        byte order of the arrays below ("little" / "big")
#   index     block index (must match the file name)
#   first     sequence of slot 0
#   covered   block file bytes described; tail: the last 4 of them (CRC of the last record)
#   sids      array('I') bytes: per slot, index into "subjects", or 0xFFFFFFFF for a removed slot
#   ts        array('q') bytes: per slot store time (ns)
#   sizes     array('I') bytes: per slot accounted size (0 when removed)
#   offsets   array('I') bytes: per slot record offset in the block file
#   subjects  live subjects of the block, joined by "\n" (a list when a subject holds "\n")
#   stats     array('Q') bytes: count, first seq, last seq of each subject, in the same order
#   ttls      [[slot, ttl seconds], ...] for messages stored with a TTL
#   tombs     [seq, ...] tombstones held by this block; floors: [seq, ...] floor records held
#   lost      [seq, ...] sequences lost to corruption in this block; lost_bytes: their byte count
#   hi, hi_ts highest sequence any record of the block consumed, and the newest message/skip time
#   crc       crc32 of the ``covered`` bytes (nil when unknown), so a restart can check the whole block off the loop
def encode_summary(b: Block, subject_of: Callable[[int], str]) -> bytes:
    """Summary of a fully flushed block (``b.flushed == b.size``)."""
    local: dict[int, int] = {}
    subjects: list[str] = []
    stats: list[list[int]] = []  # [count, first, last] per local subject
    lsids = array("I")
    append = lsids.append
    first = b.first
    for j, s in enumerate(code_ints(b.codes)):
        if s == 0:
            append(LOCAL_DELETED)
            continue
        li = local.get(s)
        if li is None:
            li = local[s] = len(subjects)
            subjects.append(subject_of(s))
            stats.append([0, first + j, 0])
        st = stats[li]
        st[0] += 1
        st[2] = first + j
        append(li)
    doc = {
        "v": SUMMARY_VERSION,
        "bo": sys.byteorder,
        "index": b.index,
        "first": b.first,
        "covered": b.flushed,
        "tail": b.tail,
        "sids": lsids.tobytes(),
        "ts": b.ts.tobytes(),
        "sizes": b.sizes.tobytes(),
        "offsets": b.offsets.tobytes(),
        "subjects": _join_subjects(subjects),
        "stats": array("Q", [x for st in stats for x in st]).tobytes(),
        "ttls": [[k, v] for k, v in b.ttls.items()] if b.ttls else [],
        "tombs": b.tombs,
        "floors": b.floors,
        "lost": b.lost,
        "lost_bytes": b.lost_bytes,
        "hi": b.hi,
        "hi_ts": b.hi_ts,
        "crc": b.crc,
    }
    return meta.encode(doc)


def _join_subjects(subjects: list[str]) -> str | list[str]:
    joined = "\n".join(subjects)
    return joined if joined.count("\n") == len(subjects) - 1 else subjects


def _arr(code: str, raw: bytes, swap: bool) -> array:
    a = array(code)
    a.frombytes(raw)
    if swap:
        a.byteswap()
    return a


def decode_summary(raw: bytes, path: str) -> dict[str, Any]:
    """Decode and sanity-check a summary; raises CorruptMetadataError or ValueError when unusable."""
    doc = meta.decode(raw, path)
    if not isinstance(doc, dict) or doc.get("v") not in (1, SUMMARY_VERSION):
        raise ValueError("unknown summary version")
    swap = doc["bo"] != sys.byteorder
    subjects = doc["subjects"]
    if isinstance(subjects, str):
        doc["subjects"] = subjects.split("\n") if subjects else []
    if doc["v"] == 1:
        doc["stats"] = [x for st in doc["stats"] for x in st]
    else:
        doc["stats"] = _arr("Q", doc["stats"], swap)
    n = len(doc["ts"]) // 8
    doc["sids"] = _arr("I", doc["sids"], swap)
    doc["ts"] = _arr("q", doc["ts"], swap)
    doc["sizes"] = _arr("I", doc["sizes"], swap)
    doc["offsets"] = _arr("I", doc["offsets"], swap)
    if not (len(doc["sids"]) == len(doc["ts"]) == len(doc["sizes"]) == len(doc["offsets"]) == n):
        raise ValueError("summary arrays disagree in length")
    if len(doc["stats"]) != 3 * len(doc["subjects"]):
        raise ValueError("summary subject table is inconsistent")
    return doc
