"""LoopClock's timers never run before their time, on the loop the server runs on (uvloop), as Go timers never do.

uvloop keeps time in whole milliseconds and runs a timer up to ~1 ms before the delay has passed on
``time.monotonic``; a callback that checks a deadline then finds it not yet due (a pull request's expiry answered
404 instead of nats-server's 408: tests/jetstream/test_pull.py
``test_no_wait_request_held_by_max_ack_pending_expires_with_408``)."""
from __future__ import annotations

import asyncio
import time

import uvloop

from skiff.server.clock import LoopClock


def _lateness(delays: list[float]) -> list[float]:
    """For each timer: when its callback ran minus the ``when`` it was given (negative: early)."""

    async def main() -> list[float]:
        clock = LoopClock()
        out: list[float] = []
        done = asyncio.Event()

        def fired(t_when: list) -> None:
            out.append(time.monotonic() - t_when[0])
            if len(out) == len(delays):
                done.set()

        for d in delays:
            box: list = []
            t = clock.call_later(d, fired, box)
            box.append(t.when)
        await asyncio.wait_for(done.wait(), 10)
        return out

    return uvloop.run(main())


def test_no_timer_runs_before_its_time():
    # Delays that fall between uvloop's millisecond ticks; 200 of them were early about 1 in 3 without the check.
    delays = [0.0004 + 0.00137 * (i % 37) for i in range(200)]
    late = _lateness(delays)
    assert min(late) >= 0, f"{sum(x < 0 for x in late)} of {len(late)} timers ran early, by up to {-min(late):.6f} s"
    assert max(late) < 0.5  # and they do run


def test_a_timer_cancelled_after_an_early_wake_up_does_not_run():
    async def main() -> list[int]:
        clock = LoopClock()
        ran: list[int] = []
        t = clock.call_later(0.05, ran.append, 1)
        t._handle.cancel()  # the loop's handle is spent when it runs: an early wake-up is this call, made now
        clock._fire(t)  # nothing runs, the timer waits for the rest
        assert ran == [] and t._handle is not None
        t.cancel()
        await asyncio.sleep(0.1)
        return ran

    assert uvloop.run(main()) == []
