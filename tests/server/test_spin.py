"""server/core/spin.py: the standalone server polls a moment for the next request after a reply.

The spinner's rules on a fake loop and clock (a spell lasts its window and is extended by output, the window follows
the client's wait for the next read between 100 us and 1 ms, two empty spells in a row start a doubling back-off up
to 256 skipped arms, a spell that catches a read resets it, stop ends it);
where it is off (a server in a test's event loop, one CPU or a quota under two, ``SKIFF_SPIN_US=0``); a bad
``SKIFF_SPIN_US`` is a start-up error; and the process it is meant for, a real ``skiff``, answers a tight request
loop and then goes quiet: it does not keep burning a CPU once its client pauses.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from skiff.server.core import spin
from skiff.server.core.server import Server
from skiff.server.core.spin import (
    MAX_BACKOFF, MAX_WINDOW_US, Spinner, available_cpus, spinner_for_process, window_from_env,
)
from tests.harness import free_port, proc_cpu_seconds, server_env


class FakeLoop:
    def __init__(self) -> None:
        self.ready: list = []

    def call_soon(self, cb) -> None:
        self.ready.append(cb)

    def run_once(self) -> None:
        ready, self.ready = self.ready, []
        for cb in ready:
            cb()


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _spinner(window: float = 0.001) -> tuple[Spinner, FakeLoop, FakeClock]:
    loop, clock = FakeLoop(), FakeClock()
    return Spinner(window, loop, clock), loop, clock


def _empty_spell(sp: Spinner, loop: FakeLoop, clock: FakeClock) -> None:
    sp.arm()
    clock.now += 1
    loop.run_once()


def test_a_spell_keeps_the_loop_turning_for_its_window_and_output_extends_it():
    sp, loop, clock = _spinner(0.001)
    sp.arm()
    assert sp.running and len(loop.ready) == 1
    for _ in range(5):  # within the window: one callback a turn, so the loop polls without sleeping
        clock.now += 0.0001
        loop.run_once()
        assert sp.running and len(loop.ready) == 1
    clock.now += 0.0008
    sp.arm()  # output written during the spell (a request it caught): the window starts again
    clock.now += 0.0009
    loop.run_once()
    assert sp.running
    clock.now += 0.0002
    loop.run_once()
    assert not sp.running and loop.ready == []
    assert (sp.spells, sp.caught) == (1, 1)


def _round_trips(sp: Spinner, loop: FakeLoop, clock: FakeClock, wait: float, n: int = 40) -> None:
    """A client that sends its next request ``wait`` after each answer, the server answering it 50 us later; the
    loop turns every 10 us while it waits."""
    for _ in range(n):
        waited = 0.0
        while waited + 0.00001 <= wait and sp.running:
            clock.now += 0.00001
            waited += 0.00001
            loop.run_once()
        clock.now += wait - waited + 0.00005
        sp.arm()


def test_the_window_follows_the_wait_for_the_next_read_within_its_bounds():
    sp, loop, clock = _spinner(0.0001)
    assert sp.window == 0.0001 and MAX_WINDOW_US == 1000
    sp.arm()
    _round_trips(sp, loop, clock, 0.00008)  # caught in the shortest window: twice the wait is 160 us
    assert 0.00015 <= sp.window <= 0.00017, sp.window
    assert sp.caught == 0 and sp.spells == 1  # one spell, still running: every request was caught
    _round_trips(sp, loop, clock, 0.0004)  # the client slows down: the first miss stretches the window
    assert 0.00076 <= sp.window <= 0.0008, sp.window  # twice the wait (to the last idle turn, 390-400 us)
    spells = sp.spells
    _round_trips(sp, loop, clock, 0.0004)
    assert sp.spells == spells and sp.running  # every request caught, no new spell
    _round_trips(sp, loop, clock, 0.0007)
    assert sp.window == 0.001  # capped at 1 ms
    _round_trips(sp, loop, clock, 0.00001, n=200)  # requests at once: back towards the shortest window
    assert sp.window < 0.00011, sp.window


def test_a_stream_of_output_keeps_the_shortest_window_and_a_pause_does_not_stretch_it():
    sp, loop, clock = _spinner(0.0001)
    sp.arm()
    for _ in range(500):  # output every loop turn, nothing waited for
        loop.run_once()
        clock.now += 0.0005
        sp.arm()
    assert sp.window == 0.0001
    clock.now += 1
    loop.run_once()  # the stream stops: the spell ends empty
    assert not sp.running
    clock.now += 0.005
    sp.arm()  # 5 ms later: a pause, longer than any window
    assert sp.window == 0.0001
    long, _, _ = _spinner(0.002)  # SKIFF_SPIN_US longer than 1 ms: that window
    assert long.window == long.max_window == 0.002


def test_empty_spells_back_off_doubling_and_a_caught_read_resets_it():
    sp, loop, clock = _spinner()
    _empty_spell(sp, loop, clock)
    assert sp.spells == 1 and sp._skip == 0  # one miss: no back-off yet
    _empty_spell(sp, loop, clock)
    skipped = []
    for _ in range(12):  # from the second miss in a row: 1, 2, 4, ... arms skipped between spells
        before = sp.skipped
        while sp._skip:
            sp.arm()
            assert not sp.running and loop.ready == []
        skipped.append(sp.skipped - before)
        _empty_spell(sp, loop, clock)
    assert skipped == [1, 2, 4, 8, 16, 32, 64, 128, 256, 256, 256, 256]
    assert MAX_BACKOFF == 256
    while sp._skip:
        sp.arm()
    sp.arm()  # a spell that catches a read resets the back-off
    sp.arm()
    clock.now += 1
    loop.run_once()
    assert sp.caught == 1 and sp._skip == 0 and sp._backoff == 1
    _empty_spell(sp, loop, clock)
    assert sp._skip == 0  # one miss again before any back-off


def test_stop_ends_a_spell_and_starts_no_other():
    sp, loop, clock = _spinner()
    sp.arm()
    sp.stop()
    loop.run_once()
    assert not sp.running and loop.ready == []
    sp.arm()
    assert not sp.running and loop.ready == []


class FakeGate:
    def __init__(self) -> None:
        self.open = True
        self.asked: list[float] = []

    def check(self, now: float) -> bool:
        self.asked.append(now)
        return self.open


def test_no_spell_while_the_machine_needs_the_cpu_and_a_spell_ends_when_it_does():
    loop, clock, gate = FakeLoop(), FakeClock(), FakeGate()
    sp = Spinner(1.0, loop, clock, gate=gate)
    gate.open = False
    sp.arm()
    assert not sp.running and loop.ready == [] and sp.skipped == 1
    gate.open = True
    sp.arm()
    assert sp.running
    clock.now += spin.GATE_PERIOD / 2
    loop.run_once()
    assert sp.running and len(gate.asked) == 2  # not asked again within a period
    gate.open = False
    clock.now += spin.GATE_PERIOD
    loop.run_once()
    assert not sp.running and loop.ready == [] and len(gate.asked) == 3
    assert sp._misses == 0  # ended for the machine's sake, not an empty spell


class FakeStat:
    """A /proc/stat for a CpuGate on two CPUs, opened at time 0, and the server's own CPU time beside it."""

    def __init__(self, tmp_path, monkeypatch) -> None:
        self.path = tmp_path / "stat"
        self.hz = os.sysconf("SC_CLK_TCK")
        self.own = 0.0
        self.set(0, 0)
        monkeypatch.setattr(spin, "perf_counter", lambda: 0.0)
        self.gate = spin.CpuGate(2, str(self.path), own_cpu=lambda: self.own)

    def set(self, busy_s: float, own_s: float, steal_s: float = 0.0) -> None:
        """Busy CPU-seconds so far (user), this server's own, and steal."""
        # cpu user nice system idle iowait irq softirq steal guest guest_nice
        self.path.write_text(f"cpu  {int(busy_s * self.hz)} 0 0 0 0 0 0 {int(steal_s * self.hz)} 0 0\n"
                             "cpu0 0 0 0 0 0 0 0 0 0 0\n")
        self.own = own_s


