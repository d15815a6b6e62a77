"""One consumer: its position over the stream, delivery selection, the delivery loop, info, and its life cycle.

Theory of operation
-------------------
A consumer is a cursor over its stream (nats-server ``consumer``): ``sseq`` is the next stream sequence to look at,
``dseq`` the next consumer (delivery) sequence.  ``pending`` / ``rdc`` / ``rdq`` hold what is delivered but not
acknowledged (see :mod:`.redelivery`), ``adflr`` / ``asflr`` the ack floor.  Every change is mirrored into the
``ConsumerStore`` (``update_delivered`` / ``update_acks``), which is what consumer info reports and what a restart
reads back; file stores are flushed by the stream's :class:`~.stream_consumers.ConsumerSet` shortly after a change
and when the server stops, so a delivered-but-unacked message is redelivered after a restart.

Delivery never waits on anything: :meth:`kick` runs :meth:`_run` in-line, which repeats "pick the next message,
pick its destination, send" until there is nothing to send or no one to send to (nats-server
``loopAndGatherMsgs``).  The next message is, in this order: a queued redelivery (which ignores ``max_ack_pending``),
nothing if ``max_ack_pending`` is reached, the next entry of the last-per-subject start list, else the next stored
message at or after ``sseq`` that matches the filters, found with the store's filtered loads (no scans).  The
destination is the deliver subject (push, while someone listens and flow control allows) or the head of the pull
wait queue.  A long backlog is sent in slices of :data:`RUN_SLICE` messages, continued on the next loop turn, so a
new consumer on a big stream does not stall the server.

A consumer that cannot use a new message (no waiting pull, no push interest, at max_ack_pending, paused) is not in
its stream's *ready* set and costs nothing per published message; being kicked by an ack, a pull request or new
interest puts it back (:meth:`_update_ready`).

The ack subject carries ``pending``: the messages left to deliver after this one, which KV watchers and object store
readers use to detect the end of the initial data.  It comes from :meth:`num_pending`, a count kept from the store's
``num_pending`` and adjusted while the consumer delivers or is ready (new matching messages add one), so it is exact
without a store query per message.
"""
from __future__ import annotations

import asyncio
import random
import secrets
from collections import deque
from typing import TYPE_CHECKING

from protocol.jsapi.consumer_config import ConsumerConfig, filter_subjects, is_durable, with_dynamic_consumer_metadata
from protocol.jsapi.timefmt import format_time
from protocol.subjects import has_wildcard, subject_matches
from storage.consumer import FileConsumerStore
from storage.records import ConsumerState, Pending, SequencePair

from ..version import API_LEVEL, VERSION
from . import consumer_advisories as adv
from . import jsonout
from .acks import AckMixin
from .pull import PullMixin, WaitQueue
from .push import PushMixin
from .redelivery import RedeliveryMixin

if TYPE_CHECKING:  # pragma: no cover
    from storage.base import ConsumerStore
    from storage.records import StoredMsg

    from .stream_consumers import ConsumerSet

RUN_SLICE = 1024  # messages per delivery pass before yielding to the event loop
MSG_SIZE_HDR = b"Nats-Msg-Size"
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def create_consumer_name() -> str:
    """An 8-character name for a legacy ephemeral (nats-server createConsumerName)."""
    return "".join(secrets.choice(_B62) for _ in range(8))


