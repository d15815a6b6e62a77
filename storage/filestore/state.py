"""The stream state file ``msgs/state.dat``: what the blocks cannot say about themselves once one is gone.

Theory of operation
-------------------
Every block starts with a BLOCK record and every record carries its sequence, so the blocks describe the stream, as
long as they are all there.  What an OS crash, a power loss or a careless hand can leave (a newest block of zero
length, a middle block missing or empty) they cannot describe: without more, the stream's last sequence would go
back and new messages would get sequences other messages had.  nats-server keeps the same
facts in ``msgs/index.db`` (its full stream state, written by ``writeFullState`` at stop and at every sync) and on
recovery keeps ``last_seq`` when the newest block came back short ("Stream state outdated, last block has
additional entries, will rebuild").

The file holds the stream's last sequence and timestamp, the blocks that held flushed data (index, first slot,
highest sequence), and the sequences already known to be lost.  It is written, atomically (meta.py), when

- the set of blocks changes: a block is sealed (the store moved on to a new one) or about to be deleted; the file
  is written *before* a dead block is unlinked, so a block the file lists and the directory lacks was never deleted
  by the store: it is lost;
- the store syncs (the periodic fsync, or every fsync with ``sync_always``): written and fsynced in the sync thread
  from a snapshot the loop thread published after its last successful write, so it never names a sequence that was
  not handed to the OS;
- the store stops, after the final flush.

Recovery (recovery.py) reads it after the blocks: a listed block that is missing or empty loses its sequences, the
stream's last sequence is at least the file's, and every sequence accounted for by neither the blocks nor the file
is reported lost (log line naming the block and the sequences, ``state().lost``, ``num_deleted``).  A missing or
unreadable state file costs nothing but that knowledge.

File layout: the meta.py wrapper (b"SKM1", crc32, msgpack) around a msgpack map:
    v         1
    last_seq  the stream's last sequence when written;  last_ts: its timestamp (ns)
    blocks    [[index, first, hi], ...]: every block file holding flushed data, oldest first
    lost      [seq, ...]: sequences known lost (at most MAX_LOST), so a loss stays reported after a restart
"""
from __future__ import annotations

import os
from typing import NamedTuple

from skiff.log import get_logger

from skiff.storage import meta

log = get_logger("skiff.storage")

STATE_FILE = "state.dat"
STATE_VERSION = 1
MAX_LOST = 100_000  # a lost range cannot name more real messages than this (the rest is still counted deleted)


class StreamFileState(NamedTuple):
    last_seq: int
    last_ts: int
    blocks: list[tuple[int, int, int]]  # (index, first, hi)
    lost: list[int]


def state_path(msgs_dir: str) -> str:
    return os.path.join(msgs_dir, STATE_FILE)


def write_state(msgs_dir: str, st: StreamFileState, durable: bool) -> bool:
    """Write the state file; False (logged) when it could not be written: the file is then as it was."""
    doc = {"v": STATE_VERSION, "last_seq": st.last_seq, "last_ts": st.last_ts,
           "blocks": [list(b) for b in st.blocks], "lost": st.lost[:MAX_LOST]}
    try:
        meta.write_atomic(state_path(msgs_dir), meta.encode(doc), durable=durable)
    except OSError as e:
        log.warning("could not write the stream state file (a lost block would go unnoticed)", dir=msgs_dir,
                    error=str(e))
        return False
    return True


def read_state(msgs_dir: str) -> StreamFileState | None:
    path = state_path(msgs_dir)
    try:
        doc = meta.read_meta(path)
        if not isinstance(doc, dict) or doc.get("v") != STATE_VERSION:
            raise ValueError("unknown state file version")
        blocks = [(int(i), int(f), int(h)) for i, f, h in doc["blocks"]]
        return StreamFileState(int(doc["last_seq"]), int(doc["last_ts"]), blocks, [int(s) for s in doc["lost"]])
    except FileNotFoundError:
        return None
    except Exception as e:
        log.warning("stream state file unusable, recovering from the blocks alone", path=path, error=str(e))
        return None
