"""Delivery: picking the next message, picking its destination, sending it (nats-server ``loopAndGatherMsgs``).

Theory of operation
-------------------
:class:`Delivery` is the consumer's delivery loop; it owns only the loop's own state (running, asked to run again,
why it stopped, a continuation scheduled).  It never waits on anything: :meth:`Delivery.kick` runs :meth:`_run`
in-line, which repeats "pick the next message, pick its destination, send" until there is nothing to send or no one
to send to.  The next message is, in this order: a queued redelivery (which ignores ``max_ack_pending``; the core's
:meth:`~.consumer_core.ConsumerCore.take_redelivery` counts it, or turns it into a max_deliver), nothing if
``max_ack_pending`` is reached, the next entry of the last-per-subject start list, else the next stored message at
or after the core's ``sseq`` that matches the filters, found with the store's filtered loads (no scans; a wildcard
filter looks at the next message first, see :meth:`Delivery._load_next`).  The
destination comes from the consumer's adapter: the deliver subject of a :class:`~.push.PushDelivery` (while someone
listens and flow control allows) or the request a :class:`~.pull.PullDelivery` selects from its wait queue; a
message nobody can take is put back (:meth:`_unget`).  A long backlog goes out in slices of :data:`RUN_SLICE`
messages, continued on the next loop turn; acks that free slots at ``max_ack_pending`` ask for one pass after the
read that brought them (:meth:`Delivery.kick_soon`) rather than one pass each.  New messages for one client's plain
subscription go out in runs (delivery_run.py ``RunDelivery._send_run``, a base of :class:`Delivery`).

``replay_policy: original`` and ``rate_limit_bps`` hold a prepared delivery in a :class:`Pacer` and finish it from a
clock timer, as nats-server sleeps in its delivery loop; nothing else is delivered meanwhile.  Consumers with
neither have no pacer.

The frame carries the message's stored subject while it is routed on the deliver subject (or the pull request's
inbox) - :meth:`Delivery._send`, as nats-server delivers consumer messages (``MSG <original subject> <sid> <ack
reply> ...``); that subject is matched through the consumer's :class:`DestCache`.  After each pass the consumer
tells its stream whether it wants to hear about new messages (:meth:`Delivery.update_ready`): only *ready*
consumers are touched per published message.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from . import consumer_advisories as adv
from .delivery_run import RunDelivery
from .redelivery import record_max_delivered

if TYPE_CHECKING:  # pragma: no cover
    from skiff.storage.records import StoredMsg

    from .consumer import Consumer

RUN_SLICE = 1024  # messages per delivery pass before yielding to the event loop
PROBE_MISSES = 8  # a wildcard filter whose next message missed this often in a row goes straight to the search
PROBE_RETRY = 256  # ... and looks again after this many loads
MSG_SIZE_HDR = b"Nats-Msg-Size"
LAST_CONSUMER = b"Nats-Last-Consumer"
LAST_STREAM = b"Nats-Last-Stream"
STALLED = b"Nats-Consumer-Stalled"
PENDING_MSGS = "Nats-Pending-Messages"
PENDING_BYTES = "Nats-Pending-Bytes"

# why the last delivery pass stopped
STOP_NONE, STOP_EOF, STOP_MAXP, STOP_SLICE, STOP_HELD = "", "eof", "maxp", "slice", "held"


class Delivery(RunDelivery):
    """The delivery loop of one consumer."""

    __slots__ = ("c", "core", "running", "again", "stop", "cont_scheduled", "passes", "probe_miss", "dest")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.core = c.core
        self.passes = 0  # completed delivery passes (each ends with update_ready)
        self.probe_miss = 0  # unfiltered looks that missed the filter, in a row (_load_next)
        self.running = False
        self.again = False
        self.stop = STOP_NONE
        self.cont_scheduled = False
        self.dest = DestCache()

    def kick(self) -> None:
        """Something changed that may allow delivery: run the delivery loop now (never re-entered)."""
        if self.c.closed:
            return
        if self.running:
            self.again = True
            return
        self._run()

    def can_deliver(self) -> bool:
        # Called twice per delivery pass: the cheap attribute checks first, the pause deadline (a clock read) last.
        c = self.c
        pacer = c.pacer
        if pacer is not None and pacer.held is not None:
            return False
        if c.pull is None:
            if not c.push.can_send():
                return False
        elif not c.pull.waiting.q:
            return False
        pause = c.pause
        return pause is None or not pause.paused()

    def _run(self) -> None:
        c = self.c
        core = self.core
        self.running = True
        stop = STOP_NONE
        try:
            while True:
                self.again = False
                sent = 0
                stop = STOP_NONE
                while not c.closed:
                    if not self.can_deliver():
                        break
                    k = self._send_run(RUN_SLICE - sent)
                    if k:
                        sent += k
                    else:
                        got = self._get_next_msg()
                        if got is None:
                            stop = self.stop
                            break
                        if not self._prepare_and_send(*got):
                            if c.pacer is not None and c.pacer.held is not None:
                                stop = STOP_HELD
                            break
                        sent += 1
                    if sent >= RUN_SLICE:
                        stop = STOP_SLICE
                        self._continue_later()
                        break
                    if core.maxp > 0 and c.pull is None and not core.rdq and len(core.pending) >= core.maxp:
                        # What _get_next_msg would answer next (push only: for a pull the stop reason also depends
                        # on the wait queue); an ack at max_ack_pending runs one delivery per ack, so this saves a
                        # pass through the loop for each of them.
                        stop = self.stop = STOP_MAXP
                        break
                if not self.again or c.closed:
                    break
        finally:
            self.running = False
            self.passes += 1
        if c.closed:
            return
        pacer = c.pacer
        if pacer is not None and pacer.replay and core.sseq > pacer.replay_lseq:
            pacer.replay = False
        if c.pull is not None:
            # Only the end of the available messages ends no_wait requests (not max_ack_pending, not a paused
            # slice of a long backlog, not a delivery held for replay spacing or the rate limit).
            c.pull.process_waiting(stop not in (STOP_MAXP, STOP_SLICE, STOP_HELD))
        self.update_ready()

    def kick_soon(self) -> None:
        """Run the delivery loop once the current read is processed (an ack freed a slot at max_ack_pending).  A
        client acking a run of messages at max_ack_pending would otherwise get one delivery pass per ack, each for
        one message (99,002 passes for 100,000 push deliveries); one pass after the read sends the
        same messages in the same order, a batch of frames for one flush."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous unit test): now
            self.kick()
            return
        self._continue_later()

    def _continue_later(self) -> None:
        if self.cont_scheduled:
            return
        self.cont_scheduled = True
        c = self.c  # held by the call as well: a consumer stopped meanwhile is still there to say it is closed

        def cont() -> None:
            self.cont_scheduled = False
            if not c.closed:
                self.kick()

        asyncio.get_running_loop().call_soon(cont)

    def _load_next(self, start: int) -> "tuple[StoredMsg | None, int]":
        c = self.c
        store = c.stream.store
        fs = c.filters
        if not fs:
            # The next message by its sequence first (see _load_next_any), in-line: once per message.
            sm = store.load_msg(start)
            if sm is not None:
                return sm, start
            return store.load_next_msg("", start)
        if len(fs) == 1 and fs[0] in c.literal:
            return store.load_next_msg(fs[0], start)  # the store keeps a literal subject's first and last
        # A wildcard filter, or several: look at the next message first.  Most such filters select most of what
        # the stream holds (the stream's own subject, "S.*" over S.0..S.99), and then that message is the answer
        # for one unfiltered load, where the store's filtered search walks the index once per subject the filter
        # selects (about 18 us a message over 10 subjects, 50 over 32).  A filter that keeps missing
        # stops probing after PROBE_MISSES misses in a row and tries again every PROBE_RETRY loads.
        pm = self.probe_miss
        if pm < PROBE_MISSES or pm >= PROBE_RETRY:
            sm, seq = _load_next_any(store, start)
            if sm is None:
                return sm, seq
            pre = c.fwc_prefix
            if sm.subject.startswith(pre) if pre is not None else c.matches(sm.subject):
                self.probe_miss = 0
                return sm, seq
            self.probe_miss = pm + 1 if pm < PROBE_MISSES else PROBE_MISSES
            start = sm.seq + 1  # that one does not match: the filtered search goes on after it
        else:
            self.probe_miss = pm + 1
        if len(fs) == 1:
            return store.load_next_msg(fs[0], start)
        best = None
        for f in fs:
            sm, _ = store.load_next_msg(f, start)
            if sm is not None and (best is None or sm.seq < best.seq):
                best = sm
        if best is None:
            return None, store.last_seq
        return best, best.seq

    def _get_next_msg(self) -> "tuple[StoredMsg, int, str] | None":
        """nats-server getNextMsg: (message, delivery count, source) or None with ``stop`` set."""
        c = self.c
        store = c.stream.store
        core = self.core
        while core.rdq:
            seq, dc, md = core.take_redelivery()
            if md is not None:
                record_max_delivered(c, md)
                continue
            sm = store.load_msg(seq)
            if sm is None:
                core.put_back(seq, requeue=False)
                p = core.pending.get(seq)
                if p is not None:
                    c.terminate(seq, p[0], dc - 1, adv.TERM_UNACKED_LIMITS_REASON, "")
                continue
            return sm, dc, "rdq"
        if core.maxp > 0 and len(core.pending) >= core.maxp:
            self.stop = STOP_MAXP
            return None
        valid = c.np_valid()
        while c.lss:
            seq = c.lss.popleft()
            if not c.lss:
                c.lss = None
                core.sseq = c.lss_resume + 1
            else:
                core.sseq = seq + 1
            sm = store.load_msg(seq)
            if valid:
                c.npc -= 1
            if sm is not None:
                return sm, 1, "lss"
        sm, seq = self._load_next(core.sseq)
        if sm is None:
            if seq >= core.sseq:
                core.sseq = seq + 1
            self.stop = STOP_EOF
            return None
        core.sseq = sm.seq + 1
        if valid:
            c.npc -= 1
        return sm, 1, "new"

    def _unget(self, sm: "StoredMsg", dc: int, src: str) -> None:
        """A message was taken but could not be sent: put it back where it came from."""
        c = self.c
        if src == "rdq":
            self.core.put_back(sm.seq, requeue=True)
        elif src == "lss":
            if c.lss is None:
                c.lss = deque()
            c.lss.appendleft(sm.seq)
            c.npc = -1
        elif sm.seq == self.core.sseq - 1:
            self.core.sseq -= 1
            c.npc = -1

    def _prepare_and_send(self, sm: "StoredMsg", dc: int, src: str) -> bool:
        c = self.c
        pending = c.num_pending()
        ack = f"{c.ack_pre}{dc}.{sm.seq}.{self.core.dseq}.{sm.ts}.{pending}"
        hdr, data = sm.hdr, sm.data
        cfg = c.config
        if cfg.headers_only:
            hdr = _headers_only(hdr, len(data))
            data = b""
        sz = len(sm.subject) + len(ack) + len(hdr) + len(data)
        wrn = wrb = 0
        pull = c.pull
        if pull is None:
            dsubj = cfg.deliver_subject
        else:
            wr = pull.next_waiting(sz)
            if wr is None:
                self._unget(sm, dc, src)
                return False
            dsubj, wrn, wrb = wr.reply, wr.n, wr.b
            if pull.priority is not None:
                hdr = pull.priority.pin_header(hdr)  # on every message to a pull, after selection (nats-server)
            if wr.n > 0 and wr.hb:
                wr.hbt = c.clock.monotonic() + wr.hb
        pacer = c.pacer
        if pacer is not None and pacer.hold((dsubj, ack, sm, dc, hdr, data, wrn, wrb), sm.ts, sz):
            return False
        self._send(dsubj, ack, sm, dc, hdr, data, wrn, wrb)
        return True

    def send(self, prepared: tuple) -> None:
        """Send a delivery :meth:`_prepare_and_send` prepared (and a :class:`Pacer` held)."""
        self._send(*prepared)

    def _send(self, dsubj: str, ack: str, sm: "StoredMsg", dc: int, hdr: bytes, data: bytes, wrn: int,
              wrb: int) -> None:
        c = self.c
        seq = sm.seq
        now = c.clock.time_ns()
        core = self.core
        first = not core.pending
        dseq = core.deliver(seq, now)
        policy = core.ack_policy
        if policy != "none":
            if first:
                # Joining the stream's set of consumers with pending messages once is enough: it leaves only
                # when pending is empty again (stream_consumers.maybe_no_pending).
                c.cset.has_pending(c)
            c.ack_timer.watch(seq)
        push = c.push
        fc = push is not None and push.maxpb > 0
        if fc:
            psz = len(sm.subject) + len(ack) + len(hdr) + len(data)
            push.pbytes += psz
        c.state.delivered(dseq, seq, dc, sm.ts)
        c.ldt = now  # also what a push consumer's idle heartbeat timer measures from (push.py _hb_fired)
        srv = c.server
        srv.route(None, dsubj, ack, len(hdr), hdr + data if hdr else data, sm.subject, self.dest.valid(srv))
        if fc:
            push.need_flow_control(psz)  # after the message, as nats-server deliverMsg
        pull = c.pull
        if pull is not None:
            idle = c.idle
            if idle is not None and idle.thresh > 0:
                pull.waiting.last = c.clock.monotonic()
        if policy == "none" and c.stream.config.retention != "limits":
            c.cset.ack_msg(seq)
        if pull is not None and wrn <= 0 and wrb > 0:
            pull.batch_completed(dsubj, wrn, wrb)

    # ------------------------------------------------------------------ ready set
    def update_ready(self) -> None:
        c = self.c
        ready = not c.closed and self.can_deliver() and not self.core.full()
        c.cset.set_ready(c, ready)

    def after_change(self) -> None:
        if not self.running:
            self.update_ready()


