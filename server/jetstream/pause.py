"""Consumer pause (nats-server 2.11+, ADR-42's companion): ``pause_until`` and ``$JS.API.CONSUMER.PAUSE.<s>.<c>``.

Theory of operation
-------------------
A consumer is paused while its config's ``pause_until`` lies in the future (wall clock, as nats-server compares it
with ``time.Now()``).  While paused the delivery loop sends nothing (:meth:`~.delivery.Delivery.can_deliver`
asks :meth:`PauseTimer.paused`), but everything else goes on as in nats-server: pull requests queue up, expire and
get their idle heartbeats; push consumers keep sending idle heartbeats; acks and redelivery timers run.

A consumer that was ever configured with a deadline has a :class:`PauseTimer` (others have none, and cost nothing
per delivery): one clock timer fires at the deadline (nats-server ``updatePauseState``), sends the PAUSE
advisory with ``paused: false`` and the deadline, and kicks delivery.  The timer runs on the monotonic clock while
the deadline is wall time; the two drift a little, so a timer that fires a hair early re-arms itself for the rest
instead of resuming a consumer that is still paused (which would leave it stuck until something else kicks it).

``pause_until`` changes in three ways, matching nats-server:

* at create (``config.pause_until``); the create handler sends the PAUSE advisory after its reply, and does so on
  *every* create/update request that finds the consumer paused (jsConsumerCreateRequest's tail);
* through ``CONSUMER.PAUSE`` (:func:`pause_request`): an empty body, ``{}`` or a zero time resumes, a time in the
  past is stored and reported as not paused;
* never through a config update: the create handler copies the existing ``pause_until`` over the request's.

The advisory (:func:`pause_advisory`, nats-server ``sendPauseAdvisoryLocked``) always carries ``pause_until`` - Go's
``time.Time`` with ``omitempty`` is never omitted - so a resume by request shows the zero time and a resume at the
deadline shows the deadline; ``paused`` is "now is before the deadline".
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi import requests as rq
from skiff.protocol.jsapi.consumer_config import ConsumerConfig, set_static_consumer_metadata
from skiff.protocol.jsapi.timefmt import ZERO_TIME_NS, format_time

from . import consumer_advisories as adv
from .api import api_level_error, consumer_of

if TYPE_CHECKING:  # pragma: no cover
    from .api import ApiRequest
    from .consumer import Consumer
    from .engine import JetStream

ZERO_TIME = "0001-01-01T00:00:00Z"


def pause_until_ns(cfg: ConsumerConfig) -> int | None:
    """The configured deadline in Unix nanoseconds; None when unset or zero (not paused)."""
    pu = cfg.pause_until
    if pu is None or pu.is_zero:
        return None
    return pu.unix_ns


def pause_advisory(c: "Consumer", cfg: ConsumerConfig) -> None:
    """nats-server sendPauseAdvisoryLocked for ``cfg``'s deadline."""
    until = pause_until_ns(cfg)
    if until is None:
        adv.pause(c, False, ZERO_TIME_NS)
    else:
        adv.pause(c, c.clock.time_ns() < until, until)


class PauseTimer:
    """``until``: the configured deadline in Unix ns (None: not set); ``timer`` resumes delivery at it."""

    __slots__ = ("c", "until", "timer")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.until: int | None = None
        self.timer = None

    def paused(self) -> bool:
        until = self.until
        return until is not None and self.c.clock.time_ns() < until

    def update(self) -> None:
        """nats-server updatePauseState: (re)arm the resume timer for the configured deadline."""
        self.cancel()
        if not self.paused():
            return
        c = self.c
        self.timer = c.clock.call_later((self.until - c.clock.time_ns()) / 1e9, self._resume)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _resume(self) -> None:
        self.timer = None
        c = self.c
        if c.closed:
            return
        if self.paused():
            # The loop's monotonic timer fired before the wall-clock deadline: wait for the rest.
            delay = (self.until - c.clock.time_ns()) / 1e9
            self.timer = c.clock.call_later(max(delay, 0.001), self._resume)
            return
        pause_advisory(c, c.config)
        c.kick()

    def changed(self, old: ConsumerConfig, new: ConsumerConfig) -> None:
        """Called by ``update_config`` (with the consumer's config already ``new``): nats-server re-arms the timer
        and sends the advisory whenever the deadline changed."""
        if pause_until_ns(old) != pause_until_ns(new):  # Go: !old.Equal(new), nil counting as the zero time
            self.update()
            pause_advisory(self.c, new)


def _wake_like_go(c: "Consumer") -> None:
    """After a resume by request, nats-server's loopAndGatherMsgs next wakes at its idle-heartbeat timer (push) or
    at the earliest heartbeat of a waiting pull request (processWaiting's fexp; an expiry only ends the request),
    then tries to deliver.  Kick then (at the latest moment Go would: a full heartbeat interval for push)."""
    now = c.clock.monotonic()
    if c.waiting is None:
        hb = c.config.idle_heartbeat
        delay = hb / 1e9 if hb else None
    else:
        hbts = [wr.hbt for wr in c.waiting.q if wr.hbt]
        delay = min(hbts) - now if hbts else None
    if delay is not None:
        c.clock.call_later(max(delay, 0.001), c.kick)


def pause_request(js: "JetStream", req: "ApiRequest", strict: bool):
    """``$JS.API.CONSUMER.PAUSE.<stream>.<consumer>`` (nats-server jsConsumerPauseRequest, single server)."""
    preq = rq.JSApiConsumerPauseRequest()
    body = req.body.lstrip(b" \t\r\n")
    if body[:1] in (b"{", b"["):
        preq = rq.parse_request(rq.JSApiConsumerPauseRequest, req.body, strict=strict)
        if isinstance(preq, ApiError):
            return preq
    # nats-server checks Nats-Required-Api-Level only once the body is decoded, before the lookups
    err = api_level_error(req)
    if err is not None:
        return err
    c = consumer_of(js, req)
    if isinstance(c, ApiError):
        return c
    pu = preq.pause_until
    if pu is not None and pu.is_zero:
        pu = None
    if pu is not None:
        pu = pu.utc()
    ncfg = set_static_consumer_metadata(c.config.model_copy(update={"pause_until": pu}))
    # No kick: nats-server's updateConfig signals the delivery loop only for a changed max_ack_pending, so a
    # consumer resumed here delivers when something else wakes it (a new message, a new pull request, or one of
    # the loop's own timers: see _wake_like_go).
    c.update_config(ncfg)
    _wake_like_go(c)
    written = c.cset.write_meta(c)

    def reply() -> dict:
        now = js.server.clock.time_ns()
        out: dict = {"paused": pu is not None and now < pu.unix_ns,
                     "pause_until": format_time(pu.unix_ns) if pu is not None else ZERO_TIME}
        if out["paused"]:
            out["pause_remaining"] = pu.unix_ns - now
        return out
    # Answered once the new meta.inf is written (off the loop: consumer_writes.ConsumerWrites.write_meta), as
    # nats-server answers after updateConfig wrote it.
    if written is None:
        return reply()
    from .consumer_writes import when_written  # the consumers' disk writes: loaded with the first stream that has some

    return when_written(written, c, reply)