class Consumer(AckMixin, RedeliveryMixin, PullMixin, PushMixin):
    # Thousands of consumers per stream are normal: no per-instance __dict__.
    __slots__ = (
        "cset", "stream", "server", "clock", "config", "name", "created", "store", "persistent", "closed", "durable",
        "filters", "_literal", "_wild", "filtered", "sseq", "dseq", "adflr", "asflr", "pending", "rdc", "rdq", "lss",
        "lss_resume", "maxp", "maxdc", "sfreq", "waiting", "active", "ldt", "lat", "_ptmr", "_ptmr_end", "_hb_timer",
        "_dtmr", "_wq_timer", "_wq_timer_at", "_pause_timer", "_delay_timer", "_lwqic", "dthresh", "pbytes", "maxpb",
        "pblimit", "fcsz", "fcid", "_rl_rate", "_rl_burst", "_rl_tokens", "_rl_last", "_unwatch", "_replay",
        "_replay_lseq", "_lts", "_held", "_npc", "_np_last", "_np_gen", "_running", "_again", "_continue_scheduled",
        "_stop", "_ack_pre", "__weakref__",
    )

    def __init__(self, cset: "ConsumerSet", config: ConsumerConfig, name: str, created: int,
                 store: "ConsumerStore") -> None:
        stream = cset.stream
        self.cset = cset
        self.stream = stream
        self.server = stream.server
        self.clock = stream.clock
        self.config = config
        self.name = name
        self.created = created
        self.store = store
        self.persistent = isinstance(store, FileConsumerStore)
        self.closed = False
        self.durable = is_durable(config)
        self._set_filters(config)
        self.sseq = 1
        self.dseq = 1
        self.adflr = 0
        self.asflr = 0
        self.pending: dict[int, list[int]] = {}
        self.rdc: dict[int, int] = {}
        self.rdq: dict[int, None] = {}
        self.lss: deque[int] | None = None
        self.lss_resume = 0
        self.maxp = config.max_ack_pending
        self.maxdc = max(config.max_deliver, 0)
        self.sfreq = _sample_freq(config.sample_freq)
        self.waiting: WaitQueue | None = None if config.deliver_subject else WaitQueue(config.max_waiting)
        self.active = False
        self.ldt = 0
        self.lat = 0
        # timers (all from the server clock)
        self._ptmr = None
        self._ptmr_end = 0.0
        self._hb_timer = None
        self._dtmr = None
        self._wq_timer = None
        self._wq_timer_at = 0.0
        self._pause_timer = None
        self._delay_timer = None
        self._lwqic = 0.0
        self.dthresh = 0.0
        # push flow control / rate limit
        self.pbytes = self.maxpb = self.pblimit = self.fcsz = 0
        self.fcid = ""
        self._rl_rate = 0.0
        self._rl_burst = self._rl_tokens = self._rl_last = 0.0
        self._unwatch = None
        # replay original
        self._replay = config.replay_policy == "original"
        self._replay_lseq = 0
        self._lts = 0
        # a prepared delivery waiting for replay spacing or the rate limit
        self._held = None
        # num pending cache (see num_pending)
        self._npc = -1
        self._np_last = -1
        self._np_gen = -1
        self._running = False
        self._again = False
        self._stop = ""
        self._continue_scheduled = False
        self._ack_pre = f"$JS.ACK.{stream.name}.{name}."

    # ------------------------------------------------------------------ filters
    def _set_filters(self, config: ConsumerConfig) -> None:
        fs = filter_subjects(config)
        self.filters = fs
        self._literal = {f for f in fs if not has_wildcard(f)}
        self._wild = [f for f in fs if has_wildcard(f)]
        # A single filter that is exactly the stream's only subject is no filter at all (nats-server isFiltered).
        subs = self.stream.config.subjects or []
        self.filtered = bool(fs) and not (len(fs) == 1 and len(subs) == 1 and subs[0] == fs[0])

    def matches(self, subject: str) -> bool:
        if not self.filters:
            return True
        if subject in self._literal:
            return True
        for f in self._wild:
            if subject_matches(f, subject):
                return True
        return False

    # ------------------------------------------------------------------ start / state
    def start(self, has_state: bool) -> None:
        """Position the consumer (from the stored state or the deliver policy) and begin delivering."""
        if has_state:
            self._apply_stored_state()
        else:
            self._select_starting_seq()
        if self.waiting is None:
            self._start_push()
        self._update_inactive_threshold()
        if self.dthresh > 0 and (self.waiting is not None or not self.active):
            self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)
        self._update_pause_timer()
        if self._replay:
            self._replay_lseq = self.stream.store.last_seq
        if self.pending:
            # After a restart check pending soon (nats-server: 500ms-1.5s, or sooner with a short ack_wait).
            delay = 0.5 + random.random()
            if self.config.ack_wait / 1e9 < delay:
                delay = self._ack_wait(0)
            self._reset_ptmr(delay)
            self.cset.has_pending(self)
        # The caller kicks delivery off (after taking the create reply's info snapshot, as nats-server does).

    def _apply_stored_state(self) -> None:
        st = self.store
        self.sseq = st.ds + 1
        self.dseq = st.dc + 1
        self.adflr, self.asflr = st.ac, st.as_
        self.pending = {s: [p.sequence, p.timestamp] for s, p in st.pending.items()}
        self.rdc = dict(st.redelivered)
        last = self.stream.store.last_seq
        if self.sseq - 1 > last:
            self._reconcile(last)
        first = self.stream.store.first_seq
        for s in [s for s in self.rdc if s < first]:
            del self.rdc[s]

    def _reconcile(self, last: int) -> None:
        """The stream lost data and went back below our position (nats-server reconcileStateWithStream)."""
        if self.asflr > last:
            self.asflr = last
            self.adflr = max(self.dseq - 1, 0)
            self.pending, self.rdc = {}, {}
        self.pending = {s: p for s, p in self.pending.items() if s <= last}
        self.rdc = {s: n for s, n in self.rdc.items() if s <= last}
        if not self.pending:
            self.sseq, self.dseq = self.asflr + 1, self.adflr + 1
        else:
            self.sseq = max(self.pending) + 1
            self.dseq = max(p[0] for p in self.pending.values()) + 1

    def _select_starting_seq(self) -> None:
        """nats-server selectStartingSeqNo."""
        cfg = self.config
        store = self.stream.store
        first, last = store.first_seq, store.last_seq
        dp = cfg.deliver_policy
        sseq = 0
        if cfg.opt_start_seq == 0:
            if dp == "all":
                sseq = first
            elif dp == "last":
                if not self.filters:
                    sseq = last
                else:
                    for f in self.filters:
                        ss = store.filtered_state(1, f)
                        if ss.last > sseq:
                            sseq = ss.last
            elif dp == "last_per_subject":
                if self.stream.config.max_msgs_per_subject == 1:
                    sseq = first
                else:
                    seqs = store.multi_last_seqs(self.filters or [">"], 0, 0)
                    self.lss_resume = last
                    if not seqs:
                        sseq = last
                    else:
                        sseq = seqs[0]
                        self.lss = deque(seqs)
            elif cfg.opt_start_time is not None:
                sseq = store.get_seq_from_time(cfg.opt_start_time.unix_ns)
                if self.filters:
                    nseq = last
                    for f in self.filters:
                        ss = store.filtered_state(first, f)
                        if sseq <= ss.first < nseq:
                            nseq = ss.first
                    if sseq < nseq < last:
                        sseq = nseq
            else:  # new
                sseq = last + 1
        else:
            sseq = cfg.opt_start_seq
        if first == 0 and cfg.opt_start_seq == 0:
            sseq = 1
        elif sseq > last and cfg.opt_start_seq == 0:
            sseq = last + 1
        elif sseq < first:
            sseq = first
        self.sseq = max(sseq, 1)
        self.dseq = 1
        self.adflr = 0
        self.asflr = self.sseq - 1
        if hasattr(self.store, "set_starting"):
            self.store.set_starting(self.sseq - 1)
            self._state_changed()

    def _state_changed(self) -> None:
        if self.persistent:
            self.cset.dirty(self)

    # ------------------------------------------------------------------ num pending
    def num_pending(self) -> int:
        store = self.stream.store
        last = store.last_seq
        if self._npc >= 0 and self._np_last == last and self._np_gen == self.cset.gen:
            return self._npc
        n = self._calc_num_pending()
        self._npc, self._np_last, self._np_gen = n, last, self.cset.gen
        return n

    def _np_valid(self) -> bool:
        return self._npc >= 0 and self._np_last == self.stream.store.last_seq and self._np_gen == self.cset.gen

    def _calc_num_pending(self) -> int:
        if self.lss:
            return len(self.lss) + self._count(self.lss_resume + 1)
        return self._count(self.sseq)

    def _count(self, start: int) -> int:
        store = self.stream.store
        if start > store.last_seq:
            return 0
        if not self.filters:
            return store.num_pending(start, "")
        return sum(store.num_pending(start, f) for f in self.filters)

    # ------------------------------------------------------------------ delivery
    def kick(self) -> None:
        """Something changed that may allow delivery: run the delivery loop now (never re-entered)."""
        if self.closed:
            return
        if self._running:
            self._again = True
            return
        self._run()

    def _can_deliver(self) -> bool:
        if self._held is not None or self._paused():
            return False
        if self.waiting is None:
            return self.active and not self._fc_blocked()
        return bool(self.waiting.q)

    def _run(self) -> None:
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
                        break
                    sent += 1
                    if sent >= RUN_SLICE:
                        self._continue_later()
                        break
                if not self._again or self.closed:
                    break
        finally:
            self._running = False
        if self.closed:
            return
        if self._replay and self.sseq > self._replay_lseq:
            self._replay = False
        if self.waiting is not None:
            self._process_waiting(stop != "maxp")
        self._update_ready()

    def _continue_later(self) -> None:
        if self._continue_scheduled:
            return
        self._continue_scheduled = True

        def cont() -> None:
            self._continue_scheduled = False
            self.kick()

        asyncio.get_running_loop().call_soon(cont)

    def _load_next(self, start: int) -> "tuple[StoredMsg | None, int]":
        store = self.stream.store
        fs = self.filters
        if not fs:
            return store.load_next_msg("", start)
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
        """nats-server getNextMsg: (message, delivery count, source) or None with ``_stop`` set."""
        store = self.stream.store
        while self.rdq:
            seq = self._next_redelivery()
            r = self.rdc.get(seq, 0) + 1
            self.rdc[seq] = r
            dc = r + 1
            if self.maxdc and dc > self.maxdc:
                if dc == self.maxdc + 1:
                    adv.max_deliveries(self, seq, dc - 1)
                p = self.pending.pop(seq, None)
                if p is not None:
                    self.store.update_delivered(p[0], seq, dc, p[1])
                    self._move_ack_floor(p[0], seq)
                    self._state_changed()
                continue
            sm = store.load_msg(seq)
            if sm is None:
                self.rdc[seq] -= 1
                p = self.pending.get(seq)
                if p is not None:
                    self.process_term(seq, p[0], dc - 1, adv.TERM_UNACKED_LIMITS_REASON, "")
                continue
            return sm, dc, "rdq"
        if self.maxp > 0 and len(self.pending) >= self.maxp:
            self._stop = "maxp"
            return None
        valid = self._np_valid()
        while self.lss:
            seq = self.lss.popleft()
            if not self.lss:
                self.lss = None
                self.sseq = self.lss_resume + 1
            else:
                self.sseq = seq + 1
            sm = store.load_msg(seq)
            if valid:
                self._npc -= 1
            if sm is not None:
                return sm, 1, "lss"
        sm, seq = self._load_next(self.sseq)
        if sm is None:
            if seq >= self.sseq:
                self.sseq = seq + 1
            self._stop = "eof"
            return None
        self.sseq = sm.seq + 1
        if valid:
            self._npc -= 1
        return sm, 1, "new"

    def _unget(self, sm: "StoredMsg", dc: int, src: str) -> None:
        """A message was taken but could not be sent: put it back where it came from."""
        if src == "rdq":
            self.rdc[sm.seq] = self.rdc.get(sm.seq, 1) - 1
            self.rdq[sm.seq] = None
        elif src == "lss":
            if self.lss is None:
                self.lss = deque()
            self.lss.appendleft(sm.seq)
            self._npc = -1
        elif sm.seq == self.sseq - 1:
            self.sseq -= 1
            self._npc = -1

    def _prepare_and_send(self, sm: "StoredMsg", dc: int, src: str) -> bool:
        pending = self.num_pending()
        ack = f"{self._ack_pre}{dc}.{sm.seq}.{self.dseq}.{sm.ts}.{pending}"
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

    def _send_held(self) -> None:
        self._delay_timer = None
        held, self._held = self._held, None
        if held is None or self.closed:
            return
        self._send(held)
        self.kick()

    def _send(self, prepared: tuple) -> None:
        dsubj, ack, sm, dc, hdr, data, wrn, wrb = prepared
        dseq = self.dseq
        self.dseq += 1
        seq = sm.seq
        now = self.clock.time_ns()
        psz = len(sm.subject) + len(ack) + len(hdr) + len(data)
        if self.maxpb > 0:
            self.pbytes += psz
        try:
            self.store.update_delivered(dseq, seq, dc, sm.ts)
        except Exception:  # noqa: BLE001 - ack none redelivery cannot happen; state stays consistent enough
            pass
        self.ldt = now
        self._state_changed()
        policy = self.config.ack_policy
        if policy == "none":
            self.adflr, self.asflr = dseq, seq
        else:
            self._track_pending(seq, dseq, now)
        deliver_msg(self.server, dsubj, sm.subject, ack, hdr, data)
        if self.maxpb > 0:
            self._need_flow_control(psz)  # after the message, as nats-server deliverMsg
        if self.waiting is None:
            if self.config.idle_heartbeat:
                self._reset_hb()
        elif self.dthresh > 0:
            self.waiting.last = self.clock.monotonic()
        if policy == "none" and self.stream.config.retention != "limits":
            self.cset.ack_msg(None, seq)
        if self.waiting is not None and wrn <= 0 and wrb > 0:
            from .pull import status_pending

            self.server.publish(dsubj, b"", "", status_pending(409, "Batch Completed", wrn, wrb))

    # ------------------------------------------------------------------ ready set
    def _update_ready(self) -> None:
        ready = not self.closed and self._can_deliver() and not (self.maxp > 0 and len(self.pending) >= self.maxp)
        self.cset.set_ready(self, ready)

    def _after_change(self) -> None:
        if not self._running:
            self._update_ready()

    # ------------------------------------------------------------------ pause
    def _paused(self) -> bool:
        pu = self.config.pause_until
        return pu is not None and not pu.is_zero and self.clock.time_ns() < pu.unix_ns

    def _update_pause_timer(self) -> None:
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        if not self._paused():
            return
        delay = (self.config.pause_until.unix_ns - self.clock.time_ns()) / 1e9
        self._pause_timer = self.clock.call_later(delay, self._unpause)

    def _unpause(self) -> None:
        self._pause_timer = None
        if self.closed:
            return
        adv.pause(self, False, None)
        self.kick()

    # ------------------------------------------------------------------ inactivity
    def _update_inactive_threshold(self) -> None:
        it = self.config.inactive_threshold
        if it <= 0:
            self.dthresh = 0.0
        elif self.waiting is not None or (not self.durable and self.cset.defaulted_threshold(self)):
            self.dthresh = it / 1e9 + 0.1 + random.random() * 0.9  # nats-server adds up to 1s of jitter
        else:
            self.dthresh = it / 1e9

    def _cancel_delete_timer(self) -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
            self._dtmr = None

    def _suppress_deletion(self) -> None:
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

    def _delete_not_active(self) -> None:
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
    def update_config(self, cfg: ConsumerConfig) -> None:
        """nats-server updateConfig for an already checked config."""
        old = self.config
        if cfg.deliver_subject != old.deliver_subject and self.waiting is None:
            self.change_deliver_subject(cfg.deliver_subject)
        if cfg.max_ack_pending != old.max_ack_pending:
            self.maxp = cfg.max_ack_pending
        if cfg.ack_wait != old.ack_wait and self._ptmr is not None:
            self._reset_ptmr(0.1)
        if cfg.sample_freq != old.sample_freq:
            self.sfreq = _sample_freq(cfg.sample_freq)
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
        op = old.pause_until.unix_ns if old.pause_until is not None else 0
        np_ = cfg.pause_until.unix_ns if cfg.pause_until is not None else 0
        if op != np_:
            self._update_pause_timer()
            adv.pause(self, self._paused(), np_ if self._paused() else None)
        if new_filters:
            self._set_filters(cfg)
            self.cset.filters_changed(self)
            self._npc = -1
        self.kick()

    # ------------------------------------------------------------------ retention / purge
    def need_ack(self, sseq: int, subject: str) -> bool:
        """nats-server needAck: does this consumer still have to see (or ack) ``sseq``?"""
        if self.filtered and not self.matches(subject):
            return False
        if self.config.ack_policy == "explicit":
            need = sseq > self.asflr and (sseq >= self.sseq or sseq in self.pending)
        else:
            need = sseq > self.asflr
        return need or sseq in self.rdc

    def purged(self, first: int) -> None:
        """The stream was purged (fully, by subject or up to a sequence); ``first`` is its new first sequence
        (nats-server consumer.purge, always checking the remaining pending messages: Skiff is not told which
        subject was purged)."""
        if self.closed:
            return
        store = self.stream.store
        if self.sseq < first:
            self.sseq = first
        if self.lss:
            self.lss = deque(s for s in self.lss if s >= first and store.load_msg(s) is not None) or None
        changed = False
        for seq, p in list(self.pending.items()):
            if seq < first or store.load_msg(seq) is None:
                if p[0] > self.adflr:
                    self.adflr = p[0]
                    if self.adflr > self.dseq:
                        self.dseq = self.adflr
                del self.pending[seq]
                self.rdc.pop(seq, None)
                self.rdq.pop(seq, None)
                self.lat = self.clock.time_ns()
                changed = True
        if self.asflr < first - 1:
            self.asflr = first - 1
            changed = True
        if not self.pending:
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
            self.rdc.clear()
            self.cset.maybe_no_pending(self)
        for seq in [s for s in self.rdq if s < first]:
            del self.rdq[seq]
        self._npc = -1
        if changed:
            # nats-server writes the consumer's own view to the store after a purge (writeStoreState).
            self._write_store_state()
        self.kick()

    def _write_store_state(self) -> None:
        state = ConsumerState(SequencePair(self.dseq - 1, self.sseq - 1), SequencePair(self.adflr, self.asflr),
                              {s: Pending(p[0], p[1]) for s, p in self.pending.items()}, dict(self.rdc))
        try:
            self.store.set_state(state, force=True)
        except (ValueError, AttributeError) as e:
            self.server.log_warning("JetStream consumer state not written", stream=self.stream.name,
                                    consumer=self.name, error=str(e))
        self._state_changed()

    # ------------------------------------------------------------------ stop
    def stop(self, delete: bool = False, advisory: bool = True) -> None:
        if self.closed:
            return
        if delete and advisory:
            adv.action(self, False)
        if self.waiting is not None:
            self._release_waiting(notify=delete)
        self.closed = True
        for t in (self._ptmr, self._dtmr, self._pause_timer, self._delay_timer):
            if t is not None:
                t.cancel()
        self._ptmr = self._dtmr = self._pause_timer = self._delay_timer = None
        self._stop_push()
        self.cset.forget(self)
        try:
            if delete:
                self.store.delete()
            else:
                self.store.flush()
                self.store.stop()
        except Exception as e:  # noqa: BLE001 - a failing disk must not break a shutdown or a delete
            self.server.log_error("JetStream consumer store close failed", stream=self.stream.name,
                                  consumer=self.name, error=str(e))

    # ------------------------------------------------------------------ info
    def info(self, dynamic_meta: bool = True) -> dict:
        cfg = self.config
        if dynamic_meta:
            cfg = with_dynamic_consumer_metadata(cfg, VERSION, API_LEVEL)
        st = self.store
        if st.dc != 0 or st.ds != 0:
            d_c, d_s = st.dc, st.ds
        else:
            d_c, d_s = max(self.dseq, 1) - 1, max(self.sseq, 1) - 1
        delivered: dict = {"consumer_seq": d_c, "stream_seq": d_s}
        if self.ldt:
            delivered["last_active"] = format_time(self.ldt)
        ack_floor: dict = {"consumer_seq": st.ac, "stream_seq": st.as_}
        if self.lat:
            ack_floor["last_active"] = format_time(self.lat)
        if self.waiting is not None:
            self._process_waiting(False)
        out: dict = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": format_time(self.created),
            "config": jsonout.Raw(cfg.to_json()),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(self.pending),
            "num_redelivered": 0 if cfg.max_deliver == 1 else len(self.rdc),
            "num_waiting": len(self.waiting) if self.waiting is not None else 0,
            "num_pending": self._info_num_pending(),
        }
        if self.waiting is None and self.active:
            out["push_bound"] = True
        if self._paused():
            out["paused"] = True
            out["pause_remaining"] = self.config.pause_until.unix_ns - self.clock.time_ns()
        out["ts"] = format_time(self.clock.time_ns())
        if cfg.priority_groups:
            out["priority_groups"] = [{"group": cfg.priority_groups[0]}]
        return out

    def _info_num_pending(self) -> int:
        store = self.stream.store
        if self.sseq > store.last_seq and not self.lss:
            return 0
        return self.num_pending()