class Pacer:
    """What holds a delivery back: ``replay_policy: original`` (the stored messages' own spacing) and
    ``rate_limit_bps`` (a token bucket in bytes; burst = the stream's max_msg_size or the server's max_payload, as
    Go's ``rate.NewLimiter`` is set up).  A delivery that has to wait is held and sent from a clock timer."""

    __slots__ = ("c", "replay", "replay_lseq", "lts", "held", "timer", "rate", "burst", "tokens", "last")

    def __init__(self, c: "Consumer") -> None:
        self.c = c
        self.replay = c.config.replay_policy == "original"
        self.replay_lseq = 0
        self.lts = 0
        self.held = None
        self.timer = None
        self.rate = 0.0
        self.burst = self.tokens = self.last = 0.0

    def set_rate_limit(self, bps: int) -> None:
        c = self.c
        if not bps:
            self.rate = 0.0
            return
        self.rate = bps / 8
        mms = c.stream.config.max_msg_size
        self.burst = float(mms if mms and mms > 0 else c.server.options.max_payload)
        self.tokens = self.burst
        self.last = c.clock.monotonic()

    def hold(self, prepared: tuple, ts: int, size: int) -> bool:
        """Hold ``prepared`` (a message stored at ``ts`` of ``size`` bytes) if it has to wait; whether it was held."""
        delay = 0.0
        if self.replay and self.lts > 0:
            d = (ts - self.lts) / 1e9
            if d > 0.001:
                delay = d
        self.lts = ts
        if self.rate:
            delay = max(delay, self._rate_delay(size))
        if delay <= 0:
            return False
        self.held = prepared
        self.timer = self.c.clock.call_later(delay, self._send_held)
        return True

    def _rate_delay(self, size: int) -> float:
        """Reserve ``size`` bytes; the seconds to wait before sending (0 = now)."""
        now = self.c.clock.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        self.tokens -= min(size, self.burst)
        if self.tokens >= 0:
            return 0.0
        return -self.tokens / self.rate

    def _send_held(self) -> None:
        self.timer = None
        held, self.held = self.held, None
        c = self.c
        if held is None or c.closed:
            return
        c.delivery.send(held)
        c.kick()

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def status(code: int, text: str) -> bytes:
    """A status message's header block (no payload, no reply subject): ``NATS/1.0 <code> <text>``."""
    return b"NATS/1.0 %d %s\r\n\r\n" % (code, text.encode())


