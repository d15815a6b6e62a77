"""Nats-Msg-Id de-duplication inside a stream's ``duplicate_window`` (nats-server stream.go ddmap/ddarr).

Theory of operation
-------------------
Every stored message that carried ``Nats-Msg-Id`` is remembered as one entry ``(seq, ts, id)``, held by the map
``id -> entry`` and by a FIFO in arrival order (one tuple per publish, not one for each).  An id is a duplicate while ``now - ts < window`` (nats-server ``purgeMsgIds`` drops entries with
``now - ts >= window``).  Instead of nats-server's timer we prune lazily from the head of the FIFO whenever the
window is consulted or extended: the result is the same for every observer, and time comes from the server clock
only, so a test that moves a ``ManualClock`` sees ids expire exactly at the window.  ``window == 0`` disables
tracking (nats-server ``storeMsgIdLocked``: "Zero means disabled").

After a restart the ids stored inside the window must be learned again from the stream (nats-server
rebuildDedupe).  That means reading every message of the window, which for a busy stream is most of it, so it is
deferred: ``set_loader`` takes a function that yields the stored ``(id, seq, ts)`` in order, and it runs the first
time a duplicate check needs the window.  A restart of a large stream is fast, and streams whose publishers never
send ``Nats-Msg-Id`` never pay for the scan.  Ids learned that way go before any stored since the restart.
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Iterable


class DedupeWindow:
    __slots__ = ("window", "_now", "_ids", "_fifo", "_loader")

    def __init__(self, window_ns: int, now: Callable[[], int]) -> None:
        self.window = window_ns
        self._now = now
        self._ids: dict[str, tuple[int, int, str]] = {}  # id -> (seq, ts, id), the very tuple in _fifo
        self._fifo: deque[tuple[int, int, str]] = deque()
        self._loader: Callable[[], Iterable[tuple[str, int, int]]] | None = None

    def set_loader(self, loader: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        self._loader = loader

    def _load(self) -> None:
        loader, self._loader = self._loader, None
        newer_ids, newer_fifo = self._ids, self._fifo
        self._ids, self._fifo = {}, deque()
        for msg_id, seq, ts in loader():
            entry = (seq, ts, msg_id)
            self._ids[msg_id] = entry
            self._fifo.append(entry)
        self._ids.update(newer_ids)
        self._fifo.extend(newer_fifo)

    def __len__(self) -> int:
        if self._loader is not None:
            self._load()
        self._prune()
        return len(self._ids)

    def _prune(self) -> None:
        fifo = self._fifo
        if not fifo:
            return
        limit = self._now() - self.window
        ids = self._ids
        while fifo and fifo[0][1] <= limit:
            entry = fifo.popleft()
            if ids.get(entry[2]) is entry:  # not stored again since
                del ids[entry[2]]

    def check(self, msg_id: str) -> int:
        """The sequence a live duplicate was stored at, or 0.  An id not in the map costs one dict lookup and no
        clock read; a hit is live while ``now - ts < window`` (what _prune keeps), so nothing is pruned here."""
        if self._loader is not None and msg_id:
            self._load()
        hit = self._ids.get(msg_id)
        if hit is None:
            return 0
        return hit[0] if self._now() - hit[1] < self.window else 0

    def store(self, msg_id: str, seq: int, ts: int) -> None:
        """``ts`` is the store time, the server clock's now: the prune of the FIFO's head runs in-line here, O(1)
        amortised (each entry leaves once), without another clock read."""
        if self.window <= 0 or not msg_id:
            return
        ids, fifo = self._ids, self._fifo
        if fifo:
            limit = ts - self.window
            while fifo and fifo[0][1] <= limit:
                entry = fifo.popleft()
                if ids.get(entry[2]) is entry:
                    del ids[entry[2]]
        ids[msg_id] = entry = (seq, ts, msg_id)
        fifo.append(entry)

    def forget_seqs(self, seqs: set[int]) -> None:
        """Drop ids of messages that were not stored after all (a failed flush rolled them back)."""
        if not seqs or not self._ids:
            return
        for msg_id, entry in list(self._ids.items()):
            if entry[0] in seqs:
                del self._ids[msg_id]

    def set_window(self, window_ns: int) -> None:
        self.window = window_ns
        if window_ns <= 0:
            self._loader = None
            self._ids.clear()
            self._fifo.clear()

    def clear(self) -> None:
        self._loader = None
        self._ids.clear()
        self._fifo.clear()
