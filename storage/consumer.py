"""Consumer state stores: delivered / ack floor / pending / redelivered (nats-server consumerMemStore).

Theory of operation
-------------------
The state is the one nats-server keeps per consumer (store.go ``ConsumerState``):

    delivered    (consumer_seq, stream_seq) of the newest delivery
    ack_floor    (consumer_seq, stream_seq) below which everything is acknowledged
    pending      stream_seq -> (first delivery's consumer seq, last delivery time ns)  [ack explicit/all]
    redelivered  stream_seq -> times redelivered (delivery count - 1), only for counts > 1

``update_delivered`` and ``update_acks`` are transcriptions of consumerMemStore.UpdateDelivered/UpdateAcks,
including the ack floor walk after an in-order explicit ack and AckAll clearing everything up to the acked
sequence.  They run on the loop thread and never do I/O.  They run for every delivery and every ack of a push or
pull consumer, so the pending entries are plain ``(sequence, timestamp)`` tuples (a ``Pending`` NamedTuple costs
a Python-level ``__new__``, ~0.3 us, per delivery); :meth:`~MemoryConsumerStore.state` hands out ``Pending``
values.

The file variant persists the state to ``obs/<name>/o.dat`` (msgpack inside the checksummed wrapper of
meta.py, temp file + rename) when ``flush()`` is called and something changed; an idle consumer costs one
small object and no I/O.  ``flush()`` = ``snapshot()`` (encode on the loop thread) + ``write_snapshot()``; with
``sync_interval: always`` the server splits the two and runs the write, with its fsyncs, in the group-commit worker
(server/jetstream/durability.py), and the timer's writes go to a worker thread too (server/jetstream/
stream_consumers.py), so a lock keeps one store's writes from interleaving and snapshot numbers keep a late older
state from replacing a newer one.  ``delete()`` renames the
directory aside (``.deleted.<name>.<random>``) before removing it, so a crash leaves the consumer whole or gone;
``discard()`` only closes the store, for a consumer whose stream directory was already renamed aside.  A state file that cannot be read is logged, renamed to ``o.dat.corrupt``, and the
consumer starts from an empty state with ``recovery_error`` set; it never raises.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from skiff.log import get_logger

from skiff.storage import meta
from skiff.storage.base import ConsumerStore
from skiff.storage.errors import NoAckPolicyError
from skiff.storage.records import ConsumerState, Pending, SequencePair

log = get_logger("skiff.storage")

ACK_NONE = "none"
ACK_ALL = "all"
ACK_EXPLICIT = "explicit"
ACK_FLOW_CONTROL = "flow_control"
STATE_FILE = "o.dat"  # nats-server consumerState


class MemoryConsumerStore(ConsumerStore):
    __slots__ = ("ack_policy", "max_deliver", "dc", "ds", "ac", "as_", "pending", "redelivered", "dirty",
                 "closed", "recovery_error")

    def __init__(self, ack_policy: str = ACK_EXPLICIT, max_deliver: int = -1) -> None:
        self.ack_policy = ack_policy
        self.max_deliver = max_deliver
        self.dc = self.ds = self.ac = self.as_ = 0  # delivered / ack floor, consumer and stream seqs
        self.pending: dict[int, tuple[int, int]] = {}  # (sequence, timestamp): Pending's fields, see state()
        self.redelivered: dict[int, int] = {}
        self.dirty = False
        self.closed = False
        self.recovery_error: str | None = None

    # -- the nats-server transitions -------------------------------------------------------------------------
    def update_delivered(self, dseq: int, sseq: int, dc: int, ts: int) -> None:
        if dc != 1 and self.ack_policy == ACK_NONE:
            raise NoAckPolicyError()
        if dseq <= self.ac:  # an old replay
            return
        self.dirty = True
        if self.ack_policy != ACK_NONE:
            pending = self.pending
            if sseq <= self.ds:
                p = pending.get(sseq)
                if p is not None:
                    # Keep the original delivery sequence, refresh the time.
                    pending[sseq] = (p[0], ts)
            else:
                pending[sseq] = (dseq, ts)
            if dseq > self.dc:
                self.dc = dseq
            if sseq > self.ds:
                self.ds = sseq
            if dc > 1:
                if 0 < self.max_deliver < dc:
                    pending.pop(sseq, None)
                if self.redelivered.get(sseq, 0) < dc - 1:
                    self.redelivered[sseq] = dc - 1
        else:
            if dseq > self.dc:
                self.dc = self.ac = dseq
            if sseq > self.ds:
                self.ds = self.as_ = sseq

    def update_delivered_run(self, dseq: int, msgs) -> None:
        """update_delivered(dseq + k, msgs[k].seq, 1, msgs[k].ts) for each k, in one pass: new messages (above
        ``ds``) in stream order only add pending entries and move ``delivered`` to the last; anything else goes one
        by one."""
        if not msgs:
            return
        if dseq <= self.ac or msgs[0].seq <= self.ds:
            super().update_delivered_run(dseq, msgs)
            return
        self.dirty = True
        last = dseq + len(msgs) - 1
        if self.ack_policy == ACK_NONE:
            if last > self.dc:
                self.dc = self.ac = last
            self.ds = self.as_ = msgs[-1].seq
            return
        # One C-level pass: StoredMsg is (subject, seq, ts, hdr, data).
        self.pending.update({m[1]: (d, m[2]) for d, m in zip(range(dseq, last + 1), msgs)})
        if last > self.dc:
            self.dc = last
        self.ds = msgs[-1].seq

    def update_acks(self, dseq: int, sseq: int) -> bool:
        # Once per ack: attributes read once, the pending entry popped in the same lookup that finds it.
        policy = self.ack_policy
        if policy == ACK_NONE:
            raise NoAckPolicyError()
        redelivered = self.redelivered
        if redelivered and redelivered.pop(sseq, None) is not None:
            self.dirty = True
        ac = self.ac
        if dseq <= ac:
            return False
        pending = self.pending
        if policy in (ACK_ALL, ACK_FLOW_CONTROL):
            if sseq not in pending:
                return False  # nats-server ErrStoreMsgNotFound
            self.dirty = True
            sgap = sseq - self.as_
            self.ac, self.as_ = dseq, sseq
            if sgap > len(pending):
                for s in [s for s in pending if s <= sseq]:
                    del pending[s]
                    redelivered.pop(s, None)
            else:
                s = sseq
                while s > sseq - sgap and pending:
                    pending.pop(s, None)
                    redelivered.pop(s, None)
                    s -= 1
            return True
        p = pending.pop(sseq, None)
        if p is None:
            return False  # nats-server ErrStoreMsgNotFound
        self.dirty = True
        p0 = p[0]
        if dseq > p0 > 0:
            dseq = p0  # use the original delivery sequence
        if not pending:
            self.ac, self.as_ = self.dc, self.ds
        elif dseq == ac + 1:
            if self.dc > dseq:
                # Move the floor up to just below the next outstanding delivery: for acks in order the next
                # sequence, looked at first (the first key of a dict that lost its oldest entries one by one is
                # found by walking over their empty slots: O(acks since the dict was last resized)).
                nxt = sseq + 1
                p2 = pending.get(nxt)
                if p2 is None:
                    if len(pending) < self.ds - sseq:
                        nxt = next(iter(pending))  # the lowest: pending is kept in stream order (see set_state)
                        p2 = pending[nxt]
                    else:
                        for nxt in range(sseq + 2, self.ds + 1):
                            p2 = pending.get(nxt)
                            if p2 is not None:
                                break
                if p2 is not None and p2[0] > 0:
                    self.ac, self.as_ = p2[0] - 1, nxt - 1
                    return True
            self.ac, self.as_ = dseq, sseq
        return True

    def remove_redelivered_below(self, seq: int) -> None:
        if seq and self.redelivered:
            for s in [s for s in self.redelivered if s < seq]:
                del self.redelivered[s]
            self.dirty = True

    def set_starting(self, sseq: int) -> None:
        self.ds = self.as_ = sseq
        self.dirty = True

    def update_starting(self, sseq: int) -> None:
        if sseq > self.ds:
            self.ds = sseq
            if self.ack_policy == ACK_NONE:
                self.as_ = sseq
            self.dirty = True

    def reset(self, sseq: int) -> None:
        self.dc = self.ac = 0
        self.pending = {}
        self.redelivered = {}
        self.set_starting(sseq)

    def has_state(self) -> bool:
        return self.dc != 0 or self.ds != 0

    def update_config(self, ack_policy: str, max_deliver: int) -> None:
        self.ack_policy = ack_policy
        self.max_deliver = max_deliver

    # -- state -----------------------------------------------------------------------------------------------
    @property
    def delivered(self) -> SequencePair:
        return SequencePair(self.dc, self.ds)

    @property
    def ack_floor(self) -> SequencePair:
        return SequencePair(self.ac, self.as_)

    def state(self) -> ConsumerState:
        return ConsumerState(SequencePair(self.dc, self.ds), SequencePair(self.ac, self.as_),
                             {s: Pending(*p) for s, p in self.pending.items()}, dict(self.redelivered))

    def set_state(self, state: ConsumerState, force: bool = False) -> None:
        d, a = state.delivered, state.ack_floor
        if a.consumer_seq > d.consumer_seq:
            raise ValueError("bad ack floor for consumer")
        if a.stream_seq > d.stream_seq:
            raise ValueError("bad ack floor for stream")
        for s in state.pending:
            if s <= a.stream_seq or s > d.stream_seq:
                raise ValueError(f"bad pending entry, sequence [{s}] out of range")
        if not force and (d.consumer_seq < self.dc or a.stream_seq < self.as_):
            raise ValueError("old update ignored")
        self.dc, self.ds, self.ac, self.as_ = d.consumer_seq, d.stream_seq, a.consumer_seq, a.stream_seq
        # Stream order: new deliveries are appended in order (update_delivered), so the first key is the lowest.
        self.pending = {k: (v[0], v[1]) for k, v in sorted(state.pending.items())}
        self.redelivered = dict(state.redelivered)
        self.dirty = True

    # -- persistence -----------------------------------------------------------------------------------------
    def flush(self) -> bool:
        self.dirty = False
        return False

    def stop(self) -> None:
        self.flush()
        self.closed = True

    def delete(self) -> None:
        self.closed = True

    def discard(self) -> None:
        """Closed for good without touching the disk: its directory went with its stream's (renamed aside)."""
        self.closed = True

    # o.dat layout: the meta.py wrapper (b"SKM1", crc32 u32 LE, msgpack body) around this msgpack map:
    #   {"v": 1,
    #    "d": [delivered consumer seq, delivered stream seq],
    #    "a": [ack floor consumer seq, ack floor stream seq],
    #    "p": [stream seq, delivery seq, timestamp ns,  ...]   pending, flattened triples
    #    "r": [stream seq, redelivered count, ...]}             redelivered, flattened pairs
    def _encode(self) -> dict:
        p: list[int] = []
        for s, (d, t) in self.pending.items():
            p += (s, d, t)
        r: list[int] = []
        for s, n in self.redelivered.items():
            r += (s, n)
        return {"v": 1, "d": [self.dc, self.ds], "a": [self.ac, self.as_], "p": p, "r": r}

    def _decode(self, doc: dict) -> None:
        if not isinstance(doc, dict) or doc.get("v") != 1:
            raise ValueError("unknown consumer state version")
        self.dc, self.ds = (int(x) for x in doc["d"])
        self.ac, self.as_ = (int(x) for x in doc["a"])
        p, r = doc["p"], doc["r"]
        if len(p) % 3 or len(r) % 2:
            raise ValueError("malformed pending/redelivered")
        self.pending = dict(sorted((p[i], (p[i + 1], p[i + 2])) for i in range(0, len(p), 3)))
        self.redelivered = {r[i]: r[i + 1] for i in range(0, len(r), 2)}


