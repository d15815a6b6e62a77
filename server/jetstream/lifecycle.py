"""Consumer inactivity clean-up (nats-server ``deleteNotActive``).

Theory of operation
-------------------
``inactive_threshold`` (ephemerals: 5s by default) deletes a consumer nobody uses: a push consumer once its deliver
subject has had no interest for that long, a pull consumer once no request arrived for that long and no waiting
request or unacknowledged message (within its ack deadline) remains.  :class:`Inactivity` is that one clock timer
per consumer (consumers without a threshold have none); acks and pull requests push it back.  Pull consumers and
defaulted ephemerals get up to a second of jitter on top, as nats-server.

Config updates are :meth:`~.consumer.Consumer.update_config`'s; pause (``pause_until``) lives in :mod:`.pause`.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer


def sample_freq(text: str) -> int:
    """``sample_freq`` ("N" or "N%", checked at create) as a percentage; 0 = off."""
    if not text:
        return 0
    try:
        return int(text.rstrip("%"))
    except ValueError:
        return 0


class Inactivity:
    """``thresh``: seconds of inactivity before the consumer is deleted (0: never); ``timer`` checks it."""

    __slots__ = ("c", "thresh", "timer")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.thresh = 0.0
        self.timer = None

    def configure(self) -> None:
        c = self.c
        it = c.config.inactive_threshold
        if it <= 0:
            self.thresh = 0.0
        elif c.pull is not None or (not c.durable and c.cset.defaulted_threshold(c)):
            self.thresh = it / 1e9 + 0.1 + random.random() * 0.9  # nats-server adds up to 1s of jitter
        else:
            self.thresh = it / 1e9

    def arm(self, delay: float = 0.0) -> None:
        self.timer = self.c.clock.call_later(delay or self.thresh, self._fired)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def suppress(self) -> None:
        """Activity (an ack, a pull request): the countdown starts again."""
        c = self.c
        if c.closed:
            return
        if c.pull is not None:
            # _fired measures from this and re-arms for the rest: no timer cancelled and re-armed per ack
            c.pull.waiting.last = c.clock.monotonic()
            return
        if self.timer is not None:
            self.timer.cancel()
            self.arm()

    def _fired(self) -> None:
        """nats-server deleteNotActive."""
        self.timer = None
        c = self.c
        if c.closed:
            return
        pull = c.pull
        if pull is None:
            if c.push.active:
                return
        else:
            now = c.clock.monotonic()
            elapsed = now - pull.waiting.last
            if elapsed < self.thresh:
                # At least 1 ms: a rest below the clock's resolution (float rounding of thresh - elapsed) would
                # fire at the same instant again, forever on a ManualClock (due times are whole nanoseconds).
                self.arm(max(self.thresh - elapsed, 0.001))
                return
            pull.process_waiting(True)
            if pull.waiting.q:
                self.arm()
                return
            # Unacknowledged messages still within their ack deadline keep the consumer.
            end = c.core.latest_ack_deadline()
            if end:
                delay = end + int(self.thresh * 1e9) - c.clock.time_ns()
                if delay > 0:
                    self.arm(delay / 1e9)
                    return
        c.cset.delete_consumer(c)
