"""Stay awake for a moment after a reply: the standalone server polls for the next request instead of sleeping.

Why
---
A client that waits for each answer (a KV put or get, a request, a JetStream publish with its PubAck) sends its next
message some 40-80 us after it got the last one.  A server that went to sleep in ``epoll_wait`` meanwhile has to be
woken for it, and on a virtual machine (where CI and most benchmarks run) that wake-up costs about as much as the
work: measured with ``perf record -e raw_syscalls:*`` on the KV put loop of ``bench/c/js.c``, Skiff's own work was
~48 us of each ~150 us round trip, and every wake-up found caches and the interpreter cold (the same work pipelined
takes ~14 us).  nats-server does not pay this: the Go scheduler spins a thread on the network poller for a while
before parking it (runtime/proc.go ``findRunnable``), which is why it uses ~75-95 us of CPU per KV operation
(``perf stat`` task-clock, 4.5-4.8 context switches each) to Skiff's ~45-65 us.

What
----
After ``Fanout.flush_pending`` wrote output, the server keeps the event loop turning (a callback that re-schedules
itself, so uvloop polls with a zero timeout) for ``window`` seconds.  A read arriving then is handled at once; every
flush with output extends the window.  The window follows the clients, between 100 us and 1 ms: a read caught in a
spell shows how long the server waited for it (from the output before it to the last idle turn of the loop), and the
window moves towards twice that (at once when longer, a sixteenth of the way when shorter); a spell that missed,
followed by output less than 1 ms after the spell's last one, stretches the window to that gap.  A fixed 100 us
caught next to nothing on a slower machine, where a C client's KV put comes back 250-450 us after the last answer
and a nats-py client's ~450 us (the gaps between outputs, measured on the benchmark's workloads); 1 ms for everyone
would spin through every lull of a stream of messages, on the CPU its clients need.  It is bounded and backs off: a
spell in which nothing came (a client that pauses between requests, a test suite's idle moments) counts as a miss,
and after two misses in a row the next ``backoff`` spells are skipped, doubling up to 256, so an idle or slow client
costs next to nothing; one spell that catches a read resets it, so a client that pauses longer than the window costs
at most two windows of CPU and then next to nothing.  It spins only while the rest of the machine leaves a CPU free
(``CpuGate``: /proc/stat less the server's own CPU time and the hypervisor's steal, looked at every 0.2 s): with two
clients busy on a two-core machine, a spinning server would only take their CPU.  Where it cannot help it is off:
a server running inside a test's own event loop (only ``skiff.server.runner`` starts a spinner), a process allowed
fewer than two CPUs (affinity or cgroup quota: the spinning loop would take the client's CPU), and
``SKIFF_SPIN_US=0`` in the environment (any other value is the shortest window in microseconds; the longest is 1 ms
or that, whichever is longer).
"""
from __future__ import annotations

import asyncio
import os
from time import perf_counter, process_time

DEFAULT_WINDOW_US = 100
MAX_WINDOW_US = 1000  # the longest window the clients can ask for (module docstring)
IDLE_MARGIN = 2.0  # the window covers twice the wait for the reads it catches
SHRINK = 1 / 16  # how far a catch that waited less moves the window down
MISSES_BEFORE_BACKOFF = 2
MAX_BACKOFF = 256
GATE_PERIOD = 0.2  # seconds between two looks at the machine's CPU use (CpuGate)
GATE_FREE = 0.9  # spin only while the other processes left at least this much of a CPU unused