def deliver_msg(server, dsubj: str, subject: str, reply: str, hdr: bytes, data: bytes) -> bool:
    """Send a stored message to whoever listens on ``dsubj`` with the message's own ``subject`` in the frame, as
    nats-server delivers consumer messages (``MSG <original subject> <sid> <ack reply> ...``).  Routing, queue-group
    picking and frame writing are the server's own (``_pick`` / ``_deliver`` / ``_frame_parts``)."""
    from ..core import server as core

    payload = hdr + data if hdr else data
    hlen = len(hdr)
    plain, queues = server.sublist.match(dsubj)
    if not plain and not queues:
        return False
    head, tail = core._frame_parts(subject, reply, hlen, len(payload))
    for sub in plain:
        if sub.conn is None:
            sub.callback(sub, dsubj, reply, hlen, payload, None)
        else:
            server._deliver(sub, sub.conn, head, tail, hlen, payload)
    for members in queues:
        sub = server._pick(members, None)
        if sub is None:
            continue
        if sub.conn is None:
            sub.callback(sub, dsubj, reply, hlen, payload, None)
        else:
            server._deliver(sub, sub.conn, head, tail, hlen, payload)
    return True


def _headers_only(hdr: bytes, size: int) -> bytes:
    """nats-server convertToHeadersOnly: keep the headers, add ``Nats-Msg-Size``, drop the payload."""
    base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
    return base + MSG_SIZE_HDR + b": %d\r\n\r\n" % size


def _sample_freq(text: str) -> int:
    if not text:
        return 0
    try:
        return int(text.rstrip("%"))
    except ValueError:
        return 0
