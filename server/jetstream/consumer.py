"""One consumer: what it is made of, its start position, its pending count, info, purge handling and stop.

Theory of operation
-------------------
A consumer is a cursor over its stream (nats-server ``consumer``).  Its bookkeeping is ``core``, a
:class:`~.consumer_core.ConsumerCore` with no I/O: ``sseq`` (the next stream sequence to look at), ``dseq`` (the next
consumer / delivery sequence), ``pending`` / ``rdc`` / ``rdq`` (what is delivered but not acknowledged, and what
comes back), ``adflr`` / ``asflr`` (the ack floor); every change of the ack floor is in that file.

Around the core, each part owns its own state and talks to the others through this class:

=====================================  =============================================================================
``delivery`` (:mod:`.delivery`)        the delivery loop: next message, destination, send; ``pacer`` holds a
                                       delivery back for ``replay_policy: original`` or ``rate_limit_bps`` (None
                                       for consumers with neither)
``push`` (:mod:`.push`)                push adapter: deliver-subject interest, idle heartbeats, flow control
``pull`` (:mod:`.pull`)                pull adapter: the wait queue of pull requests, their statuses and timer,
                                       and priority groups (:mod:`.priority`); exactly one of push / pull is set
``ack_timer`` (:mod:`.redelivery`)     the ack-wait timer that hands expired messages back to the core
``state`` (:mod:`.consumer_state`)     records the core's outcomes in the ``ConsumerStore`` (what info reports and
                                       a restart reads back) and marks the consumer dirty for its stream's writer
``idle`` (:mod:`.lifecycle`)           the inactive-threshold timer (None without a threshold)
``pause`` (:mod:`.pause`)              the ``pause_until`` deadline and its timer (None if never paused)
=====================================  =============================================================================

Acks (:mod:`.acks`) are functions over these parts: they read the ack, let the core decide, and record, answer
and advise.  Advisories are :mod:`.consumer_advisories`'.  This module holds the rest: the config, the filters, the
start position, the pending count, info, purge handling, config updates and stop.

A consumer that cannot use a new message (no waiting pull, no push interest, at max_ack_pending, paused) is not in
its stream's *ready* set and costs nothing per published message; being kicked by an ack, a pull request or new
interest puts it back (:meth:`~.delivery.Delivery.update_ready`).

The ack subject carries ``pending``: the messages left to deliver after this one, which KV watchers and object store
readers use to detect the end of the initial data.  It comes from :meth:`num_pending`, a count kept from the store's
``num_pending`` and adjusted while the consumer delivers or is ready (new matching messages add one:
:meth:`stream_appended`), so it is exact without a store query per message.
"""
from __future__ import annotations

import weakref
from collections import deque
from typing import TYPE_CHECKING

from skiff.protocol.jsapi.consumer_config import ConsumerConfig, filter_subjects, is_durable, with_dynamic_consumer_metadata
from skiff.protocol.jsapi.subjects import ACK_T
from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.subjects import has_wildcard, subject_matches
from skiff.storage.consumer import FileConsumerStore

from ..ids import nuid
from ..version import API_LEVEL, VERSION
from . import acks
from . import consumer_advisories as adv
from . import jsonout
from .consumer_core import ConsumerCore
from .consumer_state import StateRecorder
from .delivery import Delivery, Pacer, status
from .lifecycle import Inactivity, sample_freq
from .pause import PauseTimer, pause_until_ns
from .priority import REASON_ADMIN
from .pull import PullDelivery
from .push import PushDelivery
from .redelivery import AckTimer

if TYPE_CHECKING:  # pragma: no cover
    from skiff.storage.base import ConsumerStore

    from .pull import WaitQueue
    from .stream_consumers import ConsumerSet


def create_consumer_name() -> str:
    """An 8-character name for a legacy ephemeral (nats-server createConsumerName)."""
    return nuid(8)


MATCH_MEMO = 1024  # subjects whose filter match a consumer keeps (Consumer.matches)


