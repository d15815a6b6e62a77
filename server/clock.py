"""The one clock (DESIGN.md invariant): every timer and timestamp in Skiff reads time from here.

``LoopClock`` is real time on the running event loop.  ``ManualClock`` is driven by a test: nothing happens until
the test calls ``advance()``, which moves wall and monotonic time together and runs the timers that fell due, in
order, synchronously.  Streams, consumers (ack_wait, backoff, heartbeats, expires, inactive_threshold) and the store
(max_age, TTL, dedupe window) all take their time from the server's clock, so a test moves time instead of sleeping.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable


class Timer:
    """What ``call_later`` returns: ``cancel()`` is all a caller needs."""

    __slots__ = ("when", "cb", "args", "cancelled", "_handle")

    def __init__(self, when: float, cb: Callable, args: tuple) -> None:
        self.when = when
        self.cb = cb
        self.args = args
        self.cancelled = False
        self._handle = None

    def cancel(self) -> None:
        self.cancelled = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class Clock:
    def time_ns(self) -> int:  # wall clock, for timestamps
        raise NotImplementedError

    def monotonic(self) -> float:  # seconds, for intervals
        raise NotImplementedError

    def call_later(self, delay: float, cb: Callable, *args) -> Timer:
        raise NotImplementedError


class LoopClock(Clock):
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    # The time module's own functions: a clock read per delivery and per ack costs no Python call.
    time_ns = staticmethod(time.time_ns)
    monotonic = staticmethod(time.monotonic)

    def call_later(self, delay: float, cb: Callable, *args) -> Timer:
        t = Timer(self.monotonic() + delay, cb, args)
        t._handle = self.loop.call_later(max(delay, 0.0), self._fire, t)
        return t

    def _fire(self, t: Timer) -> None:
        # Never before ``when``, as a Go timer: uvloop counts a delay from its cached loop time (whole milliseconds,
        # read when the loop iteration began), so most timers run before ``when`` on time.monotonic (264 of 286 in
        # a bench run), when a deadline their callback checks is not due yet (a pull request's expiry then ended
        # with 404 where nats-server's wrExp timer gives 408).  Such a wake-up waits for the rest.
        left = t.when - time.monotonic()
        if left > 0:
            t._handle = self.loop.call_later(left, self._fire, t)
            return
        t._handle = None
        t.cb(*t.args)


class ManualClock(Clock):
    """A clock that only moves when told to.  ``start_ns`` is the initial wall time.

    Time is kept as integer nanoseconds elapsed, so a timer set for ``d`` seconds fires exactly when the test has
    advanced ``d`` seconds (no float drift at the boundary)."""

    def __init__(self, start_ns: int | None = None) -> None:
        self._start_wall = start_ns if start_ns is not None else time.time_ns()
        self._elapsed = 0  # ns
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = itertools.count()

    def time_ns(self) -> int:
        return self._start_wall + self._elapsed

    def monotonic(self) -> float:
        return 1000.0 + self._elapsed / 1e9

    def call_later(self, delay: float, cb: Callable, *args) -> Timer:
        due = self._elapsed + max(round(delay * 1e9), 0)
        t = Timer(1000.0 + due / 1e9, cb, args)
        heapq.heappush(self._heap, (due, next(self._seq), t))
        return t

    def advance(self, seconds: float) -> int:
        """Move time forward, running every timer that falls due (including ones they schedule). Returns how many ran."""
        target = self._elapsed + round(seconds * 1e9)
        ran = 0
        while self._heap and self._heap[0][0] <= target:
            due, _, t = heapq.heappop(self._heap)
            if t.cancelled:
                continue
            self._elapsed = max(self._elapsed, due)
            t.cb(*t.args)
            ran += 1
        self._elapsed = target
        return ran

    def pending(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.cancelled)
