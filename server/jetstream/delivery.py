"""Delivery: picking the next message, picking its destination, sending it (nats-server ``loopAndGatherMsgs``).

Theory of operation
-------------------
Delivery never waits on anything: :meth:`DeliveryMixin.kick` runs :meth:`_run` in-line, which repeats "pick the
next message, pick its destination, send" until there is nothing to send or no one to send to.  The next message is,
in this order: a queued redelivery (which ignores ``max_ack_pending``; the core's
:meth:`~.consumer_core.ConsumerCore.take_redelivery` counts it, or turns it into a max_deliver), nothing if
``max_ack_pending`` is reached, the next entry of the last-per-subject start list, else the next stored message at
or after the core's ``sseq`` that matches the filters, found with the store's filtered loads (no scans).  The
destination is the deliver subject (push, while someone listens and flow control allows) or the head of the pull
wait queue; a message nobody can take is put back (:meth:`_unget`).  A long backlog goes out in slices of :data:`RUN_SLICE` messages, continued on the next loop turn.

``replay_policy: original`` and ``rate_limit_bps`` hold a prepared delivery (``_held``) and finish it from a clock
timer, as nats-server sleeps in its delivery loop; nothing else is delivered meanwhile.

The frame carries the message's stored subject while it is routed on the deliver subject (or the pull request's
inbox) - :func:`deliver_msg`.  After each pass the consumer tells its stream whether it wants to hear about new
messages (:meth:`_update_ready`): only *ready* consumers are touched per published message.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from . import consumer_advisories as adv
from .pull import status_pending

if TYPE_CHECKING:  # pragma: no cover
    from skiff.storage.records import StoredMsg

    from .consumer import Consumer

RUN_SLICE = 1024  # messages per delivery pass before yielding to the event loop
MSG_SIZE_HDR = b"Nats-Msg-Size"


class DeliveryMixin:
    """Delivery half of :class:`~.consumer.Consumer`."""

    __slots__ = ()

    # ------------------------------------------------------------------ delivery
    def kick(self: "Consumer") -> None:
        """Something changed that may allow delivery: run the delivery loop now (never re-entered)."""
        if self.closed:
            return
        if self._running:
            self._again = True
            return
        self._run()

    def _can_deliver(self: "Consumer") -> bool:
        # Called twice per delivery pass: the cheap attribute checks first, the pause deadline (a clock read) last.
        if self._held is not None:
            return False
        w = self.waiting
        if w is None:
            if not self.active or self.maxpb > 0 and self.pbytes > self.maxpb:  # _fc_blocked, inlined
                return False
        elif not w.q:
            return False
        return not self._paused()

    def _run(self: "Consumer") -> None:
        self._running = True
        stop = ""
        try:
            while True:
                self._again = False
                sent = 0
                stop = ""
                while not self.closed:
                    if not self._can_deliver():
                        break
                    got = self._get_next_msg()
                    if got is None:
                        stop = self._stop
                        break
                    if not self._prepare_and_send(*got):
                        if self._held is not None:
                            stop = "held"
                        break
                    sent += 1
                    if sent >= RUN_SLICE:
                        stop = "slice"
                        self._continue_later()
                        break
                    core = self.core
                    if core.maxp > 0 and self.waiting is None and not core.rdq and len(core.pending) >= core.maxp:
                        # What _get_next_msg would answer next (push only: for a pull the stop reason also depends
                        # on the wait queue); an ack at max_ack_pending runs one delivery per ack, so this saves a
                        # pass through the loop for each of them.
                        stop = self._stop = "maxp"
                        break
                if not self._again or self.closed:
                    break
        finally:
            self._running = False
        if self.closed:
            return
        if self._replay and self.core.sseq > self._replay_lseq:
            self._replay = False
        if self.waiting is not None:
            # Only the end of the available messages ends no_wait requests (not max_ack_pending, not a paused
            # slice of a long backlog, not a delivery held for replay spacing or the rate limit).
            self._process_waiting(stop not in ("maxp", "slice", "held"))
        self._update_ready()

    def _continue_later(self: "Consumer") -> None:
        if self._continue_scheduled:
            return
        self._continue_scheduled = True

        def cont() -> None:
            self._continue_scheduled = False
            self.kick()

        asyncio.get_running_loop().call_soon(cont)

    def _load_next(self: "Consumer", start: int) -> "tuple[StoredMsg | None, int]":
        store = self.stream.store
        fs = self.filters
        if not fs:
            return store.load_next_msg("", start)
        if len(fs) == 1:
            f = fs[0]
            subs = self.stream.config.subjects
            if subs and len(subs) == 1 and subs[0] == f and f not in self._literal:
                # The filter is the stream's only subject (nats-server isFiltered() false): every message stored
                # since the stream has had that subject matches it, so the next live message is the answer and the
                # store's per-subject search for a wildcard is skipped.  A message from before a subject change
                # may not match: then the filtered search runs, as before.
                sm, seq = store.load_next_msg("", start)
                if sm is None:
                    return sm, seq
                pre = self._fwc_prefix
                if sm.subject.startswith(pre) if pre is not None else self.matches(sm.subject):
                    return sm, seq
            return store.load_next_msg(f, start)
        best = None
        for f in fs:
            sm, _ = store.load_next_msg(f, start)
            if sm is not None and (best is None or sm.seq < best.seq):
                best = sm
        if best is None:
            return None, store.last_seq
        return best, best.seq

    def _get_next_msg(self: "Consumer") -> "tuple[StoredMsg, int, str] | None":
        """nats-server getNextMsg: (message, delivery count, source) or None with ``_stop`` set."""
        store = self.stream.store
        core = self.core
        while core.rdq:
            seq, dc, md = core.take_redelivery()
            if md is not None:
                self._max_delivered(md)
                continue
            sm = store.load_msg(seq)
            if sm is None:
                core.put_back(seq, requeue=False)
                p = core.pending.get(seq)
                if p is not None:
                    self.process_term(seq, p[0], dc - 1, adv.TERM_UNACKED_LIMITS_REASON, "")
                continue
            return sm, dc, "rdq"
        if core.maxp > 0 and len(core.pending) >= core.maxp:
            self._stop = "maxp"
            return None
        valid = self._np_valid()
        while self.lss:
            seq = self.lss.popleft()
            if not self.lss:
                self.lss = None
                core.sseq = self.lss_resume + 1
            else:
                core.sseq = seq + 1
            sm = store.load_msg(seq)
            if valid:
                self._npc -= 1
            if sm is not None:
                return sm, 1, "lss"
        sm, seq = self._load_next(core.sseq)
        if sm is None:
            if seq >= core.sseq:
                core.sseq = seq + 1
            self._stop = "eof"
            return None
        core.sseq = sm.seq + 1
        if valid:
            self._npc -= 1
        return sm, 1, "new"

    def _unget(self: "Consumer", sm: "StoredMsg", dc: int, src: str) -> None:
        """A message was taken but could not be sent: put it back where it came from."""
        if src == "rdq":
            self.core.put_back(sm.seq, requeue=True)
        elif src == "lss":
            if self.lss is None:
                self.lss = deque()
            self.lss.appendleft(sm.seq)
            self._npc = -1
        elif sm.seq == self.core.sseq - 1:
            self.core.sseq -= 1
            self._npc = -1

    def _prepare_and_send(self: "Consumer", sm: "StoredMsg", dc: int, src: str) -> bool:
        pending = self.num_pending()
        ack = f"{self._ack_pre}{dc}.{sm.seq}.{self.core.dseq}.{sm.ts}.{pending}"
        hdr, data = sm.hdr, sm.data
        if self.config.headers_only:
            hdr = _headers_only(hdr, len(data))
            data = b""
        sz = len(sm.subject) + len(ack) + len(hdr) + len(data)
        wrn = wrb = 0
        if self.waiting is None:
            dsubj = self.config.deliver_subject
        else:
            wr = self._next_waiting(sz)
            if wr is None:
                self._unget(sm, dc, src)
                return False
            dsubj, wrn, wrb = wr.reply, wr.n, wr.b
            if self.config.priority_policy == "pinned_client":
                hdr = self._pin_header(hdr)  # on every message to a pull, after selection (nats-server)
            if wr.n > 0 and wr.hb:
                wr.hbt = self.clock.monotonic() + wr.hb
        prepared = (dsubj, ack, sm, dc, hdr, data, wrn, wrb)
        delay = 0.0
        if self._replay and self._lts > 0:
            d = (sm.ts - self._lts) / 1e9
            if d > 0.001:
                delay = d
        self._lts = sm.ts
        if self._rl_rate:
            delay = max(delay, self._rate_delay(sz))
        if delay > 0:
            self._held = prepared
            self._delay_timer = self.clock.call_later(delay, self._send_held)
            return False
        self._send(prepared)
        return True

    def _send_held(self: "Consumer") -> None:
        self._delay_timer = None
        held, self._held = self._held, None
        if held is None or self.closed:
            return
        self._send(held)
        self.kick()

    def _send(self: "Consumer", prepared: tuple) -> None:
        dsubj, ack, sm, dc, hdr, data, wrn, wrb = prepared
        seq = sm.seq
        now = self.clock.time_ns()
        core = self.core
        first = not core.pending
        dseq = core.deliver(seq, now)
        policy = core.ack_policy
        if policy != "none":
            if first:
                # Joining the stream's set of consumers with pending messages once is enough: it leaves only
                # when pending is empty again (stream_consumers.maybe_no_pending).
                self.cset.has_pending(self)
            self._watch_ack(seq)
        psz = len(sm.subject) + len(ack) + len(hdr) + len(data)
        if self.maxpb > 0:
            self.pbytes += psz
        try:
            self.store.update_delivered(dseq, seq, dc, sm.ts)
        except Exception as e:  # noqa: BLE001 - a state store refusing an update must never stop delivery
            self._store_update_failed("deliver", e)
        self.ldt = now  # also what a push consumer's idle heartbeat timer measures from (push.py _hb_fired)
        self._state_changed()
        deliver_msg(self.server, dsubj, sm.subject, ack, hdr, data)
        if self.maxpb > 0:
            self._need_flow_control(psz)  # after the message, as nats-server deliverMsg
        if self.waiting is not None and self.dthresh > 0:
            self.waiting.last = self.clock.monotonic()
        if policy == "none" and self.stream.config.retention != "limits":
            self.cset.ack_msg(None, seq)
        if self.waiting is not None and wrn <= 0 and wrb > 0:
            self.server.publish(dsubj, b"", "", status_pending(409, "Batch Completed", wrn, wrb))

    # ------------------------------------------------------------------ ready set
    def _update_ready(self: "Consumer") -> None:
        ready = not self.closed and self._can_deliver() and not self.core.full()
        self.cset.set_ready(self, ready)

    def _after_change(self: "Consumer") -> None:
        if not self._running:
            self._update_ready()


def deliver_msg(server, dsubj: str, subject: str, reply: str, hdr: bytes, data: bytes) -> bool:
    """Send a stored message to whoever listens on ``dsubj`` with the message's own ``subject`` in the frame, as
    nats-server delivers consumer messages (``MSG <original subject> <sid> <ack reply> ...``)."""
    return server.route(None, dsubj, reply, len(hdr), hdr + data if hdr else data, subject)


def _headers_only(hdr: bytes, size: int) -> bytes:
    """nats-server convertToHeadersOnly: keep the headers, add ``Nats-Msg-Size``, drop the payload."""
    base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
    return base + MSG_SIZE_HDR + b": %d\r\n\r\n" % size