class Consumer:
    # Thousands of consumers per stream are normal: no per-instance __dict__, and the parts a consumer does not use
    # (pacer, idle, pause, the other adapter) are None.
    __slots__ = (
        "cset", "stream", "server", "clock", "_config", "core", "name", "created", "store", "closed", "durable",
        "filters", "literal", "wild", "fwc_prefix", "filtered", "mmemo", "lss", "lss_resume", "sfreq", "ldt", "lat",
        "npc", "np_last", "np_gen", "ack_pre",
        "state", "delivery", "push", "pull", "ack_timer", "pacer", "idle", "pause", "__weakref__",
    )

    def __init__(self, cset: "ConsumerSet", config: ConsumerConfig, name: str, created: int,
                 store: "ConsumerStore") -> None:
        stream = cset.stream
        self.cset = cset
        self.stream = stream
        self.server = stream.server
        self.clock = stream.clock
        self.core = ConsumerCore()
        self.pause: PauseTimer | None = None
        self.config = config  # configures the core and the pause deadline (the property below)
        self.name = name
        self.created = created
        self.store = store
        self.closed = False
        self.durable = is_durable(config)
        self._set_filters(config)
        self.lss: deque[int] | None = None
        self.lss_resume = 0
        self.sfreq = sample_freq(config.sample_freq)
        self.ldt = 0  # wall time of the last delivery
        self.lat = 0  # wall time of the last ack
        # num pending cache (see num_pending): the count, for the stream's last sequence and consumer-set generation
        self.npc = -1
        self.np_last = -1
        self.np_gen = -1
        self.ack_pre = ACK_T.format(stream=stream.name, consumer=name) + "."
        self.state = StateRecorder(self, store, isinstance(store, FileConsumerStore))
        self.delivery = Delivery(self)
        self.push: PushDelivery | None = PushDelivery(self) if config.deliver_subject else None
        self.pull: PullDelivery | None = None if config.deliver_subject else PullDelivery(self)
        self.ack_timer = AckTimer(self)
        self.pacer: Pacer | None = Pacer(self) if config.replay_policy == "original" else None
        self.idle: Inactivity | None = Inactivity(self) if config.inactive_threshold > 0 else None

    # ------------------------------------------------------------------ config
    @property
    def config(self) -> ConsumerConfig:
        return self._config

    @config.setter
    def config(self, cfg: ConsumerConfig) -> None:
        self._config = cfg
        self.core.configure(cfg.ack_policy, cfg.ack_wait, cfg.backoff, cfg.max_ack_pending, cfg.max_deliver,
                            cfg.flow_control)
        until = pause_until_ns(cfg)
        if until is not None and self.pause is None:
            self.pause = PauseTimer(self)
        if self.pause is not None:
            self.pause.until = until

    @property
    def persistent(self) -> bool:
        return self.state.persistent

    @property
    def waiting(self) -> "WaitQueue | None":
        """The pull wait queue (None for a push consumer)."""
        return self.pull.waiting if self.pull is not None else None

    @property
    def active(self) -> bool:
        """A push consumer someone listens to (``push_bound``)."""
        return self.push is not None and self.push.active

    def paused(self) -> bool:
        return self.pause is not None and self.pause.paused()

    # ------------------------------------------------------------------ filters
    def _set_filters(self, config: ConsumerConfig) -> None:
        fs = filter_subjects(config)
        self.filters = fs
        self.mmemo: dict[str, bool] | None = None  # what matches() answered per subject, for these filters
        self.literal = {f for f in fs if not has_wildcard(f)}
        self.wild = [f for f in fs if has_wildcard(f)]
        # "a.b.>" with no other wildcard matches exactly the subjects starting with "a.b.": a str.startswith
        # instead of a token walk for the delivery fast path (delivery.py _load_next).
        f0 = fs[0] if len(fs) == 1 else ""
        self.fwc_prefix = f0[:-1] if f0.endswith(".>") and not has_wildcard(f0[:-2]) else None
        # A single filter that is exactly the stream's only subject is no filter at all (nats-server isFiltered).
        subs = self.stream.config.subjects or []
        self.filtered = bool(fs) and not (len(fs) == 1 and len(subs) == 1 and subs[0] == fs[0])

    def matches(self, subject: str) -> bool:
        if not self.filters:
            return True
        if subject in self.literal:
            return True
        wild = self.wild
        if not wild:
            return False
        # A wildcard filter is asked about the same few subjects over and over (a delivery run over a stream of
        # 10 subjects interleaved asks once per message): the answer per subject is kept, up to MATCH_MEMO of them.
        memo = self.mmemo
        if memo is None:
            memo = self.mmemo = {}
        else:
            r = memo.get(subject)
            if r is not None:
                return r
            if len(memo) >= MATCH_MEMO:
                memo.clear()
        r = False
        for f in wild:
            if subject_matches(f, subject):
                r = True
                break
        memo[subject] = r
        return r

    # ------------------------------------------------------------------ events from clients and the stream
    def kick(self) -> None:
        """Something changed that may allow delivery: run the delivery loop now (never re-entered)."""
        self.delivery.kick()

    def process_next_request(self, reply: str, hdr: bytes, body: bytes) -> None:
        """A pull request (``$JS.API.CONSUMER.MSG.NEXT``, or ``+NXT``)."""
        if not reply or self.closed:
            return
        if self.pull is None:
            self.server.publish(reply, b"", "", status(409, "Consumer is push based"))
            return
        self.pull.process_next_request(reply, hdr, body)

    # An ack arrived: acks.process_ack itself is the method (c.process_ack(toks, reply, msg)), a call less per ack.
    process_ack = acks.process_ack

    def ack(self, sseq: int, dseq: int, dc: int, reply: str, sample: bool) -> bool:
        return acks.ack_msg(self, sseq, dseq, dc, reply, sample)

    def terminate(self, sseq: int, dseq: int, dc: int, reason: str, reply: str) -> bool:
        return acks.terminate(self, sseq, dseq, dc, reason, reply)

    def process_flow_control(self, subject: str, hdr: bytes = b"") -> None:
        if self.push is not None:
            self.push.process_flow_control(subject, hdr)

    def unpin(self, group: str) -> None:
        """UNPIN (priority.unpin_request checked the group is this consumer's)."""
        prio = self.pull.priority if self.pull is not None else None
        if prio is not None:
            prio.unpin(group)
        else:
            adv.unpinned(self, group, REASON_ADMIN)
            self.kick()

    def stream_appended(self, seq: int, subject: str) -> None:
        """A new message ``seq`` (this consumer is ready: its stream only tells ready consumers)."""
        match = self.matches(subject)
        if self.np_last == seq - 1 and self.np_gen == self.cset.gen and self.npc >= 0:
            if match:
                self.npc += 1
            self.np_last = seq
        if match and seq >= self.core.sseq:
            self.delivery.kick()

    def stream_removed_count(self, seq: int, subject: str, gen: int, new_gen: int) -> None:
        """Message ``seq`` left the stream (generation ``gen`` becomes ``new_gen``): keep the pending count of a
        ready consumer exact (the others just recompute when asked)."""
        if self.np_gen == gen and self.npc >= 0:
            if seq >= self.core.sseq and subject and self.matches(subject) and not self.lss:
                self.npc -= 1
            elif not subject or self.lss:
                self.npc = -1
            self.np_gen = new_gen

    def message_removed(self, seq: int) -> None:
        """Message ``seq`` left the stream (limits, a delete): a pending one is terminated (nats-server
        ackTermUnackedLimitsReason), a redelivered one forgets its count."""
        core = self.core
        p = core.pending.get(seq)
        if p is not None:
            self.terminate(seq, p[0], core.rdc.get(seq, 0) or 1, adv.TERM_UNACKED_LIMITS_REASON, "")
            self.delivery.after_change()
        elif core.forget_redelivered(seq):
            self.state.acked(0, seq, "removed")
            self.cset.maybe_no_pending(self)

    # ------------------------------------------------------------------ start / state
    def start(self, has_state: bool) -> None:
        """Position the consumer (from the stored state or the deliver policy) and begin delivering."""
        if has_state:
            self._apply_stored_state()
        else:
            self._select_starting_seq()
        if self.push is not None:
            self.push.start()
        idle = self.idle
        if idle is not None:
            idle.configure()
            if idle.thresh > 0 and not self.active:
                idle.arm()
        if self.pause is not None:
            self.pause.update()
        if self.pacer is not None and self.pacer.replay:
            self.pacer.replay_lseq = self.stream.store.last_seq
        if self.core.pending:
            self.ack_timer.after_restart()
            self.cset.has_pending(self)
        # The caller kicks delivery off (after taking the create reply's info snapshot, as nats-server does).

    def _apply_stored_state(self) -> None:
        st = self.store
        core = self.core
        core.restore((st.dc, st.ds), (st.ac, st.as_), st.pending, st.redelivered)
        last = self.stream.store.last_seq
        if core.sseq - 1 > last:
            core.reconcile(last)
        core.forget_redelivered_below(self.stream.store.first_seq)
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
        self.core.start_at(sseq)
        self.state.starting(self.core.sseq - 1)

    def reset(self, seq: int) -> None:
        """CONSUMER.RESET to stream sequence ``seq`` (consumer_reset.py checked it; nats-server
        resetLocalStartingSeq): nothing outstanding, delivery sequence 1, the store's delivered = ack floor."""
        self.ack_timer.stop()
        self.core.start_at(seq)
        self.ldt = self.lat = 0
        self.npc = -1
        self.cset.maybe_no_pending(self)
        self.state.reset(seq)

    # ------------------------------------------------------------------ num pending
    def num_pending(self) -> int:
        last = self.stream.store.last_seq
        if self.npc >= 0 and self.np_last == last and self.np_gen == self.cset.gen:
            return self.npc
        n = self._calc_num_pending()
        self.npc, self.np_last, self.np_gen = n, last, self.cset.gen
        return n

    def np_valid(self) -> bool:
        return self.npc >= 0 and self.np_last == self.stream.store.last_seq and self.np_gen == self.cset.gen

    def _calc_num_pending(self) -> int:
        if self.lss:
            return len(self.lss) + self._count(self.lss_resume + 1)
        return self._count(self.core.sseq)

    def _count(self, start: int) -> int:
        store = self.stream.store
        if start > store.last_seq:
            return 0
        if not self.filters:
            return store.num_pending(start, "")
        return sum(store.num_pending(start, f) for f in self.filters)

    # ------------------------------------------------------------------ retention / purge
    def need_ack(self, sseq: int, subject: str) -> bool:
        """nats-server needAck: does this consumer still have to see (or ack) ``sseq``?"""
        if self.filtered and not self.matches(subject):
            return False
        return self.core.needs(sseq)

    def purged(self, first: int) -> None:
        """The stream was purged (fully, by subject or up to a sequence); ``first`` is its new first sequence
        (nats-server consumer.purge, always checking the remaining pending messages: Skiff is not told which
        subject was purged)."""
        if self.closed:
            return
        store = self.stream.store
        core = self.core
        if self.lss:
            self.lss = deque(s for s in self.lss if s >= first and store.load_msg(s) is not None) or None
        gone = [seq for seq in core.pending if seq < first or store.load_msg(seq) is None]
        changed = core.purged(first, gone)
        if gone:
            self.lat = self.clock.time_ns()
        if not core.pending:
            self.cset.maybe_no_pending(self)
        self.npc = -1
        if changed:
            # nats-server writes the consumer's own view to the store after a purge (writeStoreState).
            self.state.write_all()
        self.kick()

    # ------------------------------------------------------------------ config update
    def update_config(self, cfg: ConsumerConfig) -> None:
        """nats-server updateConfig for a config already checked by ``check_consumer_update``.  Like Go it wakes
        the delivery loop only for a new max_ack_pending or deliver subject: any other update (a pause change
        included, see pause.py) leaves waiting requests waiting until something else wakes the consumer."""
        old = self.config
        if cfg.deliver_subject != old.deliver_subject and self.push is not None:
            self.push.change_deliver_subject(cfg.deliver_subject)
        if cfg.sample_freq != old.sample_freq:
            self.sfreq = sample_freq(cfg.sample_freq)
        new_filters = filter_subjects(cfg) != self.filters
        self.config = cfg  # max_ack_pending, max_deliver, ack_wait and backoff reach the core here
        if cfg.ack_wait != old.ack_wait:
            self.ack_timer.soon(0.1)  # after the core has the new ack_wait (AckTimer.bounded compares with it)
        if cfg.rate_limit_bps != old.rate_limit_bps:
            if self.pacer is None:
                self.pacer = Pacer(self)
            self.pacer.set_rate_limit(cfg.rate_limit_bps)
        if cfg.inactive_threshold != old.inactive_threshold:
            if self.idle is None:
                self.idle = Inactivity(self)
            idle = self.idle
            idle.configure()
            idle.cancel()
            if idle.thresh > 0:
                idle.arm()
        if self.pause is not None:
            self.pause.changed(old, cfg)
        if new_filters:
            self._set_filters(cfg)
            self.cset.filters_changed(self)
            self.npc = -1
        if cfg.max_ack_pending != old.max_ack_pending or cfg.deliver_subject != old.deliver_subject:
            self.kick()
        else:
            self.delivery.after_change()  # ready (or not) for the next new message, without a delivery pass now

    # ------------------------------------------------------------------ stop
    def stop(self, delete: bool = False, advisory: bool = True, remove_files: bool = True) -> None:
        """Stop; with ``delete`` also remove the state, unless ``remove_files`` is False: the stream is being
        deleted and its directory, with every consumer's, was already renamed aside in one step (persist.py)."""
        if self.closed:
            return
        if delete and advisory:
            adv.action(self, False)
        if self.pull is not None:
            self.pull.stop(notify=delete)
        self.halt()
        self.state.close(delete, remove_files)
        self._unlink_parts()

    def halt(self) -> None:
        """The part of a stop after which nothing reaches the consumer: closed, its timers cancelled, its deliver
        subject no longer watched, out of its stream's sets.  A stream deleting many consumers halts them all at
        once and lets :meth:`finish_delete` follow a slice per loop turn (stream_consumers.py)."""
        self.closed = True
        self.ack_timer.stop()
        for part in (self.idle, self.pause, self.pacer):
            if part is not None:
                part.cancel()
        if self.push is not None:
            self.push.stop()
        self.cset.forget(self)

    def finish_delete(self, remove_files: bool) -> None:
        """The rest of ``stop(delete=True)`` for a halted consumer: the advisory, ``409 Consumer Deleted`` to its
        waiting pull requests, the state.  nats-server sends a consumer's delete advisory through the consumer's own
        queue (consumer.go sendAdvisory, o.outq), not in order with the stream delete's reply."""
        adv.action(self, False)
        if self.pull is not None:
            self.pull.stop(notify=True)
        self.state.close(True, remove_files)
        self._unlink_parts()

    def _unlink_parts(self) -> None:
        """Break the reference cycles between the consumer and its parts (each holds ``c``), so a stopped consumer
        is freed by reference counting alone, the moment the last holder lets go: a consumer in a cycle waited for
        the cyclic collector, whose passes over 10,000 consumers' objects stalled every client, and a
        frozen one (server/core/gcpolicy.py) would never be freed.  A part still held by a callback queued before
        the stop (one that holds the consumer too: delivery.py ``_continue_later``, consumer_state.py
        ``_failed``) reads ``c.closed`` through the weak proxy and returns.  tests/jetstream/test_consumer_memory.py
        checks every way a consumer ends with the collector off."""
        proxy = weakref.proxy(self)
        pull = self.pull
        for part in (self.state, self.delivery, self.push, pull, pull.priority if pull is not None else None,
                     self.ack_timer, self.pacer, self.idle, self.pause):
            if part is not None:
                part.c = proxy
    # ------------------------------------------------------------------ info
    def info(self, dynamic_meta: bool = True) -> dict:
        cfg = self.config
        if dynamic_meta:
            cfg = with_dynamic_consumer_metadata(cfg, VERSION, API_LEVEL)
        st = self.store
        if st.dc != 0 or st.ds != 0:
            d_c, d_s = st.dc, st.ds
        else:
            d_c, d_s = max(self.core.dseq, 1) - 1, max(self.core.sseq, 1) - 1
        delivered: dict = {"consumer_seq": d_c, "stream_seq": d_s}
        if self.ldt:
            delivered["last_active"] = format_time(self.ldt)
        ack_floor: dict = {"consumer_seq": st.ac, "stream_seq": st.as_}
        if self.lat:
            ack_floor["last_active"] = format_time(self.lat)
        if self.pull is not None:
            self.pull.process_waiting(False)
        out: dict = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": format_time(self.created),
            "config": jsonout.Raw(cfg.to_json()),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(self.core.pending),
            "num_redelivered": 0 if cfg.max_deliver == 1 else len(self.core.rdc),
            "num_waiting": len(self.waiting) if self.waiting is not None else 0,
            "num_pending": self._info_num_pending(),
        }
        if self.waiting is None and self.active:
            out["push_bound"] = True
        if self.paused():
            out["paused"] = True
            out["pause_remaining"] = self.config.pause_until.unix_ns - self.clock.time_ns()
        out["ts"] = format_time(self.clock.time_ns())
        prio = self.pull.priority if self.pull is not None else None
        groups = prio.info() if prio is not None else None
        if groups:
            out["priority_groups"] = groups
        return out

    def _info_num_pending(self) -> int:
        store = self.stream.store
        if self.core.sseq > store.last_seq and not self.lss:
            return 0
        return self.num_pending()