def test_the_gate_counts_the_other_processes_cpu_not_its_own(tmp_path, monkeypatch):
    st = FakeStat(tmp_path, monkeypatch)
    gate = st.gate
    assert gate.open
    # 1 s later: the machine was busy 1.5 CPU-seconds, 1.0 of them this server's own (spinning): others used 0.5
    st.set(1.5, 1.0)
    assert gate.check(0.1) is True and gate._last[0] == 0.0  # within a period: the last answer, no new look
    assert gate.check(1.0) is True
    # the next second others used 1.2 CPU-seconds of 2: less than 0.9 of a CPU left, the gate shuts
    st.set(1.5 + 1.7, 1.5)
    assert gate.check(2.0) is False
    # and opens again when they calm down
    st.set(3.2 + 0.3, 1.5)
    assert gate.check(3.0) is True


def test_the_gate_does_not_count_steal_as_the_other_processes_use(tmp_path, monkeypatch):
    # A VM whose host takes 0.8 of its two CPUs (steal) while a client uses 0.4: no process here would get the CPU
    # the server spins on, and a sleeping server is slowest to wake just then (CpuGate's docstring); the gate stays
    # open.  The same 1.2 CPU-seconds used by processes here shut it.
    st = FakeStat(tmp_path, monkeypatch)
    st.set(1.4, 1.0, steal_s=0.8)
    assert st.gate.check(1.0) is True
    st.set(1.4 + 2.2, 2.0, steal_s=0.8)
    assert st.gate.check(2.0) is False