def available_cpus() -> float:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota (``cpu.max``)."""
    try:
        n: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, int(quota) / int(period))
    except (OSError, ValueError):
        pass
    return n


def window_from_env(environ=os.environ) -> float:
    """The shortest spin window in seconds from ``SKIFF_SPIN_US`` (default 100 us; 0 turns spinning off)."""
    raw = environ.get("SKIFF_SPIN_US", "")
    if raw == "":
        return DEFAULT_WINDOW_US / 1e6
    try:
        us = int(raw)
    except ValueError:
        raise ValueError(f"SKIFF_SPIN_US must be a whole number of microseconds, not {raw!r}") from None
    if us < 0:
        raise ValueError(f"SKIFF_SPIN_US must not be negative, not {raw!r}")
    return us / 1e6


class CpuGate:
    """Whether the rest of the machine left a CPU free over the last ``GATE_PERIOD``: spinning takes a CPU, and on a
    machine whose CPUs the clients need (two C clients and the server on two cores, parallel test workers) it would
    slow everyone down.  Busy time is /proc/stat's (all CPUs: user, nice, system, irq, softirq) less this
    process's own CPU time (``time.process_time``, all threads; its spinning included), so a server does not shut
    itself out by spinning.  Steal (the hypervisor running someone else on this machine's CPUs) is not counted: no
    process here needs that time, and it is when a sleeping server is slowest to wake.  Measured with the C
    request/reply client (bench/c/rr.c, 1 client) on a two-CPU VM while steal was 5-38% of its CPU time, 4 pairs of
    3 s runs: spinning p50 186-396 us, not spinning 347-932 us.  A gate that counted steal shut when it passed ~30%
    (12 of 80 looks in 5 pairs of runs, logged), which is the likely cause of a full bench run whose request/reply
    row went to ~930 us while nats-server (whose scheduler spins regardless) stayed at 105-142 us.
    Without /proc/stat the gate stays shut: no spinning where it cannot be checked."""

    def __init__(self, cpus: float, stat_path: str = "/proc/stat", own_cpu=process_time) -> None:
        self.cpus = cpus
        self._path = stat_path
        self._own_cpu = own_cpu
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._last: tuple[float, float, float] | None = None  # (time, machine busy s, own CPU s)
        self.open = self._sample(perf_counter()) is not None  # readable: open until the first period says more

    def _busy_seconds(self) -> float | None:
        try:
            with open(self._path) as f:
                head = f.readline().split()
            user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in head[1:8])
        except (OSError, ValueError):
            return None
        return (user + nice + system + irq + softirq) / self._hz

    def _sample(self, now: float) -> tuple[float, float, float] | None:
        busy = self._busy_seconds()
        if busy is None:
            return None
        self._last = (now, busy, self._own_cpu())
        return self._last

    def check(self, now: float) -> bool:
        """Look again (every ``GATE_PERIOD`` at most) and say whether spinning may go on."""
        last = self._last
        if last is None:
            return False
        if now - last[0] < GATE_PERIOD:
            return self.open
        t0, busy0, own0 = last
        cur = self._sample(now)
        if cur is None:
            self.open = False
            return False
        dt = now - t0
        others = (cur[1] - busy0) - (cur[2] - own0)
        self.open = self.cpus * dt - others >= GATE_FREE * dt
        return self.open


class Spinner:
    """Busy-polls the loop for ``window`` seconds after each :meth:`arm` (module docstring)."""

    def __init__(self, window: float, loop: asyncio.AbstractEventLoop | None = None, clock=perf_counter,
                 gate: CpuGate | None = None) -> None:
        self.base = window  # the shortest window
        self.max_window = max(window, MAX_WINDOW_US / 1e6)
        self.window = window  # the current one: follows the waits for the next read (arm)
        self._last_arm = -1.0  # when output was last written
        self._tick_at = 0.0  # the loop's last idle turn in a spell
        self._missed = False  # the last spell ended without catching a read
        self._loop = loop
        self._clock = clock
        self._gate = gate
        self._gate_at = 0.0  # when to ask the gate again during a spell
        self._deadline = 0.0
        self.running = False
        self._caught = False  # a read was handled during the current spell
        self._misses = 0  # spells in a row that caught nothing
        self._skip = 0  # arms to let pass before the next spell
        self._backoff = 1
        self.stopped = False
        #: Counters for tests and the benchmark notes: spells started, spells that caught a read, arms skipped.
        self.spells = self.caught = self.skipped = 0

    def arm(self) -> None:
        """Output was written: keep polling for ``window`` (or longer, when already polling)."""
        now = self._clock()
        last = self._last_arm
        self._last_arm = now
        if self.running:  # a read caught: it came (last idle turn - previous output) after the output before it
            want = (self._tick_at - last) * IDLE_MARGIN
            w = self.window
            if want > w:
                self.window = want if want < self.max_window else self.max_window
            elif w > self.base:
                w -= (w - want) * SHRINK
                self.window = w if w > self.base else self.base
            self._deadline = now + self.window
            self._caught = True
            return
        if self._missed:  # the spell before ended just too soon, or the client paused (then the gap says nothing)
            self._missed = False
            gap = now - last
            if self.window < gap < self.max_window:
                self.window = gap
        if self._skip:
            self._skip -= 1
            self.skipped += 1
            return
        if self.stopped:
            return
        gate = self._gate
        if gate is not None and not gate.check(now):
            self.skipped += 1
            return
        self.running = True
        self._caught = False
        self._tick_at = now
        self._deadline = now + self.window
        self._gate_at = now + GATE_PERIOD
        self.spells += 1
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        loop.call_soon(self._tick)

    def _tick(self) -> None:
        now = self._tick_at = self._clock()
        if not self.stopped and now < self._deadline:
            if now >= self._gate_at and self._gate is not None:
                self._gate_at = now + GATE_PERIOD
                if not self._gate.check(now):
                    self.running = False  # the machine needs the CPU: the spell ends, not counted as a miss
                    return
            self._loop.call_soon(self._tick)  # type: ignore[union-attr]
            return
        self.running = False
        if self._caught:
            self.caught += 1
            self._misses = 0
            self._backoff = 1
        else:
            self._missed = True
            self._misses += 1
            if self._misses >= MISSES_BEFORE_BACKOFF:
                self._skip = self._backoff
                self._backoff = min(self._backoff * 2, MAX_BACKOFF)

    def stop(self) -> None:
        """No more spells (the server is shutting down); a running one ends at its next turn."""
        self.stopped = True


def spinner_for_process() -> Spinner | None:
    """The standalone server's spinner, or None where spinning is off (module docstring)."""
    window = window_from_env()
    cpus = available_cpus()
    if window <= 0 or cpus < 2:
        return None
    return Spinner(window, gate=CpuGate(cpus))