def status_pending(code: int, text: str, n: int, b: int) -> bytes:
    """A status that ends a pull request, with what it still wanted (``Nats-Pending-Messages`` / ``-Bytes``)."""
    return b"NATS/1.0 %d %s\r\n%s: %d\r\n%s: %d\r\n\r\n" % (
        code, text.encode(), PENDING_MSGS.encode(), n, PENDING_BYTES.encode(), b)


def _load_next_any(store, start: int) -> "tuple[StoredMsg | None, int]":
    """``store.load_next_msg("", start)``, trying ``start`` itself first: a consumer reading a stream in order
    finds its next message there nearly every time, and one load by sequence skips the search for the next live
    slot (a quarter of an unfiltered load, profiled).  A deleted, lost or not yet stored ``start`` takes
    the search."""
    sm = store.load_msg(start)
    if sm is not None:
        return sm, start
    return store.load_next_msg("", start)


class DestCache:
    """The subscriptions of one consumer's latest destination, for :meth:`Server.route` (its ``sublist`` argument:
    ``cache`` and ``match`` are all route reads).

    Deliver subjects and pull-request inboxes are ``_INBOX.`` subjects, which the Sublist does not cache (a reply
    inbox is used once: sublist.py ``_UNCACHED``); but a consumer sends every message of a run, and a push consumer
    every message, to the same one, and matching it each time was ~10% of a push or ordered consumer's delivery
    (profiled).  The entry is good while the Sublist saw no insert and no remove (its own counters), so
    what route finds is exactly what a fresh match would."""

    __slots__ = ("sublist", "cache", "ins", "rem", "hits")

    def __init__(self) -> None:
        self.sublist = None
        self.cache: dict = {}
        self.ins = self.rem = -1
        self.hits = 0  # route counts a cache hit here as on a Sublist; /subsz, like nats-server's, leaves these out

    def valid(self, server) -> "DestCache":
        sl = server.sublist
        if sl.inserts != self.ins or sl.removes != self.rem or sl is not self.sublist:
            self.sublist = sl
            self.ins, self.rem = sl.inserts, sl.removes
            self.cache = {}
        return self

    def match(self, subject: str):
        r = self.sublist.match(subject)
        self.cache = {subject: r}
        return r

    def has_interest(self, subject: str) -> bool:
        """Sublist.has_interest through the cache (call :meth:`valid` first): a pull request's inbox is asked
        about before each message sent to it (nats-server nextWaiting)."""
        r = self.cache.get(subject)
        if r is None:
            r = self.match(subject)
        return bool(r[0] or r[1])


def send_idle_heartbeat(c: "Consumer", subject: str, stalled: str = "") -> None:
    """``NATS/1.0 100 Idle Heartbeat`` with the consumer's positions minus one (``Nats-Last-Consumer`` /
    ``Nats-Last-Stream``, as nats-server) and, while a flow-control request is unanswered, ``Nats-Consumer-Stalled``
    with its reply subject.  Ordered consumers compare ``Nats-Last-Consumer`` with what they saw."""
    core = c.core
    hdr = b"NATS/1.0 100 Idle Heartbeat\r\n%s: %d\r\n%s: %d\r\n" % (
        LAST_CONSUMER, core.dseq - 1, LAST_STREAM, core.sseq - 1)
    if stalled:
        hdr += STALLED + b": " + stalled.encode() + b"\r\n"
    c.server.publish(subject, b"", "", hdr + b"\r\n")


def _headers_only(hdr: bytes, size: int) -> bytes:
    """nats-server convertToHeadersOnly: keep the headers, add ``Nats-Msg-Size``, drop the payload."""
    base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
    return base + MSG_SIZE_HDR + b": %d\r\n\r\n" % size