def test_the_gate_stays_shut_without_proc_stat(tmp_path):
    gate = spin.CpuGate(4, str(tmp_path / "missing"))
    assert not gate.open and gate.check(10.0) is False
    sp = Spinner(1.0, FakeLoop(), FakeClock(), gate=gate)
    sp.arm()
    assert not sp.running


def test_the_window_from_the_environment():
    assert window_from_env({}) == 100e-6
    assert window_from_env({"SKIFF_SPIN_US": "250"}) == 250e-6
    assert window_from_env({"SKIFF_SPIN_US": "0"}) == 0
    for bad in ("abc", "-5", "1.5"):
        with pytest.raises(ValueError, match="SKIFF_SPIN_US"):
            window_from_env({"SKIFF_SPIN_US": bad})


def test_off_with_fewer_than_two_cpus_or_turned_off(monkeypatch):
    monkeypatch.delenv("SKIFF_SPIN_US", raising=False)
    monkeypatch.setattr(spin, "available_cpus", lambda: 1.0)
    assert spinner_for_process() is None
    monkeypatch.setattr(spin, "available_cpus", lambda: 1.5)  # a cgroup quota of one and a half CPUs
    assert spinner_for_process() is None
    monkeypatch.setattr(spin, "available_cpus", lambda: 2.0)
    sp = spinner_for_process()
    assert sp is not None and sp.window == 100e-6 and isinstance(sp._gate, spin.CpuGate)
    monkeypatch.setenv("SKIFF_SPIN_US", "0")
    assert spinner_for_process() is None


def test_available_cpus_is_capped_by_the_cgroup_quota(monkeypatch, tmp_path):
    real_open = open
    quota = tmp_path / "cpu.max"

    def fake_open(path, *a, **kw):
        return real_open(quota if path == "/sys/fs/cgroup/cpu.max" else path, *a, **kw)

    monkeypatch.setattr(spin, "open", fake_open, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    quota.write_text("max 100000\n")
    assert available_cpus() == 4
    quota.write_text("150000 100000\n")
    assert available_cpus() == 1.5
    quota.write_text("garbage\n")
    assert available_cpus() == 4


async def test_a_server_in_a_tests_own_loop_never_spins():
    async with Server(port=0) as srv:
        assert srv.spinner is None


def test_a_bad_window_is_a_start_up_error():
    env = dict(server_env(), SKIFF_SPIN_US="fast")
    r = subprocess.run([sys.executable, "-m", "skiff.server", "-p", str(free_port())], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 1
    fatal = [ln for ln in r.stderr.splitlines() if "[FTL] " in ln]
    assert fatal and "SKIFF_SPIN_US must be a whole number of microseconds, not 'fast'" in fatal[-1], r.stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads the server's CPU time from /proc")
def test_the_process_answers_a_tight_loop_then_goes_quiet():
    port = free_port()
    env = dict(server_env(), SKIFF_SPIN_US="2000")  # a long window: an idle server that kept spinning would show
    proc = subprocess.Popen([sys.executable, "-m", "skiff.server", "-a", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        with sock, sock.makefile("rb") as f:
            assert f.readline().startswith(b"INFO ")
            sock.sendall(b'CONNECT {"verbose":false}\r\n')
            for _ in range(2000):
                sock.sendall(b"PING\r\n")
                assert f.readline() == b"PONG\r\n"
            # The client pauses between requests (10 ms): after a few empty spells the server backs off, so over a
            # second it uses a small part of a CPU; spinning its 2 ms window after every answer would be ~20%.
            start = proc_cpu_seconds(proc.pid)
            for _ in range(100):
                time.sleep(0.01)
                sock.sendall(b"PING\r\n")
                assert f.readline() == b"PONG\r\n"
            paused = proc_cpu_seconds(proc.pid) - start
            # And idle: nothing at all.
            time.sleep(0.2)
            start = proc_cpu_seconds(proc.pid)
            time.sleep(1.0)
            idle = proc_cpu_seconds(proc.pid) - start
        assert paused < 0.1, paused
        assert idle < 0.05, idle
    finally:
        proc.terminate()
        proc.wait(timeout=30)
