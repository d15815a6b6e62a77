"""Consumer life cycle: inactivity clean-up and config updates (nats-server ``deleteNotActive``, ``updateConfig``).

Theory of operation
-------------------
``inactive_threshold`` (ephemerals: 5s by default) deletes a consumer nobody uses: a push consumer once its deliver
subject has had no interest for that long, a pull consumer once no request arrived for that long and no waiting
request or unacknowledged message (within its ack deadline) remains.  One clock timer per consumer; acks and pull
requests push it back.  Pull consumers and defaulted ephemerals get up to a second of jitter on top, as nats-server.

Pause (``pause_until``) lives in :mod:`.pause`; a config update only tells it the deadline may have changed.

:meth:`LifecycleMixin.update_config` applies a config already checked by ``check_consumer_update``: deliver subject,
max_ack_pending, ack_wait, rate limit, sample frequency, max_deliver, inactive threshold, pause and filters.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from skiff.protocol.jsapi.consumer_config import ConsumerConfig, filter_subjects

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


class LifecycleMixin:
    """Life-cycle half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    # ------------------------------------------------------------------ inactivity
    def _update_inactive_threshold(self: "Consumer") -> None:
        it = self.config.inactive_threshold
        if it <= 0:
            self.dthresh = 0.0
        elif self.waiting is not None or (not self.durable and self.cset.defaulted_threshold(self)):
            self.dthresh = it / 1e9 + 0.1 + random.random() * 0.9  # nats-server adds up to 1s of jitter
        else:
            self.dthresh = it / 1e9

    def _cancel_delete_timer(self: "Consumer") -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
            self._dtmr = None

    def _suppress_deletion(self: "Consumer") -> None:
        if self.closed:
            return
        if self.waiting is None:
            if self._dtmr is not None:
                self._dtmr.cancel()
                self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)
        else:
            self.waiting.last = self.clock.monotonic()
            if self._dtmr is not None:
                self._dtmr.cancel()
                self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)

    def _delete_not_active(self: "Consumer") -> None:
        """nats-server deleteNotActive."""
        self._dtmr = None
        if self.closed:
            return
        if self.waiting is None:
            if self.active:
                return
        else:
            now = self.clock.monotonic()
            elapsed = now - self.waiting.last
            if elapsed < self.dthresh:
                self._dtmr = self.clock.call_later(self.dthresh - elapsed, self._delete_not_active)
                return
            self._process_waiting(True)
            if self.waiting.q:
                self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)
                return
            wall = self.clock.time_ns()
            backoff = self.config.backoff
            delay = 0
            for seq, p in self.pending.items():
                if backoff:
                    bi = min(max(self.rdc.get(seq, 0), 0), len(backoff) - 1)
                    aw = int(self._ack_wait(backoff[bi]) * 1e9)
                else:
                    aw = int(self._ack_wait(0) * 1e9)
                ts = p[1] + aw + int(self.dthresh * 1e9)
                if ts > wall:
                    delay = max(delay, ts - wall)
            if delay > 0:
                self._dtmr = self.clock.call_later(delay / 1e9, self._delete_not_active)
                return
        self.cset.delete_consumer(self)

    # ------------------------------------------------------------------ config update
    def update_config(self: "Consumer", cfg: ConsumerConfig) -> None:
        """nats-server updateConfig for an already checked config.  Like Go it wakes the delivery loop only for a
        new max_ack_pending or deliver subject: any other update (a pause change included, see pause.py) leaves
        waiting requests waiting until something else wakes the consumer."""
        old = self.config
        if cfg.deliver_subject != old.deliver_subject and self.waiting is None:
            self.change_deliver_subject(cfg.deliver_subject)
        if cfg.max_ack_pending != old.max_ack_pending:
            self.maxp = cfg.max_ack_pending
        if cfg.ack_wait != old.ack_wait and self._ptmr is not None:
            self._reset_ptmr(0.1)
        if cfg.sample_freq != old.sample_freq:
            self.sfreq = sample_freq(cfg.sample_freq)
        if cfg.max_deliver != old.max_deliver:
            self.maxdc = max(cfg.max_deliver, 0)
        new_filters = filter_subjects(cfg) != self.filters
        self.config = cfg
        if cfg.rate_limit_bps != old.rate_limit_bps:
            self._set_rate_limit()
        if cfg.inactive_threshold != old.inactive_threshold:
            self._update_inactive_threshold()
            self._cancel_delete_timer()
            if self.dthresh > 0:
                self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)
        self._pause_changed(old, cfg)
        if new_filters:
            self._set_filters(cfg)
            self.cset.filters_changed(self)
            self._npc = -1
        if cfg.max_ack_pending != old.max_ack_pending or cfg.deliver_subject != old.deliver_subject:
            self.kick()
        else:
            self._after_change()  # ready (or not) for the next new message, without a delivery pass now