class FileConsumerStore(MemoryConsumerStore):
    """Persists to ``<dir>/o.dat``; ``durable=True`` fsyncs each write (stream ``sync_always``)."""

    __slots__ = ("dir", "durable", "_wlock", "found", "snaps", "written")

    def __init__(self, directory: str | os.PathLike, ack_policy: str = ACK_EXPLICIT, max_deliver: int = -1,
                 durable: bool = False) -> None:
        super().__init__(ack_policy, max_deliver)
        self.dir = Path(directory)
        self.durable = durable
        self._wlock = threading.Lock()  # the loop (timer, stop) and the group-commit worker may both write
        #: Snapshots taken, and the number of the newest one written: a worker's older snapshot that reaches the
        #: lock after a newer one was written (the final flush of a stop) is dropped (write_snapshot ``seq``).
        self.snaps = self.written = 0
        #: Without ``durable`` nothing here is ever fsynced (nats-server writeFileWithOptionalSync: only with
        #: sync_always): the identity of each of ``FILES`` as the store found it, so that a file replaced since (a
        #: new inode: write_atomic renames a temp file) is known to hold unsynced data (skiff.testing.faults
        #: power_loss).  One stat per file when the consumer opens, nothing afterwards; None with ``durable``.
        self.found = None if durable else _found(self.dir)
        self._load()

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def _load(self) -> None:
        path = self.state_path
        try:
            doc = meta.read_meta(path)
            self._decode(doc)
        except FileNotFoundError:
            return
        except Exception as e:
            self.dc = self.ds = self.ac = self.as_ = 0
            self.pending, self.redelivered = {}, {}
            self.recovery_error = f"consumer state unreadable, starting empty: {e}"
            log.error("CORRUPT CONSUMER STATE: starting from an empty state", path=str(path), error=str(e))
            try:
                os.replace(path, path.with_name(STATE_FILE + ".corrupt"))
            except OSError:
                pass

    def flush(self) -> bool:
        data = self.snapshot()
        if data is None:
            return False
        if not self.dir.is_dir():
            # Created here only below an existing stream directory (``<stream>/obs/<name>``): a stream deleted
            # meanwhile (renamed aside) must not come back as a directory of consumer state without metadata.
            if not self.dir.parent.parent.is_dir():
                self.dirty = True
                raise FileNotFoundError(f"consumer directory {self.dir} is gone (consumer or stream deleted)")
            self.dir.mkdir(parents=True, exist_ok=True)
        self.write_snapshot(data, self.durable, self.snaps)
        return True

    def snapshot(self) -> bytes | None:
        """The encoded state if it changed since the last snapshot (loop thread; clears ``dirty``), else None.
        Its number is ``snaps`` right after the call."""
        if not self.dirty or self.closed:
            return None
        self.dirty = False
        self.snaps += 1
        return meta.encode(self._encode())

    def write_snapshot(self, data: bytes, durable: bool, seq: int = 0) -> bool:
        """Write an encoded state atomically (any thread); False when not written.

        With ``seq`` (the snapshot's number, see :meth:`snapshot`) a snapshot older than one already written is
        dropped, and so is any once the store is closed: a worker thread's write that lost the race to the lock
        must not replace a newer state.  The directory is never created here (see :meth:`flush`): when it is gone
        the consumer or its stream was deleted (renamed aside), and recreating it would bring a deleted consumer
        back as a directory without metadata.  Raises FileNotFoundError then."""
        with self._wlock:
            if seq:
                if seq < self.written or (self.closed and seq != self.snaps):
                    return False
                self.written = seq
            meta.write_atomic(self.state_path, data, durable)
            return True

    def sync(self) -> None:
        """fsync the state file and its directory (worker thread, group commit of ``sync_interval: always``)."""
        try:
            fd = os.open(self.state_path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        meta.fsync_dir(self.dir)

    def write_meta(self, obj: object) -> None:
        """Rewrite the metadata of an existing consumer (``meta.inf``: its config) atomically, fsynced only with
        ``durable`` (nats-server writeConsumerMeta: sync_always); any thread (an update writes it in a worker).
        No directory is created: a consumer or stream deleted meanwhile (its directory renamed aside) must not
        come back, so the write fails with FileNotFoundError instead (a new consumer's: :meth:`create_meta`)."""
        meta.write_meta(self.dir / meta.META_FILE, obj, durable=self.durable)

    def create_meta(self, obj: object) -> None:
        """The first ``meta.inf`` of a new consumer (any thread: the create runs it in a worker).  Only ``obs/`` and
        the consumer's own directory are created, never the stream's: a stream deleted meanwhile was renamed aside
        first, and its directory must not come back (FileNotFoundError).  A failed write leaves no directory without
        metadata behind (recovery would warn about it)."""
        d = str(self.dir)
        try:
            for path in (os.path.dirname(d), d):
                try:
                    os.mkdir(path)
                except FileExistsError:
                    pass
            meta.write_meta(os.path.join(d, meta.META_FILE), obj, durable=self.durable)
        except BaseException:
            try:
                self.delete()
            except OSError:
                pass
            raise

    def delete(self) -> None:
        """Remove the consumer's directory: renamed aside first (one atomic step: a kill -9 leaves the consumer
        entirely there or entirely gone), then removed.  A ``.``-name is never a consumer (names cannot hold a
        dot), so recovery removes what a crash left aside (:func:`remove_leftovers`).  When the directory is
        already gone (its stream was renamed aside first) there is nothing to do."""
        self.closed = True
        aside = self.dir.with_name(f"{DELETED_PREFIX}{self.dir.name}.{os.urandom(4).hex()}")
        try:
            os.rename(self.dir, aside)
        except FileNotFoundError:
            return
        import shutil  # imported when used: shutil brings bz2 and lzma, ~5 ms of every start

        shutil.rmtree(aside, ignore_errors=True)


DELETED_PREFIX = ".deleted."


FILES = (meta.META_FILE, STATE_FILE)  # what a consumer directory holds
_NOTHING = (None, None)  # shared by every consumer whose files did not exist yet (new, idle: 10,000 cost nothing)


def _found(d: Path) -> tuple:
    ids = tuple(file_identity(d / name) for name in FILES)
    return _NOTHING if ids == _NOTHING else ids


def file_identity(path: str | os.PathLike) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size) of a file, None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def stored_consumers(consumers_dir: str | os.PathLike) -> tuple[int, list]:
    """What recovery finds under a stream's consumer directory (``obs/``): the leftovers of interrupted deletes
    removed (their count), then per consumer directory, in name order, ``(name, meta.inf document, None)`` or
    ``(name, None, error)`` (FileNotFoundError: a directory without metadata)."""
    left = remove_leftovers(consumers_dir)
    try:
        names = sorted(e.name for e in os.scandir(consumers_dir) if e.is_dir() and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return left, []
    found = []
    for name in names:
        try:
            found.append((name, meta.read_meta(os.path.join(consumers_dir, name, meta.META_FILE)), None))
        except Exception as e:  # noqa: BLE001 - one bad consumer never stops the recovery of the others
            found.append((name, None, e))
    return left, found


def remove_leftovers(consumers_dir: str | os.PathLike) -> int:
    """Remove consumer directories a crash left renamed aside (see ``FileConsumerStore.delete``); returns the count."""
    n = 0
    try:
        entries = [e.path for e in os.scandir(consumers_dir) if e.name.startswith(DELETED_PREFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    import shutil

    for path in entries:
        shutil.rmtree(path, ignore_errors=True)
        n += 1
    return n
